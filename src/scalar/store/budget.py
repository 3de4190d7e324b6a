"""Repositories of the budget tables (``schema_budget``): spend limits and the spend ledger.

Plain rows only (the store points inwards): the runtime turns them into ``scalar.engine.budget`` values and
checks the limits over them inside the write transaction that records a purchase (``runtime.budgets``).
Write transactions are serialised (``Store.write``), so the rows read here are the latest committed ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from scalar.store.schema_budget import budget_limits, budget_spend


@dataclass(frozen=True, slots=True)
class LimitRow:
    scope: str
    usd_per_hour: Decimal | None
    usd_per_period: Decimal | None
    period: str


@dataclass(frozen=True, slots=True)
class SpendRow:
    action_id: str
    usd_per_hour: Decimal
    starts_at: datetime
    ends_at: datetime
    shares: Mapping[str, str]  # tenant -> share (a decimal string; the shares sum to 1)


def read_limits(conn: Connection) -> list[LimitRow]:
    rows = conn.execute(select(budget_limits).order_by(budget_limits.c.scope)).all()
    return [LimitRow(r.scope, r.usd_per_hour, r.usd_per_period, r.period) for r in rows]


def replace_limits(conn: Connection, limits: Iterable[LimitRow], now: datetime) -> None:
    """The limits in force from now on: all of them (scopes not given have none)."""
    conn.execute(delete(budget_limits))
    rows = [
        {
            "scope": lim.scope,
            "usd_per_hour": lim.usd_per_hour,
            "usd_per_period": lim.usd_per_period,
            "period": lim.period,
            "updated_at": now,
        }
        for lim in limits
    ]
    if rows:
        conn.execute(insert(budget_limits), rows)


def spend_since(conn: Connection, since: datetime) -> list[SpendRow]:
    """Every recorded purchase whose span ends after ``since``, oldest first."""
    q = select(budget_spend).where(budget_spend.c.ends_at > since).order_by(budget_spend.c.starts_at)
    return [_spend(r) for r in conn.execute(q).all()]


def all_spend(conn: Connection) -> list[SpendRow]:
    """Every recorded purchase (refused ones span nothing: ``ends_at == starts_at``)."""
    q = select(budget_spend).order_by(budget_spend.c.starts_at, budget_spend.c.action_id)
    return [_spend(r) for r in conn.execute(q).all()]


def recorded(conn: Connection, action_ids: Iterable[str]) -> set[str]:
    ids = list(action_ids)
    if not ids:
        return set()
    q = select(budget_spend.c.action_id).where(budget_spend.c.action_id.in_(ids))
    return {r.action_id for r in conn.execute(q).all()}


def record_spend(conn: Connection, rows: Iterable[SpendRow], now: datetime) -> None:
    values: list[dict[str, Any]] = [
        {
            "action_id": r.action_id,
            "usd_per_hour": r.usd_per_hour,
            "starts_at": r.starts_at,
            "ends_at": r.ends_at,
            "shares": dict(r.shares),
            "recorded_at": now,
        }
        for r in rows
    ]
    if values:
        conn.execute(insert(budget_spend), values)


def move_end(
    conn: Connection, action_id: str, ends_at: datetime, usd_per_hour: Decimal | None = None
) -> None:
    """A purchase's span ends at ``ends_at`` now (refused, rejected, released or ended early); with
    ``usd_per_hour``, its rate is that now (the price the seller granted, under the order's limit)."""
    values: dict[str, Any] = {"ends_at": ends_at}
    if usd_per_hour is not None:
        values["usd_per_hour"] = usd_per_hour
    conn.execute(update(budget_spend).where(budget_spend.c.action_id == action_id).values(**values))


def _spend(r: Any) -> SpendRow:
    return SpendRow(r.action_id, r.usd_per_hour, r.starts_at, r.ends_at, dict(r.shares or {}))
