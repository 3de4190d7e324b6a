"""Spend limits in the runtime: the check inside the step's transaction, the admin's limits, the usage.

- :func:`gate` runs in the fenced transaction that stores a step's actions (``Leader.commit``): every
  ``BuyCapacity`` becomes a ``budget_spend`` row, and, when limits are set, is checked against the limits
  in ``budget_limits`` over every recorded purchase (including other controllers'). Write transactions are
  serialised, so two controllers cannot both spend the last dollar. A refused purchase is stored in the
  outbox marked ``budget_refused``: the executor never calls the seller and reports it REJECTED.
- :func:`put_limits` replaces the limits (``PUT /budgets``): the table and a ``BudgetsChanged`` inbox row
  in one transaction, so the engine (which decides first) hears the same limits through the log.
- :func:`seed_limits` writes ``[budgets]`` from scalar.toml into an empty table at start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from scalar.domain.market import Order, OrderState
from scalar.domain.money import cents_text
from scalar.domain.reasons import Reason
from scalar.engine import Action, BuyCapacity
from scalar.engine.budget import (
    GLOBAL,
    BudgetLimit,
    Commitment,
    check_purchase,
    commitments,
    limits_from_list,
    period_window,
    rate_at,
    shares_of_jobs,
    spend_in,
)
from scalar.engine.codec import event_to_dict
from scalar.engine.events import BudgetsChanged, OrderUpdated
from scalar.engine.state import ClusterState
from scalar.runtime.auth import SYSTEM_TENANT
from scalar.store import Store, Tx
from scalar.store import budget as ledger
from scalar.store.auth import AuditEntry, add_audit

BUDGETS = "budgets"  # inbox kind and entity of a limits change
REFUSED = "budget_refused"  # the outbox payload's marker of a purchase the limits refused
_LOOKBACK = timedelta(days=32)


def to_limits(rows: Sequence[ledger.LimitRow]) -> tuple[BudgetLimit, ...]:
    return tuple(BudgetLimit(r.scope, r.usd_per_hour, r.usd_per_period, r.period) for r in rows)


def to_rows(limits: Sequence[BudgetLimit]) -> list[ledger.LimitRow]:
    return [ledger.LimitRow(x.scope, x.usd_per_hour, x.usd_per_period, x.period) for x in limits]


def commitment_of(row: ledger.SpendRow) -> Commitment:
    shares = {k: Decimal(v) for k, v in row.shares.items()}
    return Commitment(row.action_id, row.usd_per_hour, row.starts_at, row.ends_at, shares)


def _engine_span(
    state: ClusterState, live: Mapping[str, Commitment], action_id: str
) -> tuple[datetime, Decimal | None] | None:
    """Where the engine says a recorded purchase's span ends, and its rate once filled (the price the
    seller granted, not the order's limit); ``None`` if the engine does not know it."""
    order = state.orders.get(action_id)
    if order is None:
        return None
    block = state.blocks.get(order.block_id) if order.block_id else None
    if block is not None:
        return block.released_at or block.ended_at or block.grant.end_time, block.grant.cost_per_hour
    if action_id in live:
        return live[action_id].end, None  # in flight: at its limit
    return order.placed_at, None  # rejected, cancelled or expired unfilled: it spent nothing


def gate(tx: Tx, state: ClusterState, actions: Sequence[Action], now: datetime) -> dict[str, Reason]:
    """Record this step's purchases and check them against the stored limits; returns the refused ones."""
    buys = [a for a in actions if isinstance(a, BuyCapacity)]
    if not buys:
        return {}
    conn = tx.conn
    seen = ledger.recorded(conn, [b.action_id for b in buys])
    buys = [b for b in buys if b.action_id not in seen]
    limits = to_limits(ledger.read_limits(conn))
    existing: list[Commitment] = []
    if limits:
        live = {c.key: c for c in commitments(state, now)}
        for row in ledger.spend_since(conn, now - _LOOKBACK):
            if row.ends_at <= row.starts_at:
                # refused, or ended unfilled: final. The engine still holds a refused purchase as in flight
                # until its REJECTED result is stored, and must not stretch it back into a commitment.
                continue
            span = _engine_span(state, live, row.action_id)
            if span is not None:
                end, rate = span
                rate = row.usd_per_hour if rate is None else rate
                if end != row.ends_at or rate != row.usd_per_hour:
                    ledger.move_end(conn, row.action_id, end, rate)
                    row = ledger.SpendRow(row.action_id, rate, row.starts_at, end, row.shares)
            existing.append(commitment_of(row))
    refused: dict[str, Reason] = {}
    rows: list[ledger.SpendRow] = []
    for buy in buys:
        req = buy.request
        rate = (req.limit_price_per_gpu_hour or Decimal(0)) * req.node_count * req.gpus_per_node
        end = now + timedelta(seconds=req.duration_s)
        new = Commitment(buy.action_id, rate, now, end, shares_of_jobs(state, buy.for_jobs))
        over = check_purchase(limits, existing, new, now) if limits else None
        if over is not None:
            refused[buy.action_id] = over
            end = now
        else:
            existing.append(new)
        shares = {k: str(v) for k, v in new.shares.items()}
        rows.append(ledger.SpendRow(buy.action_id, rate, now, end, shares))
    ledger.record_spend(conn, rows, now)
    return refused


def refused_order(payload: Mapping[str, Any], buy: BuyCapacity) -> OrderUpdated:
    """The result of a purchase the limits refused in its transaction: REJECTED, the seller never called."""
    why = payload[REFUSED]
    order = Order(
        order_id=f"refused-{buy.action_id}",
        idempotency_key=buy.action_id,
        state=OrderState.REJECTED,
        request=buy.request,
        reason=f"budget_exceeded: {why.get('message', 'a spend limit')}",
    )
    return OrderUpdated(f"result:{buy.action_id}", buy.action_id, order)


# ---- the admin's view ---------------------------------------------------------------------------------


def get_limits(store: Store, now: datetime) -> dict[str, Any]:
    """``{"limits": [...], "usage": [...]}``: the limits and, per scope, the committed rate and period spend."""
    with store.read() as tx:
        limits = to_limits(ledger.read_limits(tx.conn))
        spend = [commitment_of(r) for r in ledger.spend_since(tx.conn, now - _LOOKBACK)]
    usage = []
    scopes = dict.fromkeys([GLOBAL, *(x.scope for x in limits)])
    by_scope = {x.scope: x for x in limits}
    for scope in scopes:
        period = by_scope[scope].period if scope in by_scope else "day"
        start, end = period_window(now, period)
        usage.append(
            {
                "scope": scope,
                "committed_usd_per_hour": cents_text(rate_at(spend, scope, now)),
                "period": period,
                "period_start": start.isoformat(),
                "committed_usd_this_period": cents_text(spend_in(spend, scope, start, end)),
            }
        )
    return {"limits": [x.to_dict() for x in limits], "usage": usage}


def put_limits(store: Store, data: Any, now: datetime, *, actor: str = "(local)") -> dict[str, Any]:
    """Replace every limit (``InvalidSpecError`` naming the field for bad input); returns :func:`get_limits`.
    Audit-logged as ``budgets.replace`` (``budgets.clear`` when ``data`` is empty: every limit removed)."""
    limits = limits_from_list(data, "limits")
    action = "budgets.replace" if limits else "budgets.clear"
    entry = AuditEntry(now, SYSTEM_TENANT, actor, action, BUDGETS, {"limits": [x.to_dict() for x in limits]})
    with store.write() as tx:
        ledger.replace_limits(tx.conn, to_rows(limits), now)
        tx.add_inbox(BUDGETS, BUDGETS, event_to_dict(BudgetsChanged("inbox", limits)), now=now)
        add_audit(tx.conn, [entry])
    return get_limits(store, now)


def seed_limits(store: Store, limits: Sequence[BudgetLimit], now: datetime) -> None:
    """At start: the config file's limits, unless limits were set before (by the API or an earlier start)."""
    if not limits:
        return
    with store.write() as tx:
        if not ledger.read_limits(tx.conn):
            ledger.replace_limits(tx.conn, to_rows(limits), now)
