"""What the controller asks the runtime to do. Each action is a frozen value with an ``action_id``.

The ``action_id`` is the idempotency key: the runtime passes it to the provider, so executing an action
twice (after a crash between "decided" and "done") never buys, starts or releases twice. Ids come from a
counter in the controller's state (``act-000017``), so a replay produces the very same ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from scalar.domain.market import CapacityRequest
from scalar.domain.reasons import Reason


@dataclass(frozen=True, slots=True)
class BuyCapacity:
    """Buy ``request`` for scale group ``group``; ``for_jobs`` are the jobs routed to it (may be empty for
    ``min_slices``). Answered by ``OrderUpdated(action_id=...)``."""

    action_id: str
    reason: Reason
    group: str
    request: CapacityRequest
    for_jobs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkPlacement:
    """One node of a placement and the GPU indices the job holds there."""

    node_id: str
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StartWork:
    """Run ``job_id`` on these nodes/GPUs (one placement, or one per node of a gang)."""

    action_id: str
    reason: Reason
    job_id: str
    placements: tuple[WorkPlacement, ...]
    expected_duration_s: int

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(p.node_id for p in self.placements)

    @property
    def node_id(self) -> str:
        return self.placements[0].node_id

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        return self.placements[0].gpu_indices


@dataclass(frozen=True, slots=True)
class StopWork:
    """Stop ``job_id`` on ``node_id``; ``why`` is a short code (``cancelled``, ``gang_broken``...)."""

    action_id: str
    reason: Reason
    job_id: str
    node_id: str
    why: str


@dataclass(frozen=True, slots=True)
class ReleaseBlock:
    """End the contract ``block_id`` at ``provider`` (terminate, or sell back); ``why``: ``idle``,
    ``all_nodes_failed``."""

    action_id: str
    reason: Reason
    block_id: str
    provider: str
    why: str


@dataclass(frozen=True, slots=True)
class ReleaseNodes:
    """Stop paying for ``node_ids`` of block ``block_id`` at ``provider`` (a seller billing running time,
    whose nodes end one by one: deleted pods, terminated instances) while the block's other nodes run on;
    ``why``: ``idle``. The whole block goes with a ``ReleaseBlock``."""

    action_id: str
    reason: Reason
    block_id: str
    provider: str
    node_ids: tuple[str, ...]
    why: str


@dataclass(frozen=True, slots=True)
class SellCapacity:
    """Offer the time of ``node_ids`` of block ``block_id`` from ``cut`` to the block's end (``hours`` whole
    hours) back to ``provider``'s book at ``price_per_gpu_hour`` (engine/resale.py); the seller answers
    with what filled (``SaleUpdated``)."""

    action_id: str
    reason: Reason
    block_id: str
    provider: str
    node_ids: tuple[str, ...]
    cut: datetime
    hours: int
    price_per_gpu_hour: Decimal
    expected_proceeds: Decimal


Action = BuyCapacity | StartWork | StopWork | ReleaseBlock | ReleaseNodes | SellCapacity
ACTION_TYPES: tuple[type, ...] = (BuyCapacity, StartWork, StopWork, ReleaseBlock, ReleaseNodes, SellCapacity)
