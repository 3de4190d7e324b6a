"""Read-only views of the controller's state for the API, CLI and dashboard: plain immutable values.

Money is exact (``Decimal``, rounded to micro-dollars); times are the step times the controller saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from scalar.domain.market import NodeState
from scalar.domain.money import round_micros
from scalar.domain.packing_model import order_pending
from scalar.domain.procurement import ProcurementPolicy
from scalar.domain.reasons import Reason
from scalar.domain.routing_model import PendingGroup, RoutingDecision
from scalar.domain.tier import Tier
from scalar.engine.actions import Action, WorkPlacement
from scalar.engine.cost_band import SpotRisk, spot_risk
from scalar.engine.costs import block_status, busy_by_tenant, busy_gpus_now, buyers_of, paid_gpus_now
from scalar.engine.groups import availability_of
from scalar.engine.lifecycle import JobState, OrderStatus
from scalar.engine.state import (
    BlockRecord,
    ClusterState,
    GroupRecord,
    JobRecord,
    NodeRecord,
    OrderRecord,
    PlacementSpan,
    PlacementSummary,
    StoryEntry,
    UnmetDemandView,
)


@dataclass(frozen=True, slots=True)
class JobView:
    job_id: str
    name: str | None
    tier: str
    state: JobState
    reason: Reason | None
    gpu_count: int
    vram_per_gpu_gb: float
    cpu_cores: float
    ram_gb: float
    expected_duration_sec: float
    priority: int
    submitted_at: datetime
    pending_since: datetime | None
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    placements: tuple[WorkPlacement, ...]
    preemptions: int
    order_key: str | None
    placement_history: tuple[PlacementSpan, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeView:
    node_id: str
    block_id: str
    group: str
    provider: str
    instance_type: str
    gpu_model: str | None
    tier: Tier
    state: NodeState
    gpu_count: int
    gpus_free: int
    vram_per_gpu_gb: float
    cpu_used: float
    cpu_total: float
    ram_used_gb: float
    ram_total_gb: float
    jobs: tuple[str, ...]
    end_time: datetime
    ready_at: datetime | None
    idle_since: datetime | None
    cuda_version: str | None = None
    driver_version: str | None = None
    draining: bool = False


@dataclass(frozen=True, slots=True)
class BlockView:
    block_id: str
    provider: str
    instance_type: str
    group: str
    order_key: str | None
    node_ids: tuple[str, ...]
    gpus_per_node: int
    price_per_gpu_hour: Decimal
    start_time: datetime
    end_time: datetime
    status: str  # open | released | ended
    committed: Decimal
    accrued: Decimal
    # The engine's accounting as of ``accounted_at`` (engine/costs.py): exact GPU-seconds paid for and held
    # per tenant, the GPUs holding each tenant's jobs then (what /costs extrapolates by), resale.
    accounted_at: datetime | None = None
    paid_gpu_s: Decimal = Decimal(0)
    busy_gpu_s_by_tenant: Mapping[str, Decimal] = field(default_factory=dict)
    busy_gpus_by_tenant: Mapping[str, Decimal] = field(default_factory=dict)
    paid_gpus: int | None = None  # GPUs paid for per second as of ``accounted_at`` (None: every node's)
    sold_back_gpu_s: Decimal = Decimal(0)
    sold_back_revenue: Decimal = Decimal(0)
    sold_back_cost: Decimal = Decimal(0)
    buyers: tuple[str, ...] = ()  # the tenants it was bought for (its resale is credited to them)


@dataclass(frozen=True, slots=True)
class SliceCounts:
    requesting: int = 0
    booting: int = 0
    initializing: int = 0
    ready: int = 0
    failed: int = 0
    terminated: int = 0
    suspect: int = 0  # agent-backed slices whose agent missed its heartbeat lease
    lost: int = 0


@dataclass(frozen=True, slots=True)
class GroupView:
    name: str
    provider: str
    instance_type: str
    tier: Tier
    spot: bool
    region: str | None
    gpu_model: str | None
    gpus_per_node: int
    price_per_gpu_hour: Decimal | None
    priority: int | None
    availability: str
    backoff_until: datetime | None
    backoff_reason: Reason | None
    excluded: Reason | None
    min_slices: int
    max_slices: int
    slice_size: int
    slices: SliceCounts


@dataclass(frozen=True, slots=True)
class OrderView:
    key: str
    group: str
    status: OrderStatus
    provider: str
    instance_type: str
    node_count: int
    limit_price_per_gpu_hour: Decimal | None
    tier: Tier
    placed_at: datetime
    for_jobs: tuple[str, ...]
    block_id: str | None
    reason: Reason


@dataclass(frozen=True, slots=True)
class JobExplanation:
    """Why a job is where it is: its state, its last placement decision (node rejections counted), its
    routing decision, the purchase made for it, its place in the queue."""

    job_id: str
    state: JobState
    reason: Reason | None
    placement: PlacementSummary | None
    routing: Reason | None
    routing_group: str | None
    purchase: OrderView | None
    queue_position: int | None
    queue_length: int
    validation: tuple[Reason, ...]
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AutoscalerStatus:
    at: datetime | None
    last_routing: RoutingDecision | None
    routing_lines: tuple[str, ...]
    pending_groups: tuple[PendingGroup, ...]
    unmet: tuple[UnmetDemandView, ...]
    groups: tuple[GroupView, ...]
    open_orders: tuple[OrderView, ...]
    recent_actions: tuple[Action, ...]
    spot_risk: SpotRisk | None = None  # how the published interruption rates are priced, and why


def job_view(rec: JobRecord) -> JobView:
    spec, job = rec.spec, rec.job
    assert rec.state is not None
    return JobView(
        job_id=spec.job_id,
        name=spec.name,
        tier=job.tier.value if job is not None else str(spec.tier),
        state=rec.state,
        reason=rec.reason,
        gpu_count=spec.gpu_count,
        vram_per_gpu_gb=spec.vram_per_gpu_gb,
        cpu_cores=spec.cpu_cores,
        ram_gb=spec.ram_gb,
        expected_duration_sec=spec.expected_duration_sec,
        priority=spec.priority,
        submitted_at=job.submitted_at if job is not None and job.submitted_at else rec.submitted_at,
        pending_since=rec.pending_since,
        scheduled_at=rec.scheduled_at,
        started_at=rec.started_at,
        finished_at=rec.finished_at,
        placements=tuple(WorkPlacement(n, ix) for n, ix in rec.placements.items()),
        preemptions=rec.preemptions,
        order_key=rec.order_key,
        placement_history=tuple(rec.history),
    )


def node_view(rec: NodeRecord) -> NodeView:
    node, block = rec.node, rec.node.block
    return NodeView(
        node_id=node.id,
        block_id=block.id,
        group=rec.group,
        provider=block.provider,
        instance_type=block.instance_type,
        gpu_model=block.gpu_model,
        tier=node.tier,
        state=rec.state,
        gpu_count=node.gpu_count,
        gpus_free=node.free_gpu_count(),
        vram_per_gpu_gb=block.vram_per_gpu_gb,
        cpu_used=node.cpu_used,
        cpu_total=block.cpu_per_node,
        ram_used_gb=node.ram_used_gb,
        ram_total_gb=block.ram_per_node_gb,
        jobs=tuple(rec.jobs),
        end_time=block.end_time,
        ready_at=rec.ready_at,
        idle_since=rec.idle_since,
        cuda_version=block.cuda_version,
        driver_version=block.driver_version,
        draining=rec.draining,
    )


def block_view(rec: BlockRecord, state: ClusterState) -> BlockView:
    status = block_status(rec)
    return BlockView(
        block_id=rec.grant.block_id,
        provider=rec.grant.provider,
        instance_type=rec.grant.instance_type,
        group=rec.group,
        order_key=rec.order_key,
        node_ids=rec.node_ids,
        gpus_per_node=rec.grant.gpus_per_node,
        price_per_gpu_hour=rec.grant.price_per_gpu_hour,
        start_time=rec.grant.start_time,
        end_time=rec.grant.end_time,
        status=status,
        committed=round_micros(rec.committed),
        accrued=round_micros(rec.accrued),
        accounted_at=state.now,
        paid_gpu_s=rec.paid_gpu_s,
        busy_gpu_s_by_tenant=busy_by_tenant(state, rec.busy_gpu_s_by_job),
        busy_gpus_by_tenant=busy_by_tenant(state, busy_gpus_now(state, rec)),
        paid_gpus=paid_gpus_now(state, rec),
        sold_back_gpu_s=rec.sold_back_gpu_s,
        sold_back_revenue=rec.sold_back_revenue,
        sold_back_cost=rec.sold_back_cost,
        buyers=buyers_of(state, rec),
    )


def order_view(rec: OrderRecord) -> OrderView:
    assert rec.status is not None
    return OrderView(
        key=rec.key,
        group=rec.group,
        status=rec.status,
        provider=rec.request.provider,
        instance_type=rec.request.instance_type,
        node_count=rec.request.node_count,
        limit_price_per_gpu_hour=rec.request.limit_price_per_gpu_hour,
        tier=rec.request.tier,
        placed_at=rec.placed_at,
        for_jobs=rec.for_jobs,
        block_id=rec.block_id,
        reason=rec.reason,
    )


def slice_tallies(state: ClusterState) -> dict[str, dict[str, int]]:
    """Slices per group and lifecycle state (every slice ever, terminated and failed included)."""
    out: dict[str, dict[str, int]] = {}
    for sl in state.slices.values():
        if sl.state is not None:
            tally = out.setdefault(sl.group, {})
            tally[sl.state.value] = tally.get(sl.state.value, 0) + 1
    return out


def group_views(state: ClusterState) -> tuple[GroupView, ...]:
    tallies = slice_tallies(state)
    return tuple(group_view(state, g, tallies.get(g.name, {})) for g in state.groups.values())


def group_view(state: ClusterState, rec: GroupRecord, tally: dict[str, int]) -> GroupView:
    offer = rec.offer or rec.last_offer
    availability = availability_of(rec, state.now)[0].value if state.now is not None else "unknown"
    return GroupView(
        name=rec.name,
        provider=rec.provider,
        instance_type=rec.instance_type,
        tier=rec.tier,
        spot=rec.spot,
        region=offer.region if offer else None,
        gpu_model=offer.gpu_model if offer else None,
        gpus_per_node=int(offer.gpu_count) if offer else 0,
        price_per_gpu_hour=rec.offer.price_per_gpu_hour if rec.offer else None,
        priority=rec.priority,
        availability=availability,
        backoff_until=rec.backoff_until,
        backoff_reason=rec.backoff_reason,
        excluded=rec.excluded,
        min_slices=rec.min_slices,
        max_slices=rec.max_slices,
        slice_size=rec.slice_size,
        slices=SliceCounts(**tally),
    )


def queue(state: ClusterState, *, indexed: bool) -> list[str]:
    """The pending jobs in queue order: merged from the pending index's per-shape queues when ``indexed``
    (``ControllerConfig.pending_index``), else every pending job sorted (the reference)."""
    if indexed:
        return list(state.pending_index.ordered())
    jobs = [state.jobs[j].job for j in state.pending_ids]
    return [job.id for job in order_pending([j for j in jobs if j is not None])]


def explain(state: ClusterState, job_id: str, *, indexed: bool) -> JobExplanation | None:
    """Why the job is where it is; ``indexed``: its queue position read from the pending index
    (``ControllerConfig.pending_index``)."""
    rec = state.jobs.get(job_id)
    if rec is None or rec.state is None:
        return None
    order = state.orders.get(rec.order_key) if rec.order_key else None
    waiting = queue(state, indexed=indexed) if rec.state is JobState.PENDING else []
    position = waiting.index(job_id) + 1 if job_id in waiting else None
    lines: list[str] = []
    if rec.reason is not None:
        lines.append(f"{rec.state.value}: {rec.reason.message}")
    if position is not None:
        lines.append(f"queue position {position} of {len(waiting)} pending jobs")
    placement = state.placement_of(rec)
    if placement is not None:
        lines.append(f"placement: {placement.message}")
        lines += [f"  {c.count} x {c.code} (e.g. {c.example})" for c in placement.rejections]
    if rec.routing is not None and rec.state is JobState.PENDING:
        lines.append(f"routing: {rec.routing.message}")
    if order is not None:
        lines.append(f"purchase {order.key} ({order.status}): {order.reason.message}")
    lines += [f"invalid: {r.message}" for r in rec.validation]
    return JobExplanation(
        job_id=job_id,
        state=rec.state,
        reason=rec.reason,
        placement=placement,
        routing=rec.routing,
        routing_group=rec.routing_group,
        purchase=order_view(order) if order is not None else None,
        queue_position=position,
        queue_length=len(waiting),
        validation=rec.validation,
        lines=tuple(lines),
    )


def autoscaler_status(state: ClusterState, policy: ProcurementPolicy | None = None) -> AutoscalerStatus:
    """``policy``: the controller's procurement policy, for the spot risk it prices with (left out: none)."""
    decision = state.last_routing
    return AutoscalerStatus(
        at=state.last_routing_at,
        last_routing=decision,
        routing_lines=tuple(decision.explain()) if decision is not None else (),
        pending_groups=decision.pending_groups if decision is not None else (),
        unmet=state.unmet,
        groups=group_views(state),
        open_orders=tuple(
            order_view(o)
            for o in state.orders.values()
            if o.status in (OrderStatus.PLACED, OrderStatus.ACKNOWLEDGED, OrderStatus.EXPIRED)
        ),
        recent_actions=tuple(state.recent_actions),
        spot_risk=None if policy is None else spot_risk(state, policy),
    )


def story(state: ClusterState, key: str) -> tuple[StoryEntry, ...]:
    return tuple(state.story[i] for i in state.story_index.get(key, []))
