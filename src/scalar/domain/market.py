"""Values exchanged with a seller of capacity: what we ask for, what we are granted, what happens to it.

These are pure values shared by the engine (which decides to buy), the providers (which sell) and the
runtime (which carries one to the other). The provider Protocol itself lives in ``scalar.providers.base``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from scalar.domain.tier import Tier


class OrderState(StrEnum):
    PENDING = "pending"  # accepted by the seller, not yet matched
    FILLED = "filled"  # capacity granted: ``Order.block`` is set
    REJECTED = "rejected"  # refused (no liquidity at the limit price, bad request, quota)
    CANCELLED = "cancelled"


class NodeState(StrEnum):
    """A purchased node's (slice's) lifecycle, seed 003: REQUESTING -> BOOTING -> INITIALIZING -> READY."""

    REQUESTING = "requesting"
    BOOTING = "booting"
    INITIALIZING = "initializing"
    READY = "ready"
    SUSPECT = "suspect"  # an agent-backed node that missed its heartbeat lease
    LOST = "lost"  # missed it for longer: its jobs were requeued; it may rejoin
    FAILED = "failed"
    TERMINATED = "terminated"


@dataclass(frozen=True, slots=True)
class CapacityRequest:
    """Buy ``node_count`` nodes of one offer shape for ``duration_s`` at no more than the limit price."""

    provider: str
    instance_type: str
    node_count: int
    duration_s: int
    limit_price_per_gpu_hour: Decimal | None
    tier: Tier
    gpu_model: str | None = None
    gpus_per_node: int = 8
    spot: bool = False
    region: str | None = None


@dataclass(frozen=True, slots=True)
class BlockGrant:
    """A contract the seller granted: nodes of one shape from ``start_time`` to ``end_time``."""

    block_id: str
    provider: str
    instance_type: str
    gpu_model: str | None
    gpus_per_node: int
    vram_per_gpu_gb: float
    cpu_per_node: float
    ram_per_node_gb: float
    start_time: datetime
    end_time: datetime
    price_per_gpu_hour: Decimal
    node_ids: tuple[str, ...]
    spot: bool = False
    region: str | None = None
    cuda_version: str | None = None  # what the nodes' driver supports ("12.8"); None: the seller does not say
    driver_version: str | None = None

    @property
    def cost_per_hour(self) -> Decimal:
        return self.price_per_gpu_hour * self.gpus_per_node * len(self.node_ids)


@dataclass(frozen=True, slots=True)
class Order:
    """The seller's view of one purchase, matched to the buyer's idempotency key."""

    order_id: str
    idempotency_key: str
    state: OrderState
    request: CapacityRequest
    block: BlockGrant | None = None
    reason: str | None = None


# ``NodeEvent.details["cause"]`` of a node the seller took back (a spot preemption): what the engine counts
# as an interruption of the node's shape.
CAUSE_PREEMPTED = "preempted"


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """Something a seller reports about a node: a lifecycle move, a preemption, a finished job."""

    node_id: str
    block_id: str
    at: datetime
    state: NodeState | None = None
    job_id: str | None = None
    job_succeeded: bool | None = None
    reason: str | None = None
    details: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SaleFill:
    """What a seller filled of a sell order on a block's remaining time: whole nodes, each sold from
    ``cut`` to the block's end (``hours`` whole hours) at ``price_per_gpu_hour``. ``nodes_offered`` minus
    the sold nodes went unsold (the rest of the order was cancelled)."""

    order_key: str
    provider: str
    block_id: str
    nodes_offered: int
    node_ids_sold: tuple[str, ...]
    gpus_per_node: int
    hours: int
    cut: datetime
    price_per_gpu_hour: Decimal

    @property
    def gpus_sold(self) -> int:
        return self.gpus_per_node * len(self.node_ids_sold)

    @property
    def proceeds(self) -> Decimal:
        return self.price_per_gpu_hour * self.gpus_sold * self.hours
