"""SFCompute orders as Scalar's ``Order``s: state, and for a filled order the block it grants."""

from __future__ import annotations

from scalar.domain.market import BlockGrant, CapacityRequest, Order, OrderState
from scalar.domain.offers import SFCOMPUTE
from scalar.domain.tier import Tier
from scalar.providers.base import ProviderError
from scalar.providers.sfcompute.pricing import GPUS_PER_NODE, SHAPES, TICKERS, Shape
from scalar.providers.sfcompute.wire import SFComputeOrder


def node_ids(order_id: str, node_count: int) -> tuple[str, ...]:
    """Scalar's ids for a filled order's nodes (the v0 orders API names none): ``<order id>-n<i>``."""
    return tuple(f"{order_id}-n{i}" for i in range(node_count))


def request_of(order: SFComputeOrder) -> CapacityRequest:
    """A request rebuilt from a listed order (after a restart, when the original is not in memory).

    The tier is not on SFCompute's side; FAST is assumed. The limit is the order's own price.
    """
    shape = SHAPES.get(order.instance_type or "")
    return CapacityRequest(
        provider=SFCOMPUTE,
        instance_type=order.instance_type or order.ticker,
        node_count=order.node_count,
        duration_s=order.duration_s,
        limit_price_per_gpu_hour=order.limit_price_per_gpu_hour,
        tier=Tier.FAST,
        gpu_model=shape.gpu_model if shape else None,
        gpus_per_node=GPUS_PER_NODE,
    )


def to_order(order: SFComputeOrder, key: str, request: CapacityRequest) -> Order:
    """The ``Order`` for ``key``; a filled one carries its block (the order id is the block id)."""
    block = None
    if order.state is OrderState.FILLED:
        shape: Shape | None = SHAPES.get(order.instance_type or "") or SHAPES.get(request.instance_type)
        if shape is None:
            raise ProviderError(
                SFCOMPUTE,
                f"order {order.order_id} is for ticker {order.ticker!r}, which Scalar does not map "
                f"to an instance type (known: {', '.join(TICKERS)})",
                retryable=False,
            )
        block = BlockGrant(
            block_id=order.order_id,
            provider=SFCOMPUTE,
            instance_type=shape.instance_type,
            gpu_model=shape.gpu_model,
            gpus_per_node=GPUS_PER_NODE,
            vram_per_gpu_gb=shape.vram_per_gpu_gb,
            cpu_per_node=shape.cpu_per_node,
            ram_per_node_gb=shape.ram_per_node_gb,
            start_time=order.start_at,
            end_time=order.end_at,
            price_per_gpu_hour=order.price_per_gpu_hour,
            node_ids=node_ids(order.order_id, order.node_count),
            spot=False,
            region=order.zone or shape.region,
        )
    reason = order.rejected_reason if order.state is OrderState.REJECTED else None
    return Order(
        order_id=order.order_id,
        idempotency_key=key,
        state=order.state,
        request=request,
        block=block,
        reason=reason,
    )
