"""``Store``: one database, opened and migrated, with read and write transactions (``Tx``).

Everything one controller step changes is written in one ``store.write(fence)`` transaction::

    with store.write(lease.fence) as tx:                 # NotLeaderError if deposed
        appended = tx.append_batch(now, incoming)        # duplicates are skipped
        if appended.new_events:
            actions = controller.step(now, appended.new_events)
            tx.add_actions(outbox_rows, now=now, created_seq=appended.last_seq,
                           batch_id=appended.batch_id)
            tx.upsert_projection("jobs", job.id, job.state, job_record)
            tx.record_decisions(reasons, batch_id=appended.batch_id)

An exception inside the block rolls everything back. Reads (``store.read()``) see one consistent snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError

from scalar.domain.offers import Offer
from scalar.store import decisions as decisions_mod
from scalar.store import (
    eventlog,
    inbox,
    outbox,
    prices,
    projections,
    ratelimit,
    runtime_state,
    snapshot_parts,
)
from scalar.store import lease as lease_mod
from scalar.store.db import begin_immediate, describe_url, is_postgres, make_engine, serialize_writes
from scalar.store.decisions import Decision, NewDecision
from scalar.store.errors import DatabaseUnavailableError
from scalar.store.eventlog import Batch, BatchAppend, NewEvent, StoredEvent
from scalar.store.inbox import InboxItem
from scalar.store.lease import Fence, Lease, LeaseState
from scalar.store.migrate import migrate as run_migrations
from scalar.store.outbox import Action, NewAction
from scalar.store.projections import Projection


class Tx:
    """One open transaction. Write methods are refused in a read transaction."""

    def __init__(self, conn: Connection, *, writable: bool, fence: Fence | None = None) -> None:
        self._conn = conn
        self._writable = writable
        self._fence = fence

    @property
    def conn(self) -> Connection:
        """The SQLAlchemy connection, for queries the store has no method for."""
        return self._conn

    @property
    def fence(self) -> Fence | None:
        return self._fence

    def _write(self) -> Connection:
        if not self._writable:
            raise RuntimeError("this is a read transaction: use store.write() to change the database")
        return self._conn

    # -- event log -------------------------------------------------------------------------------------
    def append_batch(self, now: datetime, new: Sequence[NewEvent]) -> BatchAppend:
        """Append the events whose stimulus is new, as one batch at ``now`` (see ``eventlog``)."""
        holder = self._fence.holder if self._fence else None
        epoch = self._fence.epoch if self._fence else None
        return eventlog.append_batch(self._write(), now, new, holder=holder, epoch=epoch)

    def stored_stimuli(self, stimulus_ids: Sequence[str]) -> set[str]:
        return eventlog.stored_stimuli(self._conn, stimulus_ids)

    def get_event(self, stimulus_id: str) -> StoredEvent | None:
        return eventlog.get_event(self._conn, stimulus_id)

    def last_seq(self) -> int:
        return eventlog.last_seq(self._conn)

    def last_batch(self) -> tuple[int, datetime] | None:
        return eventlog.last_batch(self._conn)

    def read_events_page(self, after_seq: int = 0, limit: int = 1000) -> list[StoredEvent]:
        return eventlog.read_events_page(self._conn, after_seq, limit)

    # -- outbox ----------------------------------------------------------------------------------------
    def add_actions(
        self,
        new: Sequence[NewAction],
        *,
        now: datetime,
        created_seq: int | None = None,
        batch_id: int | None = None,
    ) -> list[bool]:
        return outbox.add_actions(self._write(), new, now=now, created_seq=created_seq, batch_id=batch_id)

    def claim_actions(
        self,
        *,
        worker: str,
        now: datetime,
        limit: int = 1,
        stale_after_s: float | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[Action]:
        return outbox.claim_actions(
            self._write(), worker=worker, now=now, limit=limit, stale_after_s=stale_after_s, kinds=kinds
        )

    def complete_action(
        self,
        action_id: str,
        *,
        attempt: int,
        now: datetime,
        result: Mapping[str, Any] | None = None,
        failed: bool = False,
        error: str | None = None,
    ) -> Action:
        return outbox.complete_action(
            self._write(), action_id, attempt=attempt, now=now, result=result, failed=failed, error=error
        )

    def release_action(
        self,
        action_id: str,
        *,
        attempt: int,
        now: datetime,
        error: str | None = None,
        not_before: datetime | None = None,
    ) -> Action:
        return outbox.release_action(
            self._write(), action_id, attempt=attempt, now=now, error=error, not_before=not_before
        )

    def get_action(self, action_id: str) -> Action | None:
        return outbox.get_action(self._conn, action_id)

    def list_actions(self, *, status: str | None = None, limit: int = 100, offset: int = 0) -> list[Action]:
        return outbox.list_actions(self._conn, status=status, limit=limit, offset=offset)

    def count_actions(self) -> dict[str, int]:
        return outbox.count_actions(self._conn)

    # -- projections -----------------------------------------------------------------------------------
    def upsert_projection(
        self,
        table: str,
        id: str,
        state: str | None,
        data: Mapping[str, Any],
        *,
        parent_id: str | None = None,
        at: datetime | None = None,
    ) -> None:
        projections.upsert_projection(self._write(), table, id, state, data, parent_id=parent_id, at=at)

    def delete_projection(self, table: str, id: str) -> bool:
        return projections.delete_projection(self._write(), table, id)

    def clear_projection(self, table: str) -> int:
        return projections.clear_projection(self._write(), table)

    def get_projection(self, table: str, id: str) -> Projection | None:
        return projections.get_projection(self._conn, table, id)

    def get_projections(self, table: str, ids: Sequence[str]) -> dict[str, Projection]:
        """The rows of ``table`` with these ids, by id (absent ones left out)."""
        return projections.get_projections(self._conn, table, ids)

    def list_projection(
        self,
        table: str,
        state: str | None = None,
        *,
        parent_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
        descending: bool = False,
        after: str | None = None,
    ) -> list[Projection]:
        return projections.list_projection(
            self._conn,
            table,
            state,
            parent_id=parent_id,
            limit=limit,
            offset=offset,
            descending=descending,
            after=after,
        )

    def list_projection_fields(
        self, table: str, fields: Mapping[str, str], state: str | None = None
    ) -> list[Projection]:
        return projections.list_projection_fields(self._conn, table, fields, state)

    def count_projection(self, table: str, state: str | None = None, *, parent_id: str | None = None) -> int:
        return projections.count_projection(self._conn, table, state, parent_id=parent_id)

    def count_by_state(self, table: str) -> dict[str | None, int]:
        return projections.count_by_state(self._conn, table)

    # -- decisions -------------------------------------------------------------------------------------
    def record_decision(
        self,
        entity_id: str,
        at: datetime,
        code: str,
        message: str,
        data: Mapping[str, Any] | None = None,
        *,
        batch_id: int | None = None,
    ) -> None:
        decisions_mod.record_decisions(
            self._write(), [NewDecision(entity_id, at, code, message, data)], batch_id=batch_id
        )

    def record_decisions(self, new: Sequence[NewDecision], *, batch_id: int | None = None) -> None:
        decisions_mod.record_decisions(self._write(), list(new), batch_id=batch_id)

    def story(self, entity_id: str, *, limit: int | None = None) -> list[Decision]:
        return decisions_mod.story(self._conn, entity_id, limit=limit)

    def list_decisions(self, *, after_id: int = 0, limit: int = 100) -> list[Decision]:
        return decisions_mod.list_decisions(self._conn, after_id=after_id, limit=limit)

    # -- prices and lease ------------------------------------------------------------------------------
    def record_prices(self, offers: Sequence[Offer], *, observed_at: datetime | None = None) -> int:
        return prices.record_prices(self._write(), offers, observed_at=observed_at)

    def latest_prices(
        self, *, provider: str | None = None, gpu_model: str | None = None, as_of: datetime | None = None
    ) -> list[Offer]:
        return prices.latest_prices(self._conn, provider=provider, gpu_model=gpu_model, as_of=as_of)

    def read_lease(self, name: str) -> LeaseState | None:
        return lease_mod.read_lease(self._conn, name)

    # -- inbox (see ``scalar.store.inbox``) ------------------------------------------------------------
    def add_inbox(self, kind: str, entity_id: str, payload: Mapping[str, Any], *, now: datetime) -> int:
        """Accept a request (any process); the leader consumes it later, exactly once."""
        return inbox.add(self._write(), kind, entity_id, payload, now)

    def unconsumed_inbox(self, limit: int = 500) -> list[InboxItem]:
        return inbox.unconsumed(self._conn, limit)

    def mark_inbox_consumed(self, ids: Sequence[int], *, at: datetime, batch_id: int | None) -> None:
        """In the step transaction that appended the events the requests became."""
        inbox.mark_consumed(self._write(), ids, at, batch_id)

    def pending_inbox(self, entity_id: str) -> list[InboxItem]:
        return inbox.pending_for(self._conn, entity_id)

    def list_inbox(
        self, *, kind: str | None = None, consumed: bool | None = None, after_id: int = 0, limit: int = 1000
    ) -> list[InboxItem]:
        return inbox.list_items(self._conn, kind=kind, consumed=consumed, after_id=after_id, limit=limit)

    def count_unconsumed_inbox(self) -> int:
        return inbox.count_unconsumed(self._conn)

    # -- runtime state (see ``scalar.store.runtime_state``) --------------------------------------------
    def get_state(self, key: str) -> dict[str, Any] | None:
        return runtime_state.get_state(self._conn, key)

    def put_state(self, key: str, value: Mapping[str, Any], *, at: datetime | None = None) -> None:
        runtime_state.put_state(self._write(), key, value, at)

    def states_with_prefix(self, prefix: str) -> dict[str, dict[str, Any]]:
        return runtime_state.states_with_prefix(self._conn, prefix)

    # -- the published decision state's parts (see ``scalar.store.snapshot_parts``) -------------------
    def put_snapshot_parts(
        self,
        kind: str,
        rows: Sequence[tuple[str, int, str]],
        *,
        removed: Sequence[str] = (),
        below: int | None = None,
        replace: bool = False,
    ) -> None:
        """Rows ``(key, ord, JSON text)`` of ``kind`` upserted; the ``removed`` keys deleted, and the rows
        placed before ``below``; ``replace``: ``rows`` are the whole kind (every other row deleted)."""
        conn = self._write()
        if replace:
            snapshot_parts.replace_kind(conn, kind, rows)
            return
        snapshot_parts.delete_keys(conn, kind, removed)
        if below is not None:
            snapshot_parts.delete_below(conn, kind, below)
        snapshot_parts.put(conn, kind, rows)

    def snapshot_parts(self, kind: str) -> list[tuple[str, Any]]:
        return snapshot_parts.read(self._conn, kind)


class Store:
    """A migrated database. Thread-safe: each transaction takes its own pooled connection."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str | URL, *, migrate: bool = True, echo: bool = False) -> Store:
        """Connect to ``url`` and, unless ``migrate=False``, upgrade its schema to head first."""
        engine = make_engine(url, echo=echo)
        try:
            with engine.connect():
                pass
            if migrate:
                run_migrations(engine)
        except OperationalError as exc:
            engine.dispose()
            raise DatabaseUnavailableError(
                f"cannot open the database {describe_url(url)}: {str(exc.orig).strip() or exc}",
                "check that the server is running and the URL (SCALAR_DATABASE_URL or --data-dir) is right",
            ) from exc
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    @property
    def url(self) -> str:
        """The database URL with its password hidden."""
        return self.engine.url.render_as_string(hide_password=True)

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def write(self, fence: Fence | None = None) -> Iterator[Tx]:
        """A write transaction, committed when the block ends, rolled back on an exception. Write
        transactions run one at a time (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL advisory lock): keep them
        short, and never call a provider inside one. With a ``fence`` it first checks the caller still holds
        that lease (``NotLeaderError`` otherwise)."""
        with self.engine.connect() as conn:
            conn = begin_immediate(conn)
            with conn.begin():
                serialize_writes(conn)
                if fence is not None:
                    lease_mod.check_fence(conn, fence)
                yield Tx(conn, writable=True, fence=fence)

    @contextmanager
    def accept(self) -> Iterator[Tx]:
        """A write transaction for requests any process accepts (inbox rows and the projection rows of
        what they create): on PostgreSQL it does not queue behind the serialized writes (no advisory lock;
        the leader consumes inbox rows with a compare-and-set, in any commit order), so a submission is
        acknowledged once its row commits, whatever a step is writing. SQLite has one writer: there it is
        ``write()``."""
        with self.engine.connect() as conn:
            conn = begin_immediate(conn)
            with conn.begin():
                yield Tx(conn, writable=True)

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """A read-only transaction over one consistent snapshot."""
        with self.engine.connect() as conn:
            if is_postgres(conn):
                conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            with conn.begin():
                yield Tx(conn, writable=False)

    # -- rate limits (store/ratelimit.py) -----------------------------------------------------------------

    def take_token(
        self, key: str, rate_per_s: float, burst: float, now_s: float, want: int = 1
    ) -> tuple[int, float]:
        """Take up to ``want`` tokens from ``key``'s shared bucket in one short transaction of its own (no
        advisory lock on PostgreSQL; SQLite's write lock for one statement): ``(taken, tokens left)``."""
        with self.engine.connect() as conn:
            conn = begin_immediate(conn)
            with conn.begin():
                return ratelimit.take(conn, key, rate_per_s, burst, now_s, want)

    def forget_tokens(self, prefix: str, older_than_s: float) -> int:
        """Delete the buckets under ``prefix`` untouched since ``older_than_s`` (full again)."""
        with self.engine.connect() as conn:
            conn = begin_immediate(conn)
            with conn.begin():
                return ratelimit.forget(conn, prefix, older_than_s)

    # -- lease -----------------------------------------------------------------------------------------
    def try_acquire(self, name: str, holder: str, now: datetime, ttl_s: float) -> Lease:
        """Acquire or renew the lease ``name`` (its own transaction). See ``scalar.store.lease``."""
        with self.write() as tx:
            return lease_mod.try_acquire(tx.conn, name, holder, now, ttl_s)

    def release(self, name: str, holder: str) -> bool:
        with self.write() as tx:
            return lease_mod.release(tx.conn, name, holder)

    def read_lease(self, name: str) -> LeaseState | None:
        with self.read() as tx:
            return tx.read_lease(name)

    # -- replay ----------------------------------------------------------------------------------------
    def read_events(self, after_seq: int = 0, *, page_size: int = 1000) -> Iterator[StoredEvent]:
        """Every event with ``seq > after_seq`` in seq order, fetched ``page_size`` at a time (each page
        its own short transaction), so a long log never sits in memory or holds a snapshot open."""
        if page_size <= 0:
            raise ValueError(f"page_size must be positive, got {page_size}")
        cursor = after_seq
        while True:
            with self.read() as tx:
                page = tx.read_events_page(cursor, page_size)
            yield from page
            if len(page) < page_size:
                return
            cursor = page[-1].seq

    def read_batches(self, after_batch_id: int = 0, *, page_size: int = 1000) -> Iterator[Batch]:
        """Every batch after ``after_batch_id`` with its events, in order: replay with
        ``controller.step(batch.at, batch.events)`` for each."""
        with self.read() as tx:
            first = eventlog.first_seq_after_batch(tx.conn, after_batch_id)
        if first is None:
            return

        def pages() -> Iterator[tuple[list[StoredEvent], dict[int, Any]]]:
            cursor = first - 1
            while True:
                with self.read() as tx:
                    page = tx.read_events_page(cursor, page_size)
                    headers = eventlog.read_batch_headers(tx.conn, sorted({e.batch_id for e in page}))
                if page:
                    yield page, headers
                if len(page) < page_size:
                    return
                cursor = page[-1].seq

        yield from eventlog.group_batches(pages())
