"""Response schemas of the cluster views: ``/jobs/{id}/explain``, ``/nodes``, ``/blocks``,
``/autoscaler/status`` and ``/costs`` (docs/api.md). Money is a decimal string (``"2.370000"``, USD)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Money = str
Source = Literal["leader", "store"]


class RejectionOut(BaseModel):
    code: str = Field(description="why these nodes could not take the job")
    count: int = Field(description="how many nodes were rejected for this reason")
    example: str = Field(description="one of them, with its numbers")


class PlacementOut(BaseModel):
    kind: str
    message: str
    at: str | None
    node_ids: list[str]
    nodes_rejected: int
    rejections: list[RejectionOut]


class RoutingOut(BaseModel):
    group: str | None
    code: str
    message: str
    resource: str | None = None
    need: float | int | str | None = None
    have: float | int | str | None = None
    limit: float | int | str | None = None


class PurchaseOut(BaseModel):
    order_key: str
    status: str | None
    in_flight: bool = Field(description="placed or acknowledged, or filled with nodes not READY yet")
    group: str | None
    provider: str | None
    instance_type: str | None
    node_count: int | None
    tier: str | None
    limit_price_per_gpu_hour: Money | None
    placed_at: str | None
    block_id: str | None
    node_states: list[str]
    reason: str | None
    eta_at: str | None = Field(description="when its capacity is expected READY")
    eta_s: float | None = Field(description="seconds from now until eta_at")
    overdue_s: float | None = Field(None, description="seconds past eta_at while still not READY")
    eta_basis: str = Field(description="how the ETA was estimated")
    deadline_at: str | None = Field(description="the controller gives up on it after this")
    for_jobs: list[str]


class StoryItemOut(BaseModel):
    at: str | None
    code: str
    message: str
    kind: str | None
    from_: str | None = Field(alias="from", serialization_alias="from")
    to: str | None

    model_config = {"populate_by_name": True}


class ExplanationOut(BaseModel):
    job_id: str
    name: str | None
    state: str
    reason: str | None
    reason_code: str | None
    summary: str = Field(description="one line: the state and why")
    source: Source = Field(description="leader: with the controller's memory; store: a follower's view")
    queue_position: int | None = Field(description="1-based among pending jobs, in packing order")
    queue_length: int
    waiting_s: float | None = Field(description="seconds from submission to start (or to now)")
    placement: PlacementOut | None = Field(description="the last placement decision, rejections counted")
    routing: RoutingOut | None
    purchase: PurchaseOut | None
    validation: list[dict[str, Any]]
    lines: list[str] = Field(description="the explanation as sentences, with numbers")
    story: list[StoryItemOut] = Field(description="the job's decisions, oldest first")
    notes: list[str]
    at: str | None


class GpuSlotOut(BaseModel):
    index: int
    job_ids: list[str]
    vram_used_gb: float
    vram_total_gb: float


class NodeSlotsOut(BaseModel):
    node_id: str
    block_id: str | None
    group: str | None
    provider: str | None
    instance_type: str | None
    gpu_model: str | None
    tier: str | None
    state: str | None
    gpu_count: int
    gpus_allocated: int
    gpus_free: int
    vram_per_gpu_gb: float
    cpu_used: float | None
    cpu_total: float | None
    ram_used_gb: float | None
    ram_total_gb: float | None
    jobs: list[str]
    expires_at: str | None
    expires_in_s: float | None
    ready_at: str | None
    idle_since: str | None
    gpus: list[GpuSlotOut]
    cuda_version: str | None = Field(
        default=None, description='CUDA the node supports ("12.8"); null: unknown'
    )
    driver_version: str | None = None
    draining: bool = Field(
        default=False, description="being removed (`scalar node remove`): nothing new is placed on it"
    )


class NodeTotalsOut(BaseModel):
    nodes: int
    nodes_by_state: dict[str, int]
    ready_nodes: int
    gpus_total: int = Field(description="GPUs on READY nodes")
    gpus_allocated: int
    gpus_idle: int
    gpus_booting: int
    utilization: float = Field(description="gpus_allocated / gpus_total")
    fragmentation: float = Field(description="share of idle GPUs on nodes already partly in use")
    stranded_gpus: int
    largest_free_node_gpus: int
    vram_total_gb: float
    vram_used_gb: float


class NodesOut(BaseModel):
    """A page of the slot map (``count`` nodes, at most ``limit``); ``totals``: the whole fleet's."""

    nodes: list[NodeSlotsOut]
    count: int
    totals: NodeTotalsOut
    at: str | None
    limit: int | None = None
    after: str | None = Field(default=None, description="the cursor this page starts after")
    next: str | None = Field(default=None, description="pass as `after` for the next page; null: the last")
    prev: str | None = Field(default=None, description="pass as `after` for the page before; null: the first")


class BlockOut(BaseModel):
    block_id: str
    provider: str
    instance_type: str | None
    group: str | None
    order_key: str | None
    status: str | None = Field(description="open, released or ended")
    node_ids: list[str]
    node_count: int
    gpus_per_node: int | None
    gpu_count: int
    price_per_gpu_hour: Money
    price_per_hour: Money
    start_time: str | None
    end_time: str | None = Field(description="expiry")
    expires_in_s: float | None
    committed: Money = Field(description="the contract's full value")
    accrued: Money = Field(description="spent so far")


class BlockTotalsOut(BaseModel):
    blocks: int
    open_blocks: int
    open_gpus: int
    open_price_per_hour: Money
    committed: Money
    accrued: Money


class BlocksOut(BaseModel):
    """A page of contracts (``count``, at most ``limit``); ``totals``: every block in ``status``."""

    blocks: list[BlockOut]
    count: int
    status: str | None
    totals: BlockTotalsOut
    at: str | None
    limit: int | None = None
    after: str | None = Field(default=None, description="the cursor this page starts after")
    next: str | None = Field(default=None, description="pass as `after` for the next page; null: the last")
    prev: str | None = Field(default=None, description="pass as `after` for the page before; null: the first")


class UnmetOut(BaseModel):
    job_ids: list[str]
    code: str
    message: str | None


class UnmetByReasonOut(BaseModel):
    code: str
    jobs: int
    example: str | None
    job_ids: list[str]


class SlicesOut(BaseModel):
    requesting: int = 0
    booting: int = 0
    initializing: int = 0
    ready: int = 0
    failed: int = 0
    terminated: int = 0
    suspect: int = 0  # agent-backed slices whose agent missed its heartbeat lease
    lost: int = 0  # agent-backed slices declared lost (their jobs are requeued)


class GroupStatusOut(BaseModel):
    name: str
    provider: str | None
    instance_type: str | None
    tier: str | None
    spot: bool | None
    gpu_model: str | None
    gpus_per_node: int | None
    price_per_gpu_hour: Money | None
    priority: int | None
    availability: str | None
    backoff_until: str | None
    backoff_reason: str | None
    excluded: str | None
    min_slices: int | None
    max_slices: int | None
    slices: SlicesOut


class OpenOrderOut(BaseModel):
    order_key: str
    status: str | None
    group: str | None
    provider: str | None
    instance_type: str | None
    node_count: int | None
    limit_price_per_gpu_hour: Money | None
    placed_at: str | None
    for_jobs: list[str]
    reason: str | None


class ActionOut(BaseModel):
    action_id: str
    kind: str
    status: str
    attempts: int
    subject: str | None
    reason: str | None
    provider: str | None
    created_at: str | None
    completed_at: str | None
    error: str | None


class MoveOut(BaseModel):
    """One job moved by consolidation: from which node to which GPUs, and the progress it lost."""

    job_id: str
    from_node: str
    to_node: str
    gpu_indices: list[int]
    lost_s: float


class ConsolidationDecisionOut(BaseModel):
    """A contract consolidation emptied (``moves``) or kept, with the saving and the restart cost."""

    at: str | None
    block_id: str
    code: str
    reason: str
    saving: Money
    restart_cost: Money
    moves: list[MoveOut]


class ConsolidationOut(BaseModel):
    enabled: bool
    recent_moves: list[ConsolidationDecisionOut] = Field(description="contracts emptied lately, newest first")
    kept: list[ConsolidationDecisionOut] = Field(
        description="underused contracts the last pass kept, with why (not restartable, no room, not worth it)"
    )


class BootOut(BaseModel):
    provider: str
    seen: int = Field(description="nodes of this seller seen from purchase to READY")
    expected_s: float = Field(
        description="the mean time to READY expected (the boots seen and a prior for the kind)"
    )


class SpotRiskOut(BaseModel):
    """How spot interruptions are priced: every published hazard times ``calibration``, the preemptions
    seen on the spot nodes held against those the published rates predicted (docs/decisions/procurement.md)."""

    preemptions_seen: int
    preemptions_expected: float = Field(
        description="what the published rates predicted over the node-hours held"
    )
    spot_node_hours: float
    calibration: float = Field(
        description="the factor every published spot hazard is priced at (1: none seen yet)"
    )
    boots: list[BootOut]


class AutoscalerOut(BaseModel):
    source: Source
    at: str | None
    routed_at: str | None
    last_routing: dict[str, Any] | None = Field(description="the leader's last routing decision")
    routing_lines: list[str]
    pending_groups: list[dict[str, Any]]
    unmet: list[UnmetOut]
    unmet_by_reason: list[UnmetByReasonOut]
    consolidation: ConsolidationOut | None = Field(
        default=None,
        description="restartable jobs moved off underused contracts (the leader's; null on a follower)",
    )
    spot_risk: SpotRiskOut | None = Field(
        default=None,
        description="how spot interruptions and boots are priced, from what was observed (the leader's; null on a follower)",
    )
    groups: list[GroupStatusOut] = Field(
        description="groups with slices or something in flight (all_groups: all)"
    )
    groups_total: int
    slice_totals: SlicesOut
    open_orders: list[OpenOrderOut]
    recent_actions: list[ActionOut] = Field(description="the last 100 actions, newest first")
    notes: list[str]


class TenantCostOut(BaseModel):
    """One tenant's share of the contracts: the GPU-hours its jobs held and their cost, and the resale of
    blocks bought for it credited to it."""

    tenant: str
    gpu_hours: str
    cost: Money
    sold_back_gpu_hours: str = Field(default="0", description="resold GPU-hours of blocks bought for it")
    sold_back_revenue: Money = Field(default="0", description="their proceeds, credited to it")


class CostLineOut(BaseModel):
    """Totals of some contracts: ``paid_gpu_hours == delivered_gpu_hours + idle_gpu_hours`` exactly."""

    blocks: int
    committed: Money = Field(description="the contracts' full value")
    accrued: Money = Field(description="spent so far")
    paid_gpu_hours: str = Field(description="GPU-hours paid for so far")
    delivered_gpu_hours: str = Field(description="GPU-hours that held a job")
    idle_gpu_hours: str = Field(description="GPU-hours paid for that held no job")
    idle_cost: Money = Field(description="what the idle GPU-hours cost")
    sold_back_gpu_hours: str = Field(description="GPU-hours of the contracts resold to the market")
    sold_back_revenue: Money = Field(description="what the resale credited")
    net_cost: Money = Field(
        description="accrued, plus what resold hours cost under their contracts, less the resale revenue"
    )
    cost_per_delivered_gpu_hour: Money | None = Field(description="net cost / delivered GPU-hours")
    utilization: float | None = Field(description="delivered / paid GPU-hours")


class ProviderCostOut(CostLineOut):
    provider: str


class BlockCostOut(CostLineOut):
    block_id: str
    provider: str
    status: str
    by_tenant: list[TenantCostOut] = Field(
        description="the block's GPU-hours and cost per tenant, and (idle)"
    )


class SpendPointOut(BaseModel):
    at: str | None
    spend: Money = Field(description="cumulative spend up to this time")
    spend_in_interval: Money
    by_provider: dict[str, Money]


class CostsOut(CostLineOut):
    at: str | None
    currency: str
    by_provider: list[ProviderCostOut]
    by_block: list[BlockCostOut] = []
    by_tenant: list[TenantCostOut] = Field(default=[], description="per tenant, and (idle): no job held it")
    series: list[SpendPointOut]


class PreviewNodeOut(BaseModel):
    node_id: str
    provider: str | None
    instance_type: str | None
    gpus_free: int | None
    price_per_gpu_hour: Money
    node_ids: list[str] = Field(default=[], description="every node of the placement (a gang: several)")
    gpu_indices: list[int] = Field(default=[], description="the GPUs of the first node it would hold")


class PreviewPurchaseOut(BaseModel):
    provider: str
    instance_type: str
    region: str | None
    gpu_model: str | None
    gpus_per_node: int
    node_count: int
    price_per_gpu_hour: Money
    price_per_hour: Money
    contract_s: float = Field(description="how long the contract would last")
    committed: Money = Field(description="what the contract commits in full")
    offers_that_fit: int = Field(description="scale groups of the job's tier procurement ranks now")
    group: str | None = Field(default=None, description="the scale group the controller buys from")
    spot: bool = False
    limit_price_per_gpu_hour: Money | None = Field(default=None, description="the purchase's limit price")
    for_jobs: int = Field(default=1, description="how many waiting jobs (this one included) it is bought for")


class PreviewOut(BaseModel):
    job: dict[str, Any]
    currency: str
    needs_purchase: bool
    node: PreviewNodeOut | None = Field(description="the READY node it fits on now, if any")
    purchase: PreviewPurchaseOut | None = Field(description="the purchase it would need, if any")
    job_cost: Money | None = Field(
        description="the job's GPUs x price x expected run hours on the GPU model (FLEX work over its throughput)"
    )
    new_commitment: Money = Field(description="new money committed by a purchase (0 when it fits now)")
    waits_for: dict[str, Any] | None = Field(
        default=None, description="the purchase already on its way it would wait for (order_key, group)"
    )
    decided_by: dict[str, Any] | None = Field(
        default=None,
        description="the controller's published state it was decided on: snapshot_at, and the time decided at",
    )
    reason: str


class GpuTotalsOut(BaseModel):
    total: int
    allocated: int
    idle: int
    utilization: float


class SpendOut(BaseModel):
    currency: str
    accrued: Money
    by_provider: dict[str, Money]
    committed: Money
    open_price_per_hour: Money


class StepLatencyOut(BaseModel):
    count: int
    mean_s: float | None
    max_s: float | None


class StatusOut(BaseModel):
    at: str | None
    health: dict[str, Any]
    jobs_by_state: dict[str, int] = Field(description="every job state, 0 included")
    jobs_total: int
    nodes_by_state: dict[str, int]
    gpus: GpuTotalsOut = Field(description="GPUs on READY nodes")
    spend: SpendOut
    slices: SlicesOut = Field(description="slices of every scale group by lifecycle state")
    orders_by_status: dict[str, int]
    actions_by_status: dict[str, int]
    inbox_pending: int
    steps: int
    step_latency: StepLatencyOut
