"""Decisions: why things happened, appended in the same transaction as the events that caused them.

``story(entity_id)`` returns one entity's history in order, as Dask's ``story(key)`` does for a task.
Entity ids are the runtime's (use prefixed ids such as ``job:42`` if several kinds could share one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select

from scalar.store import jsoncodec
from scalar.store.schema import decisions


@dataclass(frozen=True, slots=True)
class NewDecision:
    entity_id: str
    at: datetime
    code: str
    message: str
    data: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    id: int
    entity_id: str
    at: datetime
    code: str
    message: str
    data: dict[str, Any] | None
    batch_id: int | None


def _decision(row: Any) -> Decision:
    return Decision(row.id, row.entity_id, row.at, row.code, row.message, row.data, row.batch_id)


def record_decisions(conn: Connection, new: list[NewDecision], *, batch_id: int | None = None) -> None:
    if not new:
        return
    rows = [
        {
            "entity_id": d.entity_id,
            "at": d.at,
            "code": d.code,
            "message": d.message,
            "data": None if d.data is None else jsoncodec.canonical(d.data),
            "batch_id": batch_id,
        }
        for d in new
    ]
    conn.execute(insert(decisions), rows)


def story(conn: Connection, entity_id: str, *, limit: int | None = None) -> list[Decision]:
    """The decisions about ``entity_id``, oldest first (the last ``limit`` of them when given)."""
    query = select(decisions).where(decisions.c.entity_id == entity_id)
    if limit is None:
        return [_decision(r) for r in conn.execute(query.order_by(decisions.c.id))]
    newest = conn.execute(query.order_by(decisions.c.id.desc()).limit(limit)).all()
    return [_decision(r) for r in reversed(newest)]


def list_decisions(conn: Connection, *, after_id: int = 0, limit: int = 100) -> list[Decision]:
    """Every decision with ``id > after_id``, oldest first (a feed the dashboard can follow)."""
    query = select(decisions).where(decisions.c.id > after_id).order_by(decisions.c.id).limit(limit)
    return [_decision(r) for r in conn.execute(query)]
