"""The leader lease and its fencing token.

One row per lease name: ``(holder, epoch, expires_at)``. ``try_acquire`` takes a free or expired lease
(``epoch`` + 1: a new reign), renews one the caller already holds (same epoch), and refuses otherwise. The
check and the write are one atomic step: the row is locked (``SELECT ... FOR UPDATE`` on PostgreSQL, the
write lock of ``BEGIN IMMEDIATE`` on SQLite) and the update is a compare-and-set on the old epoch.

Fencing: every write transaction of the leader carries its ``Fence(name, holder, epoch)``; ``check_fence``
raises ``NotLeaderError`` unless the row still says so, and on PostgreSQL keeps a share lock on the row until
commit, so a takeover waits for the old leader's transaction in flight and no write of the old reign can
land after the new one began.

Time is a parameter (``now``); nothing here reads the clock. Holders compare their own clock with
``expires_at`` written by others: keep the TTL well above the renewal interval plus any clock skew.
A holder name must be unique per process lifetime (e.g. ``host:pid:uuid``): a restarted process is a new
holder and so starts a new epoch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.dialects import postgresql, sqlite

from scalar.store.db import is_postgres
from scalar.store.errors import NotLeaderError
from scalar.store.schema import leases


@dataclass(frozen=True, slots=True)
class Fence:
    """The fencing token a leader writes under."""

    name: str
    holder: str
    epoch: int


@dataclass(frozen=True, slots=True)
class Lease:
    """The outcome of ``try_acquire``: who holds the lease now, and whether that is the caller.

    When ``is_leader`` and ``epoch`` differs from the epoch the caller held before, someone else led in
    between: the caller's in-memory state is stale and must be rebuilt from the log.
    """

    name: str
    holder: str | None
    epoch: int
    expires_at: datetime | None
    is_leader: bool

    @property
    def fence(self) -> Fence:
        if not self.is_leader or self.holder is None:
            raise NotLeaderError(
                f"lease {self.name!r} is held by {self.holder!r}, not by the caller",
                "acquire the lease before writing as the leader",
            )
        return Fence(self.name, self.holder, self.epoch)


@dataclass(frozen=True, slots=True)
class LeaseState:
    """The lease row as stored (for status pages: who leads, until when)."""

    name: str
    holder: str | None
    epoch: int
    expires_at: datetime | None

    def held_at(self, now: datetime) -> bool:
        return self.holder is not None and self.expires_at is not None and self.expires_at > now


def _insert_missing(conn: Connection, name: str) -> None:
    insert_fn = postgresql.insert if is_postgres(conn) else sqlite.insert
    stmt = insert_fn(leases).values(name=name, holder=None, epoch=0, expires_at=None)
    conn.execute(stmt.on_conflict_do_nothing(index_elements=[leases.c.name]))


def _locked_row(conn: Connection, name: str) -> Any:
    query = select(leases).where(leases.c.name == name)
    if is_postgres(conn):
        query = query.with_for_update()
    return conn.execute(query).one()


def try_acquire(conn: Connection, name: str, holder: str, now: datetime, ttl_s: float) -> Lease:
    """Acquire or renew ``name`` for ``holder`` until ``now + ttl_s``. Run it in a write transaction."""
    if ttl_s <= 0:
        raise ValueError(f"ttl_s must be positive, got {ttl_s}")
    if not holder:
        raise ValueError("holder must be a non-empty name unique to this process")
    _insert_missing(conn, name)
    row = _locked_row(conn, name)
    free = row.holder is None or row.expires_at is None or row.expires_at <= now
    if row.holder == holder:
        epoch = row.epoch
    elif free:
        epoch = row.epoch + 1
    else:
        return Lease(name, row.holder, row.epoch, row.expires_at, is_leader=False)
    expires_at = now + timedelta(seconds=ttl_s)
    holder_unchanged = leases.c.holder.is_(None) if row.holder is None else leases.c.holder == row.holder
    result = conn.execute(
        update(leases)
        .where(leases.c.name == name, leases.c.epoch == row.epoch, holder_unchanged)
        .values(holder=holder, epoch=epoch, expires_at=expires_at)
    )
    if result.rowcount != 1:  # pragma: no cover - the row lock makes this unreachable; kept as a guard
        current = _locked_row(conn, name)
        return Lease(name, current.holder, current.epoch, current.expires_at, is_leader=False)
    return Lease(name, holder, epoch, expires_at, is_leader=True)


def release(conn: Connection, name: str, holder: str) -> bool:
    """Give the lease up (on clean shutdown) so another process takes over at once. Returns whether
    ``holder`` held it. The epoch stays; the next acquirer increments it."""
    result = conn.execute(
        update(leases)
        .where(leases.c.name == name, leases.c.holder == holder)
        .values(holder=None, expires_at=None)
    )
    return result.rowcount == 1


def read_lease(conn: Connection, name: str) -> LeaseState | None:
    row = conn.execute(select(leases).where(leases.c.name == name)).first()
    return None if row is None else LeaseState(row.name, row.holder, row.epoch, row.expires_at)


def check_fence(conn: Connection, fence: Fence) -> None:
    """Raise ``NotLeaderError`` unless ``fence`` still holds the lease. Call first in a write transaction;
    on PostgreSQL the row stays share-locked until commit (a takeover waits for this transaction)."""
    query = select(leases.c.epoch).where(
        leases.c.name == fence.name, leases.c.holder == fence.holder, leases.c.epoch == fence.epoch
    )
    if is_postgres(conn):
        query = query.with_for_update(read=True)
    if conn.execute(query).first() is not None:
        return
    current = read_lease(conn, fence.name)
    now_held = "nobody" if current is None or current.holder is None else repr(current.holder)
    now_epoch = 0 if current is None else current.epoch
    raise NotLeaderError(
        f"not the leader: lease {fence.name!r} is held by {now_held} at epoch {now_epoch}, "
        f"this write was made by {fence.holder!r} at epoch {fence.epoch}",
        "stop acting, rebuild state from the event log and acquire the lease again",
    )
