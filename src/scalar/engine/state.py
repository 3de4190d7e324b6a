"""The controller's mutable cluster state, owned by the engine alone.

Records for jobs, nodes, blocks, slices, purchase orders and scale groups, and the story: every lifecycle
move (and every notable non-move) with its time, the stimulus that caused it and the reason. All
iteration is over insertion-ordered dicts, so the same events always walk the state in the same order.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from scalar.domain.consolidation import ConsolidationDecision
from scalar.domain.market import BlockGrant, CapacityRequest, NodeState
from scalar.domain.offers import Offer
from scalar.domain.packing_apply import book_job, release_job
from scalar.domain.packing_model import Block, Job, Node
from scalar.domain.packing_scalar import ShapeWindow
from scalar.domain.reasons import Reason
from scalar.domain.routing_model import DemandEntry, RoutingDecision
from scalar.domain.tier import Tier
from scalar.engine.actions import Action, SellCapacity
from scalar.engine.config import ScaleGroupConfig
from scalar.engine.events import JobSpec, MarketBook
from scalar.engine.lifecycle import (
    IN_FLIGHT_STATES,
    LIVE_NODE_STATES,
    JobState,
    OrderStatus,
    check_move,
)
from scalar.engine.pending_index import OrderKey, PendingIndex, Shape

RECENT_ACTIONS = 100


@dataclass(frozen=True, slots=True)
class StoryEntry:
    """One thing that happened to ``key`` (a job, node, slice, order, block or group id)."""

    key: str
    kind: str
    at: datetime
    stimulus_id: str
    from_state: str | None
    to_state: str | None
    reason: Reason


@dataclass(frozen=True, slots=True)
class RejectionCount:
    """How many nodes a placement passed over for one reason, with one example."""

    code: str
    count: int
    example: str


@dataclass(frozen=True, slots=True)
class PlacementSummary:
    """The last placement decision for a job, with node rejections grouped and counted."""

    kind: str
    message: str
    node_ids: tuple[str, ...]
    rejections: tuple[RejectionCount, ...]
    at: datetime


@dataclass(frozen=True, slots=True)
class PlacementSpan:
    """Where part of a job was held: ``gpu_indices`` of ``node_id`` from ``since`` to ``until`` (None while
    it still holds them). Kept after the job finishes, so what it ran on stays known."""

    node_id: str
    gpu_indices: tuple[int, ...]
    since: datetime
    until: datetime | None = None


@dataclass(slots=True)
class JobFields:
    """A job's record (``JobRecord``, which adds its change stamp)."""

    spec: JobSpec
    job: Job | None
    submitted_at: datetime
    state: JobState | None = None
    reason: Reason | None = None
    pending_since: datetime | None = None
    parts: dict[str, Job] = field(default_factory=dict)
    placements: dict[str, tuple[int, ...]] = field(default_factory=dict)
    scheduled_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    preemptions: int = 0
    longest_run_s: float = 0.0  # the most work (reference s) one interrupted run did (contracts.known_work_s)
    placement: PlacementSummary | None = None
    routing: Reason | None = None
    routing_group: str | None = None
    order_key: str | None = None
    validation: tuple[Reason, ...] = ()
    history: list[PlacementSpan] = field(default_factory=list)  # every placement, closed when released


_CHANGES = itertools.count(1)
_UNSET = object()
_set = object.__setattr__


def _direct_init(fields_cls: type) -> Callable[..., None]:
    """``fields_cls``'s ``__init__`` as a frozen dataclass writes it (straight into the slots, not through
    a stamping ``__setattr__``: a new record is stamped once, not compared field by field)."""
    specs: list[tuple[str, object, Any]] = []
    for f in fields(fields_cls):
        if f.default is not MISSING:
            specs.append((f.name, f.type, field(default=f.default)))
        elif f.default_factory is not MISSING:
            specs.append((f.name, f.type, field(default_factory=f.default_factory)))
        else:
            specs.append((f.name, f.type, field()))
    twin = make_dataclass(f"_{fields_cls.__name__}Init", specs, frozen=True)
    init: Callable[..., None] = twin.__dict__["__init__"]
    return init


def change_mark() -> int:
    """A stamp later than every ``JobRecord.changed`` so far (``runtime``'s snapshot writer: which jobs
    changed since it last published)."""
    return next(_CHANGES)


_JOB_INIT = _direct_init(JobFields)


class JobRecord(JobFields):
    """A job as the controller knows it. ``changed`` is stamped from one counter at every assignment of a
    new value to a field (and by ``touch`` when a field's list or dict is changed in place), so a reader that noted
    ``change_mark()`` knows the records changed since: those with a later stamp. Not a field: neither
    compared, encoded nor published."""

    __slots__ = ("changed",)
    changed: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _JOB_INIT(self, *args, **kwargs)
        object.__setattr__(self, "changed", next(_CHANGES))

    def __setattr__(self, name: str, value: object) -> None:
        # stamped only for a new value: an equal one assigned again (a pass re-deciding the same routing)
        # changes nothing published
        old = getattr(self, name, _UNSET)
        _set(self, name, value)
        if old is not value and (old is _UNSET or old != value):
            _set(self, "changed", next(_CHANGES))

    def touch(self) -> None:
        object.__setattr__(self, "changed", next(_CHANGES))


@dataclass(slots=True)
class NodeFields:
    """A node's record (``NodeRecord``, which adds its change stamp)."""

    node: Node
    state: NodeState
    group: str
    slice_id: str
    block_id: str
    created_at: datetime
    state_at: datetime
    ready_at: datetime | None = None
    idle_since: datetime | None = None
    jobs: dict[str, None] = field(default_factory=dict)
    agent: bool = False  # a Scalar agent runs work on it (scalar.engine.agents)
    draining: bool = False  # a user-owned host being removed: nothing new is placed on it

    @property
    def id(self) -> str:
        return self.node.id

    @property
    def live(self) -> bool:
        return self.state in LIVE_NODE_STATES


_NODE_INIT = _direct_init(NodeFields)


class NodeRecord(NodeFields):
    """A node as the controller knows it, stamped like ``JobRecord`` at every assignment of a new value to a
    field (its ``jobs`` change in place only with its ``node``, which is assigned a new value then)."""

    __slots__ = ("changed",)
    changed: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _NODE_INIT(self, *args, **kwargs)
        object.__setattr__(self, "changed", next(_CHANGES))

    def __setattr__(self, name: str, value: object) -> None:
        # stamped only for a new value: an equal one assigned again (a pass re-deciding the same routing)
        # changes nothing published
        old = getattr(self, name, _UNSET)
        _set(self, name, value)
        if old is not value and (old is _UNSET or old != value):
            _set(self, "changed", next(_CHANGES))


@dataclass(slots=True)
class BlockRecord:
    grant: BlockGrant
    block: Block
    group: str
    order_key: str | None
    node_ids: tuple[str, ...]
    filled_at: datetime
    committed: Decimal
    released_at: datetime | None = None
    ended_at: datetime | None = None
    accrued: Decimal = Decimal(0)
    busy_gpu_s: Decimal = Decimal(0)
    paid_gpu_s: Decimal = Decimal(0)
    busy_gpu_s_by_job: dict[str, Decimal] = field(default_factory=dict)  # cost attribution (queries.costs)
    sold_back_gpu_s: Decimal = Decimal(0)  # GPU-seconds of the contract resold to the market
    sold_back_revenue: Decimal = Decimal(0)  # what the resale credited the buyer
    sold_back_cost: Decimal = Decimal(0)  # what the resold GPU-seconds cost under the contract
    fixed: bool = False  # a user-owned host (bring your own node): never released for idleness

    @property
    def open(self) -> bool:
        return self.released_at is None and self.ended_at is None


@dataclass(slots=True)
class SliceRecord:
    id: str
    group: str
    order_key: str | None
    nodes_wanted: int
    gang_size: int | None
    created_at: datetime
    state: NodeState | None = None
    state_at: datetime | None = None
    node_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class OrderRecord:
    key: str
    group: str
    request: CapacityRequest
    placed_at: datetime
    for_jobs: tuple[str, ...]
    reason: Reason
    status: OrderStatus | None = None
    slice_ids: list[str] = field(default_factory=list)
    block_id: str | None = None
    seller_order_id: str | None = None
    gang_size: int | None = None
    serves: dict[str, None] = field(default_factory=dict)  # jobs its capacity is held for


@dataclass(slots=True)
class GroupRecord:
    """One scale group: an offer shape (provider x instance type x spot) for one tier."""

    name: str
    config: ScaleGroupConfig | None
    provider: str
    instance_type: str
    tier: Tier
    spot: bool
    offer: Offer | None = None
    last_offer: Offer | None = None
    priority: int | None = None
    rank_reasons: tuple[Reason, ...] = ()
    excluded: Reason | None = None
    backoff_until: datetime | None = None
    backoff_reason: Reason | None = None
    failures: int = 0

    @property
    def min_slices(self) -> int:
        return self.config.min_slices if self.config else 0

    @property
    def max_slices(self) -> int:
        return self.config.max_slices if self.config else 0

    @property
    def slice_size(self) -> int:
        return self.config.slice_size if self.config else 1


@dataclass(slots=True)
class SkipLog:
    """What the last scheduling pass told the jobs it did not visit (``ClusterState.placement_of``).

    A pass skips a job when one of its shape at most as long already failed: the job's placement summary
    is that failure's (the latest of its shape before it in queue order, since the last time placed
    reservations reopened every shape). Jobs the pass visited (``visited``) carry their own summary, and
    so do jobs that became PENDING after the pass (order key sequence above ``upto``)."""

    upto: int
    visited: set[str] = field(default_factory=set)
    failures: dict[Shape, tuple[list[OrderKey], list[PlacementSummary]]] = field(default_factory=dict)
    clears: list[OrderKey] = field(default_factory=list)

    def fail(self, shape: Shape, key: OrderKey, summary: PlacementSummary) -> None:
        keys, summaries = self.failures.setdefault(shape, ([], []))
        keys.append(key)
        summaries.append(summary)


@dataclass(frozen=True, slots=True)
class UnmetDemandView:
    """Demand the autoscaler could not serve this step, with why (``job_ids`` of one entry)."""

    job_ids: tuple[str, ...]
    code: str
    message: str


class ClusterState:
    """Everything the controller knows. Mutated only by the controller's step."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobRecord] = {}
        self.nodes: dict[str, NodeRecord] = {}
        self.blocks: dict[str, BlockRecord] = {}
        self.slices: dict[str, SliceRecord] = {}
        self.orders: dict[str, OrderRecord] = {}
        self.groups: dict[str, GroupRecord] = {}
        self.offers: dict[str, tuple[Offer, ...]] = {}
        self.books: dict[str, MarketBook] = {}
        self.story: list[StoryEntry] = []
        self.story_index: dict[str, list[int]] = {}
        self.counters: dict[str, int] = {}
        self.now: datetime | None = None
        # When each tier's jobs arrived lately (the arrival forecast of release_idle; pruned to an hour).
        self.arrivals: dict[Tier, deque[datetime]] = {}
        # The jobs that arrived lately, as (when, job): the demand forecast contracts are sized against
        # (engine/contract_sizing.py; pruned to its forecast window).
        self.arrived_jobs: deque[tuple[datetime, Job]] = deque()
        # When the controller began watching arrivals (its first step): hours before it are not hours
        # without arrivals, so the forecast's steady rate reads only the hours since (contract_sizing.py).
        self.observed_since: datetime | None = None
        # Sell orders on blocks' remaining time (engine/resale.py): each offer by action id, and when each
        # block was last offered (one offer an hour at most).
        # Per spot group: the preemptions seen and the node-seconds its stopped nodes were held, against which
        # the published interruption rates are calibrated (``spot_exposure``, engine/cost_band.py).
        self.spot_seen: dict[str, tuple[int, float]] = {}
        # Per seller: the boots seen (purchase to READY) and their seconds in all (``contracts.expected_boot_s``).
        self.boot_seen: dict[str, tuple[int, float]] = {}
        self.sales: dict[str, SellCapacity] = {}
        self.resale_offered_at: dict[str, datetime] = {}
        self.cause = "init"
        self.steps = 0
        self.recent_actions: deque[Action] = deque(maxlen=RECENT_ACTIONS)
        self.last_routing: RoutingDecision | None = None
        self.last_routing_at: datetime | None = None
        self.unmet: tuple[UnmetDemandView, ...] = ()
        # The latest consolidation decisions (moves and contracts kept, with why): /autoscaler/status.
        self.consolidations: deque[tuple[datetime, ConsolidationDecision]] = deque(maxlen=RECENT_ACTIONS)
        self.consolidation_kept: tuple[ConsolidationDecision, ...] = ()  # the last pass's contracts kept
        self.restartable_held: dict[
            str, None
        ] = {}  # restartable jobs holding GPUs (consolidation's candidates)
        self.pending_ids: dict[str, None] = {}
        # The pending jobs by shape, in queue order (engine/pending_index.py), kept with ``pending_ids``; and
        # the placement summaries the last scheduling pass gave the jobs it skipped (``placement_of``).
        self.pending_index = PendingIndex()
        self.skipped: SkipLog | None = None
        # The shapes of the jobs submitted so far (valid ones, in submission order): the online prior of
        # the packer's score (domain.packing_scalar), rebuilt exactly by replaying the events.
        self.shapes = ShapeWindow()
        self.live_slice_ids: dict[str, None] = {}
        self.outbox: list[Action] = []
        # Something may now fit that did not at the last scheduling pass (see scheduler.schedule).
        self.schedule_dirty = True
        self.next_schedule_at: datetime | None = None
        # Bumped whenever the groups' offers change (refresh_groups): procurement's ranking is a function of
        # the offers and the demand, so it is recomputed only when either changed (autoscaler.ranking_step).
        self.offers_version = 0
        self.priorities_key: tuple[object, ...] | None = None
        # The blocks not yet seen closed, in ``blocks`` order, and how many of ``blocks`` were looked at
        # (see open_blocks).
        self._maybe_open: dict[str, BlockRecord] = {}
        self._blocks_seen = 0
        # What the last autoscaler pass saw and when it must run again (autoscaler.AutoscaleGate): a pass
        # whose inputs did not change since is skipped.
        self.autoscale_gate: object | None = None
        # What the packer reads of each node, kept while the node is the same value (packing_classes).
        self.node_views: dict[str, tuple[Node, tuple[object, ...]]] = {}
        # The last pass's routing entries by job (autoscaler._entries), reused while a job's views hold.
        self.demand_entries: dict[str, tuple[tuple[str, ...], int | None, DemandEntry]] = {}

    def rebuild_pending_index(self) -> None:
        """Index ``pending_ids`` afresh, in its order (a restored snapshot)."""
        self.pending_index = PendingIndex()
        self.skipped = None
        for job_id in self.pending_ids:
            rec = self.jobs[job_id]
            if rec.job is not None:
                self.pending_index.add(job_id, rec.job, bool(rec.spec.command))

    def placement_of(self, rec: JobRecord) -> PlacementSummary | None:
        """The job's last placement decision, including one the last scheduling pass skipped it with."""
        log = self.skipped
        job_id = rec.spec.job_id
        if log is None or job_id in log.visited:
            return rec.placement
        entry = self.pending_index.entries.get(job_id)
        if entry is None:
            return rec.placement
        key, shape = entry
        fails = log.failures.get(shape)
        if key[3] > log.upto or fails is None:
            return rec.placement
        keys, summaries = fails
        i = bisect_left(keys, key) - 1
        c = bisect_left(log.clears, key) - 1
        if i < 0 or (c >= 0 and log.clears[c] > keys[i]):
            return rec.placement
        return summaries[i]

    def open_blocks(self) -> list[BlockRecord]:
        """The open blocks, in ``blocks`` order, without walking every block ever bought at each step:
        ``blocks`` only grows (a block id is never reused) and a closed block never reopens, so each
        block is picked up once when added and dropped once seen closed."""
        if len(self.blocks) > self._blocks_seen:
            for block_id in itertools.islice(self.blocks, self._blocks_seen, None):
                self._maybe_open[block_id] = self.blocks[block_id]
            self._blocks_seen = len(self.blocks)
        closed = [block_id for block_id, block in self._maybe_open.items() if not block.open]
        for block_id in closed:
            del self._maybe_open[block_id]
        return list(self._maybe_open.values())

    # ---- ids and the story -------------------------------------------------------------------------

    def next_id(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0) + 1
        self.counters[prefix] = n
        return f"{prefix}-{n:06d}"

    @property
    def at(self) -> datetime:
        assert self.now is not None, "step() sets the time before anything happens"
        return self.now

    def record(
        self, kind: str, key: str, from_state: str | None, to_state: str | None, reason: Reason
    ) -> None:
        entry = StoryEntry(key, kind, self.at, self.cause, from_state, to_state, reason)
        self.story_index.setdefault(key, []).append(len(self.story))
        self.story.append(entry)

    def note(self, kind: str, key: str, reason: Reason) -> None:
        """A story entry without a state change (an ignored stale report, a decision to wait...)."""
        self.record(kind, key, None, None, reason)

    def emit(self, action: Action, keys: tuple[str, ...]) -> None:
        """Queue ``action`` for this step's answer and tell the story of every key it concerns."""
        self.outbox.append(action)
        self.recent_actions.append(action)
        for key in dict.fromkeys(keys):
            self.record("action", key, None, type(action).__name__, action.reason)

    # ---- lifecycle moves -----------------------------------------------------------------------------

    def move_job(self, rec: JobRecord, target: JobState, reason: Reason) -> None:
        before = rec.state
        check_move("job", rec.spec.job_id, before, target)
        rec.state = target
        rec.reason = reason
        if target is JobState.PENDING:
            rec.pending_since = self.at
            self.pending_ids[rec.spec.job_id] = None
            if rec.job is not None:
                self.pending_index.add(rec.spec.job_id, rec.job, bool(rec.spec.command))
            self.schedule_dirty = True
        else:
            if rec.spec.job_id in self.pending_index.entries:
                rec.placement = self.placement_of(rec)
                self.pending_index.remove(rec.spec.job_id)
            self.pending_ids.pop(rec.spec.job_id, None)
        self.record("job", rec.spec.job_id, None if before is None else before.value, target.value, reason)

    def move_node(self, rec: NodeRecord, target: NodeState, reason: Reason) -> None:
        before = rec.state
        check_move("node", rec.id, before, target)
        rec.state = target
        rec.state_at = self.at
        if target is NodeState.READY:
            if before in IN_FLIGHT_STATES:
                self._booted(rec)
            rec.ready_at = self.at
            self.schedule_dirty = True
            if not rec.jobs:
                rec.idle_since = self.at
        self.record("node", rec.id, before.value, target.value, reason)

    def create_node(self, rec: NodeRecord, reason: Reason) -> None:
        check_move("node", rec.id, None, rec.state)
        self.nodes[rec.id] = rec
        self.record("node", rec.id, None, rec.state.value, reason)

    def add_slice(self, rec: SliceRecord, state: NodeState, reason: Reason) -> None:
        self.slices[rec.id] = rec
        self.move_slice(rec, state, reason)

    def move_slice(self, rec: SliceRecord, target: NodeState, reason: Reason) -> None:
        before = rec.state
        check_move("slice", rec.id, before, target)
        rec.state = target
        rec.state_at = self.at
        if target in LIVE_NODE_STATES:
            self.live_slice_ids[rec.id] = None
        else:
            self.live_slice_ids.pop(rec.id, None)
        self.record("slice", rec.id, None if before is None else before.value, target.value, reason)

    def move_order(self, rec: OrderRecord, target: OrderStatus, reason: Reason) -> None:
        before = rec.status
        check_move("order", rec.key, before, target)
        rec.status = target
        self.record("order", rec.key, None if before is None else before.value, target.value, reason)

    # ---- spot history --------------------------------------------------------------------------------

    def node_stopped(self, node: NodeRecord, interrupted: bool) -> None:
        """A spot group's node stopped: its time held joins the group's exposure, and an interruption
        (the seller preempted it) its count."""
        group = self.groups.get(node.group)
        if group is None or group.offer is None or not group.offer.spot:
            return
        n, held_s = self.spot_seen.get(node.group, (0, 0.0))
        held_s += max(0.0, (self.at - node.created_at).total_seconds())
        self.spot_seen[node.group] = (n + (1 if interrupted else 0), held_s)

    def _booted(self, node: NodeRecord) -> None:
        group = self.groups.get(node.group)
        if group is None or node.agent:
            return
        n, total_s = self.boot_seen.get(group.provider, (0, 0.0))
        self.boot_seen[group.provider] = (
            n + 1,
            total_s + max(0.0, (self.at - node.created_at).total_seconds()),
        )

    def spot_exposure(self) -> dict[str, tuple[int, float]]:
        """Per spot group: (interruptions seen, node-hours held), the live nodes counted up to now."""
        out = {g: (n, s / 3600.0) for g, (n, s) in self.spot_seen.items()}
        for node in self.nodes.values():
            if not node.live or node.group not in self.groups:
                continue
            group = self.groups[node.group]
            if group.offer is None or not group.offer.spot:
                continue
            n, hours = out.get(node.group, (0, 0.0))
            out[node.group] = (n, hours + max(0.0, (self.at - node.created_at).total_seconds()) / 3600.0)
        return out

    # ---- bookings ------------------------------------------------------------------------------------

    def book(self, rec: JobRecord, node_id: str, part: Job, gpu_indices: tuple[int, ...]) -> None:
        """Book ``part`` of ``rec``'s job on a node (domain ``book_job`` re-checks every resource)."""
        node_rec = self.nodes[node_id]
        node_rec.node = book_job(node_rec.node, part, gpu_indices)
        node_rec.jobs[rec.spec.job_id] = None
        node_rec.idle_since = None
        rec.parts[node_id] = part
        rec.placements[node_id] = gpu_indices
        if part.restartable:
            self.restartable_held[rec.spec.job_id] = None
        rec.history.append(PlacementSpan(node_id, gpu_indices, self.at))
        rec.touch()

    def release(self, rec: JobRecord) -> tuple[str, ...]:
        """Free every GPU, CPU and GB of RAM the job holds; return the node ids it was on."""
        freed: list[str] = []
        for node_id, part in rec.parts.items():
            node_rec = self.nodes.get(node_id)
            if node_rec is None:
                continue
            if rec.spec.job_id in node_rec.jobs:
                node_rec.node = release_job(node_rec.node, part)
                del node_rec.jobs[rec.spec.job_id]
                if not node_rec.jobs and node_rec.state is NodeState.READY:
                    node_rec.idle_since = self.at
            freed.append(node_id)
        if freed:
            self.schedule_dirty = True
        rec.parts = {}
        rec.placements = {}
        self.restartable_held.pop(rec.spec.job_id, None)
        for i, span in enumerate(rec.history):
            if span.until is None:
                rec.history[i] = PlacementSpan(span.node_id, span.gpu_indices, span.since, self.at)
        rec.touch()
        return tuple(freed)
