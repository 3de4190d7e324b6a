"""The inbox: requests any process may insert, which the fenced leader consumes exactly once.

A job submission or cancellation accepted by any control-plane process (leader or not) is one ``inbox`` row.
The leader takes the unconsumed rows (oldest first) inside its step transaction, appends the events they
become and marks the rows consumed with that batch id, all in the same transaction: either the events are
in the log and the rows consumed, or neither. Marking is a compare-and-set (``consumed_at IS NULL``), so a
row can never be consumed twice even if two writers raced (writes are serialized anyway).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from scalar.store import jsoncodec
from scalar.store.errors import StoreError
from scalar.store.schema import inbox

SUBMIT = "submit"
CANCEL = "cancel"
_CHUNK = 500


class InboxConflictError(StoreError):
    """An inbox row was consumed by someone else inside this transaction's window."""


@dataclass(frozen=True, slots=True)
class InboxItem:
    id: int
    kind: str
    entity_id: str
    payload: dict[str, Any]
    created_at: datetime
    consumed_at: datetime | None
    batch_id: int | None


def _item(row: Any) -> InboxItem:
    return InboxItem(
        row.id, row.kind, row.entity_id, row.payload, row.created_at, row.consumed_at, row.batch_id
    )


def add(conn: Connection, kind: str, entity_id: str, payload: Mapping[str, Any], now: datetime) -> int:
    """Insert one request; returns its id (the order it will be consumed in)."""
    if not kind or not entity_id:
        raise ValueError("an inbox request needs a kind and an entity id")
    row = {
        "kind": kind,
        "entity_id": entity_id,
        "payload": jsoncodec.canonical(payload),
        "created_at": now,
    }
    return int(conn.execute(insert(inbox).values(**row).returning(inbox.c.id)).scalar_one())


def unconsumed(conn: Connection, limit: int = 500) -> list[InboxItem]:
    """The oldest ``limit`` requests not consumed yet, in id order."""
    query = select(inbox).where(inbox.c.consumed_at.is_(None)).order_by(inbox.c.id).limit(limit)
    return [_item(r) for r in conn.execute(query)]


def mark_consumed(conn: Connection, ids: Sequence[int], at: datetime, batch_id: int | None) -> None:
    """Mark the rows consumed by ``batch_id``; raises ``InboxConflictError`` if one already was."""
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        result = conn.execute(
            update(inbox)
            .where(inbox.c.id.in_(chunk), inbox.c.consumed_at.is_(None))
            .values(consumed_at=at, batch_id=batch_id)
        )
        if result.rowcount != len(chunk):
            raise InboxConflictError(
                f"{len(chunk) - result.rowcount} of inbox requests {chunk[0]}..{chunk[-1]} were already consumed",
                "only the fenced leader consumes the inbox, inside its step transaction; roll back",
            )


def pending_for(conn: Connection, entity_id: str) -> list[InboxItem]:
    """The unconsumed requests about ``entity_id`` (a job accepted but not yet seen by the controller)."""
    query = (
        select(inbox)
        .where(inbox.c.entity_id == entity_id, inbox.c.consumed_at.is_(None))
        .order_by(inbox.c.id)
    )
    return [_item(r) for r in conn.execute(query)]


def list_items(
    conn: Connection,
    *,
    kind: str | None = None,
    consumed: bool | None = None,
    after_id: int = 0,
    limit: int = 1000,
) -> list[InboxItem]:
    query = select(inbox).where(inbox.c.id > after_id)
    if kind is not None:
        query = query.where(inbox.c.kind == kind)
    if consumed is True:
        query = query.where(inbox.c.consumed_at.is_not(None))
    elif consumed is False:
        query = query.where(inbox.c.consumed_at.is_(None))
    return [_item(r) for r in conn.execute(query.order_by(inbox.c.id).limit(limit))]


def count_unconsumed(conn: Connection) -> int:
    query = select(func.count()).select_from(inbox).where(inbox.c.consumed_at.is_(None))
    return int(conn.execute(query).scalar_one())
