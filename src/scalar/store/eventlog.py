"""The event log: batches of input events, appended once, read back in ``seq`` order for replay.

One ``append_batch`` call is one ``Controller.step`` worth of input. Events whose ``stimulus_id`` is already
stored are skipped (re-delivery is a no-op that reports the stored seq); the new ones get increasing seqs and
one batch row holding the step's ``now`` and the writer's lease epoch. Appends are serialized (SQLite: the
write lock of ``BEGIN IMMEDIATE``; PostgreSQL: ``db.serialize_writes``), so seq order is commit order and a
reader that pages by seq never skips an event committed late.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select

from scalar.store import jsoncodec
from scalar.store.db import serialize_writes
from scalar.store.schema import batches, events

_LOOKUP_CHUNK = 500


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An input event to append. ``payload`` must be a JSON object (no Decimal, no datetime)."""

    stimulus_id: str
    kind: str
    payload: Mapping[str, Any]
    at: datetime


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as stored; ``payload`` is exactly what a replay will see."""

    seq: int
    batch_id: int
    stimulus_id: str
    kind: str
    payload: dict[str, Any]
    at: datetime


@dataclass(frozen=True, slots=True)
class AppendedEvent:
    """The outcome for one input event: its seq, and whether this call stored it (False: already there)."""

    stimulus_id: str
    seq: int
    created: bool


@dataclass(frozen=True, slots=True)
class BatchAppend:
    """What ``append_batch`` did. ``new_events`` (in seq order) are the ones to step the controller with;
    ``batch_id`` is ``None`` when every event was already stored (nothing to step)."""

    batch_id: int | None
    at: datetime
    results: tuple[AppendedEvent, ...]
    new_events: tuple[StoredEvent, ...] = field(default=())

    @property
    def last_seq(self) -> int | None:
        """The highest seq this call stored (what the step's actions were ``created_seq`` from)."""
        return self.new_events[-1].seq if self.new_events else None


@dataclass(frozen=True, slots=True)
class Batch:
    """One step's input as stored: replay calls ``Controller.step(batch.at, batch.events)``."""

    id: int
    at: datetime
    holder: str | None
    epoch: int | None
    events: tuple[StoredEvent, ...]


def _utc(at: datetime) -> datetime:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"naive datetime {at.isoformat()}: pass an aware UTC time")
    return at.astimezone(UTC)


def _existing_seqs(conn: Connection, stimulus_ids: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for start in range(0, len(stimulus_ids), _LOOKUP_CHUNK):
        chunk = stimulus_ids[start : start + _LOOKUP_CHUNK]
        rows = conn.execute(select(events.c.stimulus_id, events.c.seq).where(events.c.stimulus_id.in_(chunk)))
        found.update({row.stimulus_id: row.seq for row in rows})
    return found


def stored_stimuli(conn: Connection, stimulus_ids: Sequence[str]) -> set[str]:
    """Which of ``stimulus_ids`` are already in the log (a read: the leader filters before stepping)."""
    return set(_existing_seqs(conn, list(dict.fromkeys(stimulus_ids))))


def append_batch(
    conn: Connection,
    now: datetime,
    new: Sequence[NewEvent],
    *,
    holder: str | None = None,
    epoch: int | None = None,
) -> BatchAppend:
    """Append the events not stored yet as one batch at ``now``. Must run inside a write transaction."""
    now = _utc(now)
    serialize_writes(conn)
    existing = _existing_seqs(conn, list(dict.fromkeys(e.stimulus_id for e in new)))
    to_store: list[NewEvent] = []
    pending_ids: set[str] = set()
    for event in new:
        if event.stimulus_id not in existing and event.stimulus_id not in pending_ids:
            pending_ids.add(event.stimulus_id)
            to_store.append(event)
    if not to_store:
        unchanged = tuple(AppendedEvent(e.stimulus_id, existing[e.stimulus_id], False) for e in new)
        return BatchAppend(batch_id=None, at=now, results=unchanged)

    batch_id = conn.execute(
        insert(batches).values(at=now, holder=holder, epoch=epoch).returning(batches.c.id)
    ).scalar_one()
    rows = [
        {
            "batch_id": batch_id,
            "stimulus_id": e.stimulus_id,
            "kind": e.kind,
            "payload": jsoncodec.canonical(e.payload),
            "at": _utc(e.at),
        }
        for e in to_store
    ]
    seqs = (
        conn.execute(insert(events).returning(events.c.seq, sort_by_parameter_order=True), rows)
        .scalars()
        .all()
    )
    stored = tuple(
        StoredEvent(
            seq=seq,
            batch_id=batch_id,
            stimulus_id=row["stimulus_id"],
            kind=row["kind"],
            payload=row["payload"],
            at=row["at"],
        )
        for seq, row in zip(seqs, rows, strict=True)
    )
    seq_of = {**existing, **{e.stimulus_id: e.seq for e in stored}}
    not_yet_reported = {e.stimulus_id for e in stored}
    results: list[AppendedEvent] = []
    for e in new:
        created = e.stimulus_id in not_yet_reported
        not_yet_reported.discard(e.stimulus_id)
        results.append(AppendedEvent(e.stimulus_id, seq_of[e.stimulus_id], created))
    return BatchAppend(batch_id=batch_id, at=now, results=tuple(results), new_events=stored)


def _event(row: Any) -> StoredEvent:
    return StoredEvent(
        seq=row.seq,
        batch_id=row.batch_id,
        stimulus_id=row.stimulus_id,
        kind=row.kind,
        payload=row.payload,
        at=row.at,
    )


def first_seq_after_batch(conn: Connection, after_batch_id: int) -> int | None:
    """The seq of the first event of the first batch after ``after_batch_id`` (None: no such batch)."""
    query = select(func.min(events.c.seq)).where(events.c.batch_id > after_batch_id)
    value = conn.execute(query).scalar_one()
    return None if value is None else int(value)


def read_events_page(conn: Connection, after_seq: int = 0, limit: int = 1000) -> list[StoredEvent]:
    """At most ``limit`` events with ``seq > after_seq``, in seq order."""
    query = select(events).where(events.c.seq > after_seq).order_by(events.c.seq).limit(limit)
    return [_event(row) for row in conn.execute(query)]


def get_event(conn: Connection, stimulus_id: str) -> StoredEvent | None:
    row = conn.execute(select(events).where(events.c.stimulus_id == stimulus_id)).first()
    return None if row is None else _event(row)


def last_seq(conn: Connection) -> int:
    """The highest stored seq, 0 for an empty log."""
    return int(conn.execute(select(func.coalesce(func.max(events.c.seq), 0))).scalar_one())


def last_batch(conn: Connection) -> tuple[int, datetime] | None:
    """The latest batch's id and when it was appended (the last step any leader committed), ``None`` for
    an empty log."""
    row = conn.execute(select(batches.c.id, batches.c.at).order_by(batches.c.id.desc()).limit(1)).first()
    return None if row is None else (int(row[0]), row[1])


def count_events(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(events)).scalar_one())


def read_batch_headers(conn: Connection, batch_ids: Sequence[int]) -> dict[int, Any]:
    if not batch_ids:
        return {}
    rows = conn.execute(select(batches).where(batches.c.id.in_(list(batch_ids))))
    return {row.id: row for row in rows}


def group_batches(pages: Iterator[tuple[list[StoredEvent], dict[int, Any]]]) -> Iterator[Batch]:
    """Turn pages of events (with their batch rows) into whole batches; a batch's events are contiguous
    in seq order, so a batch that spans two pages is held until its last event is read."""
    current: list[StoredEvent] = []
    header: Any = None
    for page, headers in pages:
        for event in page:
            if current and event.batch_id != current[0].batch_id:
                yield Batch(header.id, header.at, header.holder, header.epoch, tuple(current))
                current = []
            if not current:
                header = headers[event.batch_id]
            current.append(event)
    if current:
        yield Batch(header.id, header.at, header.holder, header.epoch, tuple(current))
