"""The outbox: actions the controller decided, executed against providers at least once, completed once.

Lifecycle: ``pending`` -> (claim) ``in_flight`` -> (complete) ``done`` | ``failed``; ``release`` puts an
in-flight action back to ``pending`` for a retry. ``action_id`` is the idempotency key sent to the
provider, so executing an action again after a crash (it is still pending or in flight) never buys twice.

A claim is exclusive: on PostgreSQL candidates are picked with ``FOR UPDATE SKIP LOCKED`` and every
transition is a compare-and-set on ``(status, attempts)``; on SQLite the write transaction holds the
database write lock. ``attempts`` is the claim token: only the latest claimer may complete or release, so
an action is completed at most once even when a stale claim was taken over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, func, insert, or_, select, update

from scalar.store import jsoncodec
from scalar.store.db import is_postgres
from scalar.store.errors import ActionNotClaimedError, DuplicateActionError, UnknownActionError
from scalar.store.schema import actions

PENDING = "pending"
IN_FLIGHT = "in_flight"
DONE = "done"
FAILED = "failed"
_LOOKUP_CHUNK = 500


@dataclass(frozen=True, slots=True)
class NewAction:
    """An action the controller decided. ``action_id`` must be deterministic (same events, same id)."""

    action_id: str
    kind: str
    payload: Mapping[str, Any]
    not_before: datetime | None = None


@dataclass(frozen=True, slots=True)
class Action:
    id: int
    action_id: str
    kind: str
    payload: dict[str, Any]
    status: str
    attempts: int
    result: dict[str, Any] | None
    error: str | None
    created_seq: int | None
    batch_id: int | None
    created_at: datetime
    updated_at: datetime
    not_before: datetime | None
    claimed_by: str | None
    claimed_at: datetime | None
    completed_at: datetime | None


def _action(row: Any) -> Action:
    return Action(**{name: getattr(row, name) for name in Action.__slots__})


def add_actions(
    conn: Connection,
    new: Sequence[NewAction],
    *,
    now: datetime,
    created_seq: int | None = None,
    batch_id: int | None = None,
) -> list[bool]:
    """Insert the actions as ``pending``; returns, per action, whether it was inserted.

    An action id already stored with the same kind and payload is skipped (False). The same id with a
    different kind or payload raises ``DuplicateActionError``: ids are idempotency keys and must not be reused.
    """
    ids = [a.action_id for a in new]
    existing: dict[str, Any] = {}
    for start in range(0, len(ids), _LOOKUP_CHUNK):
        chunk = ids[start : start + _LOOKUP_CHUNK]
        for row in conn.execute(
            select(actions.c.action_id, actions.c.kind, actions.c.payload).where(
                actions.c.action_id.in_(chunk)
            )
        ):
            existing[row.action_id] = row
    inserted: list[bool] = []
    rows: list[dict[str, Any]] = []
    seen: dict[str, tuple[str, dict[str, Any]]] = {}
    for action in new:
        payload = jsoncodec.canonical(action.payload)
        prior = existing.get(action.action_id)
        prior_shape = (prior.kind, prior.payload) if prior is not None else seen.get(action.action_id)
        if prior_shape is not None:
            if prior_shape != (action.kind, payload):
                raise DuplicateActionError(
                    f"action id {action.action_id!r} is already used by a {prior_shape[0]!r} action "
                    f"with payload {prior_shape[1]}; got a {action.kind!r} action with payload {payload}",
                    "derive action ids from what the action does (e.g. 'buy:<order id>'), never reuse one",
                )
            inserted.append(False)
            continue
        seen[action.action_id] = (action.kind, payload)
        inserted.append(True)
        rows.append(
            {
                "action_id": action.action_id,
                "kind": action.kind,
                "payload": payload,
                "status": PENDING,
                "attempts": 0,
                "created_seq": created_seq,
                "batch_id": batch_id,
                "created_at": now,
                "updated_at": now,
                "not_before": action.not_before,
            }
        )
    if rows:
        conn.execute(insert(actions), rows)
    return inserted


def claim_actions(
    conn: Connection,
    *,
    worker: str,
    now: datetime,
    limit: int = 1,
    stale_after_s: float | None = None,
    kinds: Sequence[str] | None = None,
) -> list[Action]:
    """Claim up to ``limit`` runnable actions, oldest first: pending ones whose ``not_before`` has passed,
    and, when ``stale_after_s`` is given, in-flight ones claimed at least that long ago (their claimer died).
    Each claimed action is ``in_flight`` with ``attempts`` + 1, ``claimed_by=worker``, ``claimed_at=now``."""
    if limit <= 0:
        return []
    runnable = and_(
        actions.c.status == PENDING,
        or_(actions.c.not_before.is_(None), actions.c.not_before <= now),
    )
    if stale_after_s is not None:
        stale_before = now - timedelta(seconds=stale_after_s)
        runnable = or_(runnable, and_(actions.c.status == IN_FLIGHT, actions.c.claimed_at <= stale_before))
    query = select(actions.c.id, actions.c.status, actions.c.attempts).where(runnable)
    if kinds is not None:
        query = query.where(actions.c.kind.in_(list(kinds)))
    query = query.order_by(actions.c.id).limit(limit)
    if is_postgres(conn):
        query = query.with_for_update(skip_locked=True)
    claimed_ids: list[int] = []
    for row in conn.execute(query).all():
        result = conn.execute(
            update(actions)
            .where(
                actions.c.id == row.id,
                actions.c.status == row.status,
                actions.c.attempts == row.attempts,
            )
            .values(
                status=IN_FLIGHT,
                attempts=row.attempts + 1,
                claimed_by=worker,
                claimed_at=now,
                updated_at=now,
            )
        )
        if result.rowcount == 1:
            claimed_ids.append(row.id)
    if not claimed_ids:
        return []
    rows = conn.execute(select(actions).where(actions.c.id.in_(claimed_ids)).order_by(actions.c.id))
    return [_action(r) for r in rows]


def _finish(conn: Connection, action_id: str, attempt: int, values: dict[str, Any], verb: str) -> Action:
    result = conn.execute(
        update(actions)
        .where(
            actions.c.action_id == action_id,
            actions.c.status == IN_FLIGHT,
            actions.c.attempts == attempt,
        )
        .values(**values)
    )
    if result.rowcount != 1:
        current = get_action(conn, action_id)
        if current is None:
            raise UnknownActionError(f"no action {action_id!r}", "use an id returned by claim_actions")
        raise ActionNotClaimedError(
            f"cannot {verb} action {action_id!r} at attempt {attempt}: it is {current.status} "
            f"at attempt {current.attempts} (claimed by {current.claimed_by})",
            "only the latest claimer may finish an action; roll back and drop this result",
        )
    action = get_action(conn, action_id)
    assert action is not None
    return action


def complete_action(
    conn: Connection,
    action_id: str,
    *,
    attempt: int,
    now: datetime,
    result: Mapping[str, Any] | None = None,
    failed: bool = False,
    error: str | None = None,
) -> Action:
    """Mark the claimed action ``done`` (or ``failed`` for good) with its result. ``attempt`` is the
    ``attempts`` value the claim returned. Record the events the result produces in the same transaction."""
    return _finish(
        conn,
        action_id,
        attempt,
        {
            "status": FAILED if failed else DONE,
            "result": None if result is None else jsoncodec.canonical(result),
            "error": error,
            "completed_at": now,
            "updated_at": now,
        },
        "complete",
    )


def release_action(
    conn: Connection,
    action_id: str,
    *,
    attempt: int,
    now: datetime,
    error: str | None = None,
    not_before: datetime | None = None,
) -> Action:
    """Put a claimed action back to ``pending`` (a retryable failure), runnable again from ``not_before``."""
    return _finish(
        conn,
        action_id,
        attempt,
        {
            "status": PENDING,
            "error": error,
            "not_before": not_before,
            "claimed_by": None,
            "claimed_at": None,
            "updated_at": now,
        },
        "release",
    )


def get_action(conn: Connection, action_id: str) -> Action | None:
    row = conn.execute(select(actions).where(actions.c.action_id == action_id)).first()
    return None if row is None else _action(row)


def list_actions(
    conn: Connection, *, status: str | None = None, limit: int = 100, offset: int = 0
) -> list[Action]:
    query = select(actions)
    if status is not None:
        query = query.where(actions.c.status == status)
    rows = conn.execute(query.order_by(actions.c.id).limit(limit).offset(offset))
    return [_action(r) for r in rows]


def count_actions(conn: Connection) -> dict[str, int]:
    """How many actions are in each status (every status present, 0 when none)."""
    counts = dict.fromkeys((PENDING, IN_FLIGHT, DONE, FAILED), 0)
    for status, n in conn.execute(select(actions.c.status, func.count()).group_by(actions.c.status)):
        counts[status] = int(n)
    return counts
