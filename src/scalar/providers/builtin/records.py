"""Rows of the market's tables back into the shared market values (Order, BlockGrant, CapacityRequest)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, select

from scalar.domain.market import BlockGrant, CapacityRequest, Order, OrderState
from scalar.domain.tier import Tier
from scalar.providers.builtin import schema
from scalar.providers.builtin.clock import from_us
from scalar.providers.builtin.config import BUILTIN_CUDA_VERSION, BUILTIN_DRIVER_VERSION


def request_values(request: CapacityRequest) -> dict[str, Any]:
    """The order row's copy of the request (the first request made with the key)."""
    limit = request.limit_price_per_gpu_hour
    return {
        "provider": request.provider,
        "instance_type": request.instance_type,
        "node_count": request.node_count,
        "duration_s": request.duration_s,
        "limit_price_per_gpu_hour": None if limit is None else str(limit),
        "tier": request.tier.value,
        "gpu_model": request.gpu_model,
        "gpus_per_node": request.gpus_per_node,
        "spot": request.spot,
        "region": request.region,
    }


def request_from_row(row: Any) -> CapacityRequest:
    limit = row.limit_price_per_gpu_hour
    return CapacityRequest(
        provider=row.provider,
        instance_type=row.instance_type,
        node_count=int(row.node_count),
        duration_s=int(row.duration_s),
        limit_price_per_gpu_hour=None if limit is None else Decimal(limit),
        tier=Tier(row.tier),
        gpu_model=row.gpu_model,
        gpus_per_node=int(row.gpus_per_node),
        spot=bool(row.spot),
        region=row.region,
    )


def block_from_rows(block: Any, node_ids: tuple[str, ...]) -> BlockGrant:
    return BlockGrant(
        block_id=block.block_id,
        provider=block.provider,
        instance_type=block.instance_type,
        gpu_model=block.gpu_model,
        gpus_per_node=int(block.gpus_per_node),
        vram_per_gpu_gb=float(block.vram_per_gpu_gb),
        cpu_per_node=float(block.cpu_per_node),
        ram_per_node_gb=float(block.ram_per_node_gb),
        start_time=from_us(int(block.start_us)),
        end_time=from_us(int(block.end_us)),
        price_per_gpu_hour=Decimal(block.price_per_gpu_hour),
        node_ids=node_ids,
        spot=bool(block.spot),
        region=block.region,
        cuda_version=BUILTIN_CUDA_VERSION,
        driver_version=BUILTIN_DRIVER_VERSION,
    )


def load_block(conn: Connection, block_id: str) -> BlockGrant | None:
    block = conn.execute(select(schema.blocks).where(schema.blocks.c.block_id == block_id)).first()
    if block is None:
        return None
    node_ids = tuple(
        conn.execute(
            select(schema.nodes.c.node_id)
            .where(schema.nodes.c.block_id == block_id)
            .order_by(schema.nodes.c.idx)
        ).scalars()
    )
    return block_from_rows(block, node_ids)


def load_order(conn: Connection, provider: str, idempotency_key: str) -> Order | None:
    row = conn.execute(
        select(schema.orders).where(
            schema.orders.c.provider == provider, schema.orders.c.idempotency_key == idempotency_key
        )
    ).first()
    if row is None:
        return None
    block = None if row.block_id is None else load_block(conn, row.block_id)
    return Order(
        order_id=row.order_id,
        idempotency_key=row.idempotency_key,
        state=OrderState(row.state),
        request=request_from_row(row),
        block=block,
        reason=row.reason,
    )
