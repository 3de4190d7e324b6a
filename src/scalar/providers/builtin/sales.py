"""Sell orders on a block's remaining time: the buyer offers the tail of some of its nodes back to the book.

A sell order names nodes of one open SFCompute-style block, the ``cut`` from which their time is offered
(to the block's end, whole market hours) and an ask price. It fills at once, as a buy order does, against
the book's bids (seeded per market hour, ``books.generated``) at or above the ask, less the bid GPUs earlier
sales took this hour: whole nodes, so a thin book fills part of the order and the rest is cancelled
(immediate or cancel). Each sold node's contract ends at the cut (its next move is recomputed, so it
terminates then); the proceeds are ``price x GPUs sold x hours``, credited to the buyer by its own
accounting (engine/resale.py). Placing the same idempotency key again returns the first answer.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from scalar.domain.market import NodeState, SaleFill
from scalar.providers.base import ProviderError
from scalar.providers.builtin import schema
from scalar.providers.builtin.clock import US_PER_HOUR, from_us, hour_bucket
from scalar.providers.builtin.config import MarketConfig
from scalar.providers.builtin.lifecycle import plan_from_row
from scalar.providers.builtin.liquidity import generated
from scalar.providers.builtin.timeline import next_move_us
from scalar.providers.catalog import Catalog


def _fill_of(row: Any) -> SaleFill:
    sold = tuple(n for n in str(row.node_ids_sold).split(" ") if n)
    return SaleFill(
        order_key=row.idempotency_key,
        provider=row.provider,
        block_id=row.block_id,
        nodes_offered=int(row.nodes_offered),
        node_ids_sold=sold,
        gpus_per_node=int(row.gpus_per_node),
        hours=int(row.hours),
        cut=from_us(int(row.cut_us)),
        price_per_gpu_hour=Decimal(row.price_per_gpu_hour),
    )


def load_sale(conn: Connection, provider: str, idempotency_key: str) -> SaleFill | None:
    row = conn.execute(
        select(schema.sales).where(
            schema.sales.c.idempotency_key == idempotency_key, schema.sales.c.provider == provider
        )
    ).first()
    return None if row is None else _fill_of(row)


def bid_gpus_at_or_above(
    conn: Connection,
    catalog: Catalog,
    config: MarketConfig,
    seed: int,
    instance_type: str,
    price: Decimal,
    at_us: int,
) -> int:
    """GPUs the book's bids take at ``price`` or more this market hour, less what earlier sales took."""
    hour = hour_bucket(at_us, config.time_scale)
    book = generated(catalog, seed, instance_type, hour)
    depth = sum(b.quantity_gpus for b in book.bids if b.price_per_gpu_hour >= price)
    taken = conn.execute(
        select(func.coalesce(func.sum(schema.sales.c.quantity_gpus), 0)).where(
            schema.sales.c.instance_type == instance_type, schema.sales.c.hour == hour
        )
    ).scalar_one()
    return max(0, depth - int(taken))


def place_sale(
    conn: Connection,
    catalog: Catalog,
    config: MarketConfig,
    seed: int,
    *,
    provider: str,
    block_id: str,
    node_ids: tuple[str, ...],
    cut_us: int,
    price_per_gpu_hour: Decimal,
    idempotency_key: str,
    at_us: int,
) -> SaleFill:
    """Place and fill the sell order (see the module docstring); a bad order is a ``ProviderError`` that
    says what was wrong."""
    found = load_sale(conn, provider, idempotency_key)
    if found is not None:
        return found

    def refuse(message: str) -> ProviderError:
        return ProviderError(provider, message, retryable=False)

    if not price_per_gpu_hour.is_finite() or price_per_gpu_hour <= 0:
        raise refuse(f"the ask must be a positive price per GPU-hour, got {price_per_gpu_hour}")
    if not node_ids or len(set(node_ids)) != len(node_ids):
        raise refuse("a sell order names one or more distinct nodes of the block")
    block = conn.execute(select(schema.blocks).where(schema.blocks.c.block_id == block_id)).first()
    if block is None or block.provider != provider:
        raise refuse(f"no block {block_id!r} was sold by {provider}")
    if block.released_us is not None:
        raise refuse(f"block {block_id} was released: nothing left to sell")
    end_us = int(block.end_us)
    if cut_us < at_us:
        raise refuse(f"the sale must start now or later, not at {from_us(cut_us).isoformat()}")
    market_hours = Decimal(end_us - cut_us) * Decimal(repr(float(config.time_scale))) / US_PER_HOUR
    if market_hours < 1 or market_hours != market_hours.to_integral_value():
        raise refuse(
            f"a sale offers whole hours up to the block's end ({from_us(end_us).isoformat()}); from "
            f"{from_us(cut_us).isoformat()} that is {market_hours:.4f} h"
        )
    rows = {
        r.node_id: r
        for r in conn.execute(select(schema.nodes).where(schema.nodes.c.node_id.in_(node_ids))).all()
    }
    for node_id in node_ids:
        row = rows.get(node_id)
        if row is None or row.block_id != block_id:
            raise refuse(f"node {node_id!r} is not a node of block {block_id}")
        if row.next_us is None or int(row.end_us) != end_us:
            raise refuse(f"node {node_id} has no time left to sell (ended, or its tail was sold already)")
    gpn = int(block.gpus_per_node)
    available = bid_gpus_at_or_above(
        conn, catalog, config, seed, block.instance_type, price_per_gpu_hour, at_us
    )
    count = min(len(node_ids), available // gpn)
    sold = tuple(sorted(node_ids)[len(node_ids) - count :]) if count else ()
    for node_id in sold:
        row = rows[node_id]
        new_plan = replace(plan_from_row(row), end_us=cut_us)
        conn.execute(
            update(schema.nodes)
            .where(schema.nodes.c.node_id == node_id)
            .values(end_us=cut_us, next_us=next_move_us(NodeState(row.state), new_plan))
        )
    conn.execute(
        insert(schema.sales).values(
            idempotency_key=idempotency_key,
            provider=provider,
            block_id=block_id,
            instance_type=block.instance_type,
            hour=hour_bucket(at_us, config.time_scale),
            nodes_offered=len(node_ids),
            node_ids_sold=" ".join(sold),
            gpus_per_node=gpn,
            quantity_gpus=count * gpn,
            hours=int(market_hours),
            cut_us=cut_us,
            price_per_gpu_hour=str(price_per_gpu_hour),
            placed_us=at_us,
        )
    )
    return SaleFill(
        idempotency_key,
        provider,
        block_id,
        len(node_ids),
        sold,
        gpn,
        int(market_hours),
        from_us(cut_us),
        price_per_gpu_hour,
    )
