"""Hand-built market values and events for the engine tests: fixed times, fixed offers, fixed books."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from scalar.domain.market import BlockGrant, NodeEvent, NodeState, Order, OrderState
from scalar.domain.offers import PRIME, SFCOMPUTE, Offer
from scalar.domain.orderbook import BookOrder
from scalar.engine.actions import Action, BuyCapacity, StartWork
from scalar.engine.events import (
    JobCancelRequested,
    JobSpec,
    JobStarted,
    JobSubmitted,
    MarketBook,
    MarketObserved,
    NodeReported,
    OrderUpdated,
    Tick,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
_ids = itertools.count(1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def sid(prefix: str = "ev") -> str:
    return f"{prefix}-{next(_ids)}"


def sf_offer(
    price_per_gpu: str = "2.00", *, instance_type: str = "8xH100", model: str = "H100", vram: float = 80
) -> Offer:
    return Offer(
        provider=SFCOMPUTE,
        instance_type=instance_type,
        region="us-west",
        price_per_hour=Decimal(price_per_gpu) * 8,
        gpu_model=model,
        gpu_count=8,
        gpu_memory_gb=vram,
        vcpu=96,
        memory_gb=1024,
    )


def prime_offer(price_per_gpu: str = "2.50", *, gpus: int = 2, model: str = "H100") -> Offer:
    return Offer(
        provider=PRIME,
        instance_type=f"{gpus}x{model}",
        region="us-east",
        price_per_hour=Decimal(price_per_gpu) * gpus,
        gpu_model=model,
        gpu_count=gpus,
        gpu_memory_gb=80,
        vcpu=16 * gpus,
        memory_gb=120 * gpus,
    )


def asks(*levels: tuple[str, int]) -> tuple[BookOrder, ...]:
    return tuple(BookOrder(Decimal(price), qty, Decimal(168)) for price, qty in levels)


# Cumulative 4, 8, 24 GPUs: for 8 GPUs the cheapest covering level is $2.10 (index 1), but $2.20
# (index 2) scores higher (depth 2.0, price 0.9545, liquidity 1.5 -> 1.4818 vs 0.9).
BOOK = asks(("2.00", 4), ("2.10", 4), ("2.20", 16))


def market(*offers: Offer, book: tuple[BookOrder, ...] | None = BOOK, when: datetime = T0) -> MarketObserved:
    books = {"8xH100": MarketBook(book)} if book is not None else {}
    providers = tuple(dict.fromkeys([o.provider for o in offers] + ([SFCOMPUTE] if book is not None else [])))
    return MarketObserved(sid("market"), tuple(offers), when, books, providers)


def spec(
    job_id: str,
    gpus: int = 4,
    *,
    tier: str = "FAST",
    vram: float = 60,
    cpu: float = 8,
    ram: float = 64,
    duration: float = 3600,
    priority: int = 0,
    submitted_at: datetime | None = None,
    models: tuple[str, ...] | None = None,
    share: bool = False,
) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        tier=tier,
        gpu_count=gpus,
        vram_per_gpu_gb=vram,
        cpu_cores=cpu,
        ram_gb=ram,
        expected_duration_sec=duration,
        priority=priority,
        gpu_models=models,
        share_gpu=share,
        submitted_at=submitted_at,
    )


def submit(*specs: JobSpec) -> list[JobSubmitted]:
    return [JobSubmitted(sid("submit"), s) for s in specs]


def cancel(job_id: str) -> JobCancelRequested:
    return JobCancelRequested(sid("cancel"), job_id)


def tick() -> Tick:
    return Tick(sid("tick"))


def grant(
    buy: BuyCapacity,
    when: datetime,
    *,
    block_id: str = "blk-1",
    nodes: tuple[str, ...] | None = None,
    vram: float = 80,
) -> BlockGrant:
    req = buy.request
    node_ids = nodes if nodes is not None else tuple(f"{block_id}-n{i}" for i in range(req.node_count))
    price = req.limit_price_per_gpu_hour if req.limit_price_per_gpu_hour is not None else Decimal(1)
    return BlockGrant(
        block_id=block_id,
        provider=req.provider,
        instance_type=req.instance_type,
        gpu_model=req.gpu_model,
        gpus_per_node=req.gpus_per_node,
        vram_per_gpu_gb=vram,
        cpu_per_node=96,
        ram_per_node_gb=1024,
        start_time=when,
        end_time=when + timedelta(seconds=req.duration_s),
        price_per_gpu_hour=price,
        node_ids=node_ids,
        spot=req.spot,
        region=req.region,
    )


def filled(buy: BuyCapacity, when: datetime, **kwargs: object) -> OrderUpdated:
    block = grant(buy, when, **kwargs)  # type: ignore[arg-type]
    order = Order(f"ord-{buy.action_id}", buy.action_id, OrderState.FILLED, buy.request, block)
    return OrderUpdated(sid("order"), buy.action_id, order)


def rejected(buy: BuyCapacity, why: str = "no liquidity at the limit price") -> OrderUpdated:
    order = Order(f"ord-{buy.action_id}", buy.action_id, OrderState.REJECTED, buy.request, None, why)
    return OrderUpdated(sid("order"), buy.action_id, order)


def node_state(
    node_id: str,
    state: NodeState,
    when: datetime,
    block_id: str = "blk-1",
    why: str | None = None,
    cause: str | None = None,
) -> NodeReported:
    details = {} if cause is None else {"cause": cause}
    return NodeReported(
        sid("node"), NodeEvent(node_id, block_id, when, state=state, reason=why, details=details)
    )


def ready(*node_ids: str, when: datetime = T0, block_id: str = "blk-1") -> list[NodeReported]:
    return [node_state(n, NodeState.READY, when, block_id) for n in node_ids]


def job_done(
    node_id: str, job_id: str, when: datetime, ok: bool = True, block_id: str = "blk-1"
) -> NodeReported:
    return NodeReported(sid("done"), NodeEvent(node_id, block_id, when, job_id=job_id, job_succeeded=ok))


def started(job_id: str, node_id: str) -> JobStarted:
    return JobStarted(sid("start"), job_id, node_id)


def only(actions: list[Action], kind: type) -> list:  # type: ignore[type-arg]
    return [a for a in actions if isinstance(a, kind)]


def starts(actions: list[Action]) -> list[StartWork]:
    return only(actions, StartWork)


def buys(actions: list[Action]) -> list[BuyCapacity]:
    return only(actions, BuyCapacity)
