"""SFCompute's JSON answers read into values: orderbook levels, quotes and orders.

Every reader raises ``ProviderError`` naming the field when the answer does not have the shape of
SFCompute's published OpenAPI schema (copies of its answers: ``tests/providers/samples/sfcompute/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from scalar.domain.market import OrderState
from scalar.domain.orderbook import BookOrder
from scalar.providers.payload import Fields
from scalar.providers.sfcompute.pricing import (
    GPUS_PER_NODE,
    TICKERS,
    node_hour_to_gpu_hour,
    price_per_gpu_hour_from_cents,
)

# SFCompute order status -> Scalar's order state. ``pending`` is what a create answers; ``open`` is a
# resting order in a listing.
ORDER_STATES: dict[str, OrderState] = {
    "pending": OrderState.PENDING,
    "open": OrderState.PENDING,
    "filled": OrderState.FILLED,
    "cancelled": OrderState.CANCELLED,
    "rejected": OrderState.REJECTED,
}


def book_level(level: Fields, duration_hours: Decimal) -> BookOrder:
    """``{dollars_per_node_hour: "15.200000", node_count: 4}`` -> 32 GPUs at $1.90/GPU-hour."""
    per_node = level.decimal("dollars_per_node_hour")
    if per_node < 0:
        raise level.error("dollars_per_node_hour", f"should not be negative, got {per_node}")
    nodes = level.integer("node_count")
    if nodes < 0:
        raise level.error("node_count", f"should not be negative, got {nodes}")
    return BookOrder(
        price_per_gpu_hour=node_hour_to_gpu_hour(per_node),
        quantity_gpus=nodes * GPUS_PER_NODE,
        duration_hours=duration_hours,
    )


@dataclass(frozen=True, slots=True)
class SFComputeQuote:
    """An answer of ``GET /v0/quote``: the price to buy ``node_count`` nodes now, or why there is none."""

    instance_type: str
    node_count: int
    total_cents: int | None
    start_at: datetime | None
    end_at: datetime | None
    zone: str | None
    no_quote_reason: str | None
    price_per_gpu_hour: Decimal | None

    @property
    def available(self) -> bool:
        return self.total_cents is not None


@dataclass(frozen=True, slots=True)
class SFComputeOrder:
    """One order as SFCompute lists it. ``price_cents`` is the whole order's total, as placed."""

    order_id: str
    side: str
    status: str
    state: OrderState
    ticker: str
    instance_type: str | None  # Scalar's name, ``None`` for a ticker Scalar does not map
    node_count: int
    start_at: datetime
    end_at: datetime
    price_cents: int
    execution_price_cents: int | None
    zone: str | None
    rejected_reason: str | None
    idempotency_key: str | None

    @property
    def duration_s(self) -> int:
        return int((self.end_at - self.start_at).total_seconds())

    @property
    def limit_price_per_gpu_hour(self) -> Decimal:
        """The order's own price (its limit) per GPU-hour."""
        return price_per_gpu_hour_from_cents(self.price_cents, self.node_count, self.duration_s)

    @property
    def price_per_gpu_hour(self) -> Decimal:
        """What the order pays per GPU-hour: the execution price when filled, else the limit."""
        cents = self.execution_price_cents if self.execution_price_cents is not None else self.price_cents
        return price_per_gpu_hour_from_cents(cents, self.node_count, self.duration_s)


def read_order(order: Fields) -> SFComputeOrder:
    status = order.text("status")
    state = ORDER_STATES.get(status)
    if state is None:
        raise order.error("status", f"is {status!r}, not one of {', '.join(ORDER_STATES)}")
    nodes = order.integer("quantity")
    if nodes < 1:
        raise order.error("quantity", f"should be at least 1 node, got {nodes}")
    start = order.time("start_at")
    end = order.time("end_at")
    if end <= start:
        raise order.error("end_at", f"({end.isoformat()}) is not after start_at ({start.isoformat()})")
    ticker = order.text("instance_type")
    price = order.integer("price")
    if price < 0:
        raise order.error("price", f"should not be negative, got {price}")
    return SFComputeOrder(
        order_id=order.text("id"),
        side=order.text("side"),
        status=status,
        state=state,
        ticker=ticker,
        instance_type=TICKERS.get(ticker),
        node_count=nodes,
        start_at=start,
        end_at=end,
        price_cents=price,
        execution_price_cents=order.opt_integer("execution_price"),
        zone=order.opt_text("cluster"),
        rejected_reason=order.opt_text("rejected_reason"),
        idempotency_key=order.opt_text("idempotency_key"),
    )
