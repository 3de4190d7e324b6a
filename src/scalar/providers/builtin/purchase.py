"""Placing an order (inside the market's write lock): match it, grant the block, plan its nodes.

Orders are immediate-or-cancel: FILLED with a block, or REJECTED with a reason that has the numbers.
The idempotency key is the order's identity: the order id, block id and node ids are derived from
``(provider, key)``, and a key seen before returns the stored order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from scalar.domain.market import BlockGrant, CapacityRequest, NodeState, Order, OrderState
from scalar.domain.money import round_micros, usd_text
from scalar.domain.offers import SFCOMPUTE, Offer
from scalar.providers.builtin import schema
from scalar.providers.builtin.books import match_buy
from scalar.providers.builtin.clock import (
    US_PER_HOUR,
    ceil_to,
    from_us,
    market_hour_us,
    scaled_us,
)
from scalar.providers.builtin.config import (
    BOOK_SHAPES,
    BUILTIN_CUDA_VERSION,
    BUILTIN_DRIVER_VERSION,
    MAX_CONTRACT_S,
    MIN_CONTRACT_S,
    MarketConfig,
    boot_profile,
)
from scalar.providers.builtin.draws import short_id
from scalar.providers.builtin.fixed import price_list
from scalar.providers.builtin.lifecycle import PendingEvent, write_events
from scalar.providers.builtin.liquidity import live_book, record_fills
from scalar.providers.builtin.records import load_order, request_values
from scalar.providers.builtin.timeline import next_move_us, plan_node
from scalar.providers.catalog import Catalog


@dataclass(frozen=True, slots=True)
class Seller:
    """What placing an order needs to know about the market."""

    seed: int
    config: MarketConfig
    catalog: Catalog


@dataclass(frozen=True, slots=True)
class Grant:
    """A purchase that matched: the block to create (without node ids yet) and what it cost."""

    instance_type: str
    region: str | None
    gpu_model: str | None
    gpus_per_node: int
    vram_per_gpu_gb: float
    cpu_per_node: float
    ram_per_node_gb: float
    start_us: int
    end_us: int
    price_per_gpu_hour: Decimal
    total_cents: int
    spot: bool
    interruption_rate: float | None


def tidy(amount: Decimal) -> Decimal:
    """The same amount without trailing zeros past the cents (``2.260000`` -> ``2.26``)."""
    cents = amount.quantize(Decimal("0.01"))
    return cents if cents == amount else amount.normalize()


def order_ids(provider: str, key: str) -> tuple[str, str]:
    digest = short_id(provider, key)
    return f"{provider}-ord-{digest}", f"{provider}-blk-{digest[:12]}"


def _billed_hours(start_us: int, end_us: int, time_scale: float) -> Decimal:
    """Real-world hours a market window stands for (a window is 1/N as long under time scale N)."""
    return Decimal(end_us - start_us) * Decimal(repr(float(time_scale))) / Decimal(US_PER_HOUR)


def _cents(dollars: Decimal) -> int:
    return int((dollars * 100).to_integral_value(rounding=ROUND_CEILING))


def _reject(reason: str) -> tuple[None, str]:
    return None, reason


def _book_grant(
    conn: Connection, seller: Seller, request: CapacityRequest, now_us: int, order_id: str
) -> tuple[Grant | None, str]:
    shape = BOOK_SHAPES.get(request.instance_type)
    if shape is None:
        known = ", ".join(BOOK_SHAPES)
        return _reject(f"{SFCOMPUTE} sells {known}, not {request.instance_type!r}")
    if request.spot:
        return _reject(f"{SFCOMPUTE} contracts are not interruptible: ask with spot=False")
    if request.gpus_per_node != shape.gpus_per_node:
        return _reject(
            f"{shape.instance_type} nodes have {shape.gpus_per_node} GPUs, the request says {request.gpus_per_node}"
        )
    if request.gpu_model is not None and request.gpu_model != shape.gpu_model:
        return _reject(f"{shape.instance_type} nodes carry {shape.gpu_model}, not {request.gpu_model}")
    if not MIN_CONTRACT_S <= request.duration_s <= MAX_CONTRACT_S:
        return _reject(
            f"contracts last 1 hour to 30 days ({MIN_CONTRACT_S}-{MAX_CONTRACT_S} s), "
            f"the request asks for {request.duration_s} s"
        )
    book = live_book(conn, seller.catalog, seller.config, seller.seed, shape.instance_type, now_us)
    needed = request.node_count * shape.gpus_per_node
    match = match_buy(book.asks, needed, request.limit_price_per_gpu_hour)
    if not match.filled:
        assert match.reason is not None
        return _reject(match.reason)
    record_fills(conn, book, match.parts, order_id)
    hour_us = market_hour_us(seller.config.time_scale)
    start = ceil_to(now_us, max(1, hour_us // 60))  # "NOW" is the next whole (market) minute
    end = ceil_to(start + scaled_us(request.duration_s, seller.config.time_scale), hour_us)
    hours = _billed_hours(start, end, seller.config.time_scale)
    total = sum((part.price_per_gpu_hour * part.quantity_gpus for part in match.parts), Decimal(0)) * hours
    grant = Grant(
        instance_type=shape.instance_type,
        region=shape.region,
        gpu_model=shape.gpu_model,
        gpus_per_node=shape.gpus_per_node,
        vram_per_gpu_gb=shape.vram_per_gpu_gb,
        cpu_per_node=shape.cpu_per_node,
        ram_per_node_gb=shape.ram_per_node_gb,
        start_us=start,
        end_us=end,
        price_per_gpu_hour=tidy(round_micros(match.average_price_per_gpu_hour)),
        total_cents=_cents(total),
        spot=False,
        interruption_rate=None,
    )
    low = min(part.price_per_gpu_hour for part in match.parts)
    reason = (
        f"filled {needed} GPUs from {len(match.parts)} ask(s) at {usd_text(low)}-{usd_text(match.worst_price_per_gpu_hour)}/GPU-h "
        f"(average {usd_text(grant.price_per_gpu_hour)}), {hours:.2f} h billed, {grant.total_cents} cents"
    )
    return grant, reason


def _live_nodes(conn: Connection, offer: Offer) -> int:
    count = conn.execute(
        select(func.count())
        .select_from(schema.nodes.join(schema.blocks, schema.blocks.c.block_id == schema.nodes.c.block_id))
        .where(
            schema.blocks.c.provider == offer.provider,
            schema.blocks.c.instance_type == offer.instance_type,
            schema.blocks.c.region == offer.region,
            schema.blocks.c.spot == offer.spot,
            schema.nodes.c.next_us.is_not(None),
        )
    ).scalar_one()
    return int(count)


def _fixed_grant(
    conn: Connection, seller: Seller, request: CapacityRequest, now_us: int
) -> tuple[Grant | None, str]:
    config = seller.config
    hour = now_us // market_hour_us(config.time_scale)
    prices = price_list(seller.catalog, request.provider, seller.seed, hour, config.spot_price_drift)
    kind = "spot" if request.spot else "on-demand"
    where = "" if request.region is None else f" in region {request.region}"
    candidates: Sequence[Offer] = prices.find(request.instance_type, request.spot, request.region)
    if not candidates:
        return _reject(f"{request.provider} has no {kind} offer of {request.instance_type!r}{where}")
    first = candidates[0]
    if request.gpus_per_node != int(first.gpu_count):
        return _reject(
            f"{first.instance_type} has {first.gpu_count:g} GPUs per node, the request says {request.gpus_per_node}"
        )
    if request.gpu_model is not None and request.gpu_model != first.gpu_model:
        return _reject(f"{first.instance_type} carries {first.gpu_model}, not {request.gpu_model}")
    if request.duration_s < 1:
        return _reject(f"duration_s must be positive, got {request.duration_s}")
    cap = config.shape_capacity_nodes
    offer = None
    in_use: list[str] = []
    for candidate in candidates:
        live = 0 if cap is None else _live_nodes(conn, candidate)
        if cap is None or live + request.node_count <= cap:
            offer = candidate
            break
        in_use.append(f"{candidate.region}/{candidate.availability_zone or '-'} {live}")
    if offer is None:
        return _reject(
            f"out of capacity: {request.node_count} more {kind} {request.instance_type} nodes{where} do not fit "
            f"the {cap} nodes each location holds (live nodes: {', '.join(in_use)})"
        )
    price = offer.price_per_gpu_hour
    assert price is not None
    limit = request.limit_price_per_gpu_hour
    if limit is not None and price > limit:
        return _reject(
            f"limit price {usd_text(limit)}/GPU-h is below {request.provider}'s {kind} price of "
            f"{usd_text(round_micros(price))}/GPU-h for {offer.instance_type} in {offer.region}"
        )
    start = now_us
    end = start + max(1, scaled_us(request.duration_s, config.time_scale))
    hours = _billed_hours(start, end, config.time_scale)
    rate = None
    if offer.spot:
        rate = offer.interruption_rate
        if rate is None:
            rate = config.unpublished_interruption_rate
    grant = Grant(
        instance_type=offer.instance_type,
        region=offer.region,
        gpu_model=offer.gpu_model,
        gpus_per_node=int(offer.gpu_count),
        vram_per_gpu_gb=offer.gpu_memory_gb,
        cpu_per_node=offer.vcpu,
        ram_per_node_gb=offer.memory_gb,
        start_us=start,
        end_us=end,
        price_per_gpu_hour=tidy(round_micros(price)),
        total_cents=_cents(offer.price_per_hour * request.node_count * hours),
        spot=offer.spot,
        interruption_rate=rate,
    )
    reason = (
        f"{kind} {offer.instance_type} in {offer.region}/{offer.availability_zone or '-'} at "
        f"{usd_text(grant.price_per_gpu_hour)}/GPU-h, {grant.total_cents} cents for {request.duration_s} s"
    )
    return grant, reason


def _forced_failures(conn: Connection, provider: str, instance_type: str, count: int) -> list[bool]:
    """Take up to ``count`` injected boot failures that match; node ``i`` fails if entry ``i`` is True."""
    forced: list[bool] = []
    rows = conn.execute(
        select(schema.boot_faults).where(schema.boot_faults.c.remaining > 0).order_by(schema.boot_faults.c.id)
    ).all()
    for row in rows:
        if row.provider not in (None, provider) or row.instance_type not in (None, instance_type):
            continue
        take = min(int(row.remaining), count - len(forced))
        if take <= 0:
            break
        forced.extend([True] * take)
        conn.execute(
            update(schema.boot_faults)
            .where(schema.boot_faults.c.id == row.id)
            .values(remaining=int(row.remaining) - take)
        )
    return forced + [False] * (count - len(forced))


def _create_block(
    conn: Connection,
    seller: Seller,
    request: CapacityRequest,
    grant: Grant,
    order_id: str,
    block_id: str,
    now_us: int,
) -> BlockGrant:
    node_ids = tuple(f"{block_id}-n{index:02d}" for index in range(request.node_count))
    conn.execute(
        insert(schema.blocks).values(
            block_id=block_id,
            order_id=order_id,
            provider=request.provider,
            instance_type=grant.instance_type,
            region=grant.region,
            gpu_model=grant.gpu_model,
            gpus_per_node=grant.gpus_per_node,
            vram_per_gpu_gb=grant.vram_per_gpu_gb,
            cpu_per_node=grant.cpu_per_node,
            ram_per_node_gb=grant.ram_per_node_gb,
            start_us=grant.start_us,
            end_us=grant.end_us,
            price_per_gpu_hour=str(grant.price_per_gpu_hour),
            spot=grant.spot,
            interruption_rate=grant.interruption_rate,
        )
    )
    forced = _forced_failures(conn, request.provider, grant.instance_type, len(node_ids))
    rows: list[dict[str, Any]] = []
    pending: list[PendingEvent] = []
    for index, node_id in enumerate(node_ids):
        plan = plan_node(
            seed=seller.seed,
            node_id=node_id,
            start_us=grant.start_us,
            end_us=grant.end_us,
            profile=boot_profile(request.provider),
            time_scale=seller.config.time_scale,
            boot_failure_rate=seller.config.boot_failure_rate,
            forced_failure=forced[index],
            monthly_interruption_rate=grant.interruption_rate,
            interruption_period_hours=seller.config.interruption_period_hours,
            preemption_scale=seller.config.preemption_scale,
        )
        rows.append(
            {
                "node_id": node_id,
                "block_id": block_id,
                "provider": request.provider,
                "idx": index,
                "state": NodeState.REQUESTING.value,
                "booting_us": plan.booting_us,
                "initializing_us": plan.initializing_us,
                "ready_us": plan.ready_us,
                "fail_cause": plan.fail_cause,
                "preempt_us": plan.preempt_us,
                "end_us": plan.end_us,
                "next_us": next_move_us(NodeState.REQUESTING, plan),
            }
        )
        pending.append(
            PendingEvent(
                at_us=now_us,
                provider=request.provider,
                node_id=node_id,
                block_id=block_id,
                rank=1,
                state=NodeState.REQUESTING,
                reason=(
                    f"granted by order {order_id}: node {index + 1} of {len(node_ids)} x "
                    f"{grant.instance_type} until {from_us(grant.end_us).isoformat()}"
                ),
                details={"order_id": order_id},
            )
        )
    conn.execute(insert(schema.nodes), rows)
    write_events(conn, pending, sort=False)
    return BlockGrant(
        block_id=block_id,
        provider=request.provider,
        instance_type=grant.instance_type,
        gpu_model=grant.gpu_model,
        gpus_per_node=grant.gpus_per_node,
        vram_per_gpu_gb=grant.vram_per_gpu_gb,
        cpu_per_node=grant.cpu_per_node,
        ram_per_node_gb=grant.ram_per_node_gb,
        start_time=from_us(grant.start_us),
        end_time=from_us(grant.end_us),
        price_per_gpu_hour=grant.price_per_gpu_hour,
        node_ids=node_ids,
        spot=grant.spot,
        region=grant.region,
        cuda_version=BUILTIN_CUDA_VERSION,
        driver_version=BUILTIN_DRIVER_VERSION,
    )


def place_order(
    conn: Connection,
    seller: Seller,
    request: CapacityRequest,
    key: str,
    now_us: int,
    providers: Sequence[str],
) -> Order:
    """The order for ``key``: the stored one if the key was seen, else a new FILLED or REJECTED order."""
    existing = load_order(conn, request.provider, key)
    if existing is not None:
        return existing
    order_id, block_id = order_ids(request.provider, key)
    grant: Grant | None = None
    if request.node_count < 1:
        reason = f"node_count must be at least 1, got {request.node_count}"
    elif request.provider not in providers:
        reason = f"the built-in market does not sell for provider {request.provider!r}"
    elif request.provider == SFCOMPUTE:
        grant, reason = _book_grant(conn, seller, request, now_us, order_id)
    else:
        grant, reason = _fixed_grant(conn, seller, request, now_us)
    block = None
    if grant is not None:
        block = _create_block(conn, seller, request, grant, order_id, block_id, now_us)
    conn.execute(
        insert(schema.orders).values(
            order_id=order_id,
            idempotency_key=key,
            state=(OrderState.FILLED if block else OrderState.REJECTED).value,
            reason=reason,
            created_us=now_us,
            block_id=None if block is None else block.block_id,
            total_cents=None if grant is None else grant.total_cents,
            **request_values(request),
        )
    )
    return Order(
        order_id=order_id,
        idempotency_key=key,
        state=OrderState.FILLED if block else OrderState.REJECTED,
        request=request,
        block=block,
        reason=reason,
    )
