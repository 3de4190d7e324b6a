"""What time alone decides: contracts ending, requests and boots timing out, idle blocks released,
and the money that accrues while blocks are held.

- A block past its ``end_time`` ends: its nodes go TERMINATED and their jobs back to PENDING.
- A REQUESTING slice older than ``request_timeout_s`` fails (its order EXPIRES; a later fill is still
  adopted) and its group backs off. A node not READY ``boot_timeout_s`` after its purchase filled fails,
  same backoff. A block with no live node left is released so it stops costing money.
- A block whose nodes have all been READY and idle for its hold is released, unless that would take its
  group below ``min_slices`` or a queued job could be placed on it. Of a block whose seller bills running
  time (everyone but SFCompute), the idle slices go alone by the same rule while its other nodes work
  (``ReleaseNodes``): one long job no longer keeps a whole purchase paid. The hold
  (``domain.release.idle_hold``): ``idle_release_s`` for a block paid whole (SFCompute); for a seller
  billing running time, from its billing unit (in the market's clock), the time the block took from
  purchase to READY and the arrivals in the last hour of the jobs its nodes could host (tier, GPU model,
  memory, CPU, RAM: ``hostable_arrivals_per_hour``). A block paid whole gains nothing from a release but
  what its time sells for: past its hold it is sold back instead (``resale.sell_instead_of_release``:
  every whole hour left on its unsold nodes offered, credited like any sale, what does not sell offered
  again an hour later), and released only when there is nothing left to sell or its seller refuses sell
  orders.
- Accrual: between two steps each open block costs ``price x GPUs x time``; the GPUs that held a job in
  that time are the delivered GPU-hours (state between steps is constant, so this is exact).
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta
from decimal import Decimal

from scalar.domain.market import NodeState
from scalar.domain.packing import evaluate_node
from scalar.domain.packing_model import Job, Node
from scalar.domain.reasons import Reason
from scalar.domain.release import DEFAULT_RESTART_S, billing_unit_s, idle_hold
from scalar.domain.timefmt import exact_seconds
from scalar.engine.config import ControllerConfig
from scalar.engine.costs import paid_node
from scalar.engine.lifecycle import IN_FLIGHT_STATES, OPEN_ORDER_STATES, OrderStatus
from scalar.engine.resale import sell_instead_of_release
from scalar.engine.reserve import RESTART_RESERVE_CODE, Reserve, restart_reserves
from scalar.engine.state import BlockRecord, ClusterState, NodeRecord
from scalar.engine.transitions import back_off, lose_node, older_than, release_block, release_nodes

_HOUR = Decimal(3600)
_ZERO = Decimal(0)


def accrue(state: ClusterState, now: datetime) -> None:
    """Charge every open block for ``[state.now, now]`` and count the GPU-seconds that held jobs."""
    last = state.now
    if last is None or now <= last:
        return
    for block in state.open_blocks():
        if not block.open:
            continue
        start = max(last, block.block.start_time)
        end = min(now, block.block.end_time)
        if end <= start:
            continue
        # A node whose remaining time was sold back (engine/resale.py) is paid and used until the cut; a
        # seller billing running time stops billing a node when it stops (released alone, preempted, failed).
        stops: dict[datetime, int] = {}
        for node_id in block.node_ids:
            if not paid_node(state, block, node_id):
                continue
            node = state.nodes.get(node_id)
            stop = min(end, node.node.block.end_time) if node is not None else end
            stops[stop] = stops.get(stop, 0) + 1
        for stop, count in sorted(stops.items()):
            if stop > start:
                gpus = block.block.gpus_per_node * count
                dt = exact_seconds(stop - start)
                block.paid_gpu_s += gpus * dt
                block.accrued += block.grant.price_per_gpu_hour * gpus * dt / _HOUR
        busy = _ZERO
        for node_id in block.node_ids:
            node = state.nodes.get(node_id)
            if node is not None and node.live and node.jobs:
                stop = min(end, node.node.block.end_time)
                if stop <= start:
                    continue
                dt = exact_seconds(stop - start)
                by_job = block.busy_gpu_s_by_job  # who held each GPU: costs are attributed by GPU-hours
                for slot in node.node.gpu_slots:
                    if slot.job_id is not None:
                        busy += dt
                        by_job[slot.job_id] = by_job.get(slot.job_id, _ZERO) + dt
                    elif slot.job_ids:
                        busy += dt
                        share = dt / len(slot.job_ids)
                        for job_id in slot.job_ids:
                            by_job[job_id] = by_job.get(job_id, _ZERO) + share
        block.busy_gpu_s += busy


def expire_blocks(state: ClusterState, now: datetime) -> None:
    for block in state.open_blocks():
        if block.open and block.block.end_time <= now:
            block.ended_at = now
            reason = Reason(
                "contract_ended",
                f"block {block.grant.block_id} ended at {block.block.end_time.isoformat()}",
                "end_time",
                have=block.block.end_time.isoformat(),
            )
            for node_id in block.node_ids:
                node = state.nodes.get(node_id)
                if node is not None and node.live:
                    lose_node(state, node, NodeState.TERMINATED, reason)


def timeouts(state: ClusterState, config: ControllerConfig, now: datetime) -> None:
    backed_off: set[str] = set()
    for sid in list(state.live_slice_ids):
        sl = state.slices[sid]
        if sl.state is not NodeState.REQUESTING or not older_than(
            sl.created_at, now, config.request_timeout_s
        ):
            continue
        reason = Reason(
            "request_timeout",
            f"slice {sl.id} of {sl.group} was requested at {sl.created_at.isoformat()} and not filled within "
            f"{config.request_timeout_s:g} s",
            "seconds",
            config.request_timeout_s,
            (now - sl.created_at).total_seconds(),
            config.request_timeout_s,
        )
        state.move_slice(sl, NodeState.FAILED, reason)
        order = state.orders.get(sl.order_key) if sl.order_key else None
        if order is not None and order.status in OPEN_ORDER_STATES:
            waiting = [s for s in order.slice_ids if state.slices[s].state is NodeState.REQUESTING]
            if not waiting:
                state.move_order(order, OrderStatus.EXPIRED, reason)
        group = state.groups.get(sl.group)
        if group is not None and group.name not in backed_off:
            backed_off.add(group.name)
            back_off(state, config, group, reason)
    for node in list(state.nodes.values()):
        if node.state in IN_FLIGHT_STATES and older_than(node.created_at, now, config.boot_timeout_s):
            reason = Reason(
                "boot_timeout",
                f"node {node.id} has been {node.state.value} since its purchase filled at "
                f"{node.created_at.isoformat()}, over the {config.boot_timeout_s:g} s boot timeout",
                "seconds",
                config.boot_timeout_s,
                (now - node.created_at).total_seconds(),
                config.boot_timeout_s,
            )
            lose_node(state, node, NodeState.FAILED, reason)
            group = state.groups.get(node.group)
            if group is not None and group.name not in backed_off:
                backed_off.add(group.name)
                back_off(state, config, group, reason)


def release_dead_blocks(state: ClusterState, now: datetime) -> None:
    for block in state.open_blocks():
        if not block.open or block.block.end_time <= now:
            continue
        if any(state.nodes[n].live for n in block.node_ids if n in state.nodes):
            continue
        release_block(
            state,
            block,
            "all_nodes_failed",
            Reason("all_nodes_failed", f"no node of block {block.grant.block_id} is alive; releasing it"),
        )


ARRIVAL_WINDOW = timedelta(hours=1)


def restart_s(state: ClusterState, block: BlockRecord, nodes: list[NodeRecord], scale: float = 1.0) -> float:
    """How long this block took from its purchase to READY: what buying it again would take (the default, a
    seller's time, converted to the engine's clock with ``scale`` when the block has not shown it)."""
    order = state.orders.get(block.order_key) if block.order_key else None
    ready = [n.ready_at for n in nodes if n.ready_at is not None]
    if order is None or not ready:
        return DEFAULT_RESTART_S / (scale if scale > 0 else 1.0)
    return max(0.0, (max(ready) - order.placed_at).total_seconds())


def hosts(node: NodeRecord, job: Job, now: datetime, safety_margin_s: float, block_nodes: int = 1) -> bool:
    """Whether ``job`` could run on ``node`` were the node empty of other work: the packer's filters
    (tier, GPU model, CUDA, time left, CPU, RAM, GPUs and their memory), and a job with a command only on an
    agent's node, one without only on the others (as the scheduler places them). A gang larger than the
    node needs ``ceil(gpus / per node)`` whole nodes of one block (``block_nodes`` of them here), each
    holding its largest part."""
    gpus = node.node.block.gpus_per_node
    if job.gpu_count > gpus:
        parts = math.ceil(job.gpu_count / gpus)
        if parts > block_nodes:
            return False
        job = dataclasses.replace(job, gpu_count=math.ceil(job.gpu_count / parts))
    return evaluate_node(job, node.node, now, safety_margin_sec=safety_margin_s).reason is None


class _Hostable:
    """The jobs an idle node could host, looked up once per pass and per node shape: the arrivals of the
    last hour (the hold's forecast) and whether a queued single-node job could be placed on it now."""

    def __init__(self, state: ClusterState, config: ControllerConfig, now: datetime) -> None:
        self.state, self.config, self.now = state, config, now
        self._rates: dict[tuple[object, ...], float] = {}
        self._queued: list[tuple[Job, bool]] | None = None

    def arrivals_per_hour(self, node: NodeRecord, block_nodes: int) -> float:
        key = (*_shape_key(node.node), node.agent, block_nodes)
        found = self._rates.get(key)
        if found is None:
            found = self._rates[key] = hostable_arrivals_per_hour(
                self.state, node, self.now, self.config.safety_margin_s, block_nodes
            )
        return found

    def queued_fits(self, node: NodeRecord) -> Job | None:
        """A queued single-node job the packer would place on ``node`` as it is now (one job per distinct
        shape is tried)."""
        if self._queued is None:
            seen: set[tuple[object, ...]] = set()
            self._queued = []
            for job_id in self.state.pending_ids:
                rec = self.state.jobs.get(job_id)
                job = rec.job if rec is not None else None
                if rec is None or job is None:
                    continue
                key = (*_job_key(job), bool(rec.spec.command))
                if key not in seen:
                    seen.add(key)
                    self._queued.append((job, bool(rec.spec.command)))
        gpus = node.node.block.gpus_per_node
        for job, on_agent in self._queued:
            if job.gpu_count > gpus or on_agent != node.agent:
                continue
            if (
                evaluate_node(job, node.node, self.now, safety_margin_sec=self.config.safety_margin_s).reason
                is None
            ):
                return job
        return None


def _shape_key(node: Node) -> tuple[object, ...]:
    b = node.block
    return (node.tier, b.gpu_model, b.gpus_per_node, b.vram_per_gpu_gb, b.cpu_per_node, b.ram_per_node_gb,
            b.cuda_version, b.end_time)  # fmt: skip


def _job_key(job: Job) -> tuple[object, ...]:
    return (job.tier, job.gpu_count, job.vram_per_gpu_gb, job.cpu_cores, job.ram_gb, job.gpu_models,
            job.share_gpu, job.cuda_versions, job.expected_duration_sec)  # fmt: skip


def hostable_arrivals_per_hour(
    state: ClusterState, node: NodeRecord, now: datetime, safety_margin_s: float, block_nodes: int = 1
) -> float:
    """Jobs submitted in the last hour that ``node`` could host (``hosts``), per hour."""
    start = now - ARRIVAL_WINDOW
    verdicts: dict[tuple[object, ...], bool] = {}
    count = 0
    for at, job in reversed(state.arrived_jobs):
        if at <= start:
            break
        if job.tier is not node.node.tier:
            continue
        rec = state.jobs.get(job.id)
        on_agent = rec is not None and bool(rec.spec.command)
        if on_agent != node.agent:
            continue
        key = _job_key(job)
        ok = verdicts.get(key)
        if ok is None:
            ok = verdicts[key] = hosts(node, job, now, safety_margin_s, block_nodes)
        count += ok
    return float(count) * (3600.0 / ARRIVAL_WINDOW.total_seconds())


def release_idle(state: ClusterState, config: ControllerConfig, now: datetime) -> None:
    live_nodes: dict[str, int] = {}
    for node in state.nodes.values():
        if node.live:
            live_nodes[node.group] = live_nodes.get(node.group, 0) + 1
    hostable = _Hostable(state, config, now)
    spares = _Spares(state, config, now)
    for block in state.open_blocks():
        if not block.open or block.fixed:
            continue
        nodes = [state.nodes[n] for n in block.node_ids if n in state.nodes and state.nodes[n].live]
        idle = [n for n in nodes if n.state is NodeState.READY and not n.jobs and n.idle_since]
        if not idle:
            continue
        if len(idle) == len(nodes):
            parts = [nodes]  # the whole block
        elif billing_unit_s(block.grant.provider) is not None:
            parts = _idle_slices(nodes, idle)  # a seller billing running time ends nodes one by one
        else:
            continue  # a contract paid whole: only the whole block goes (or its time is sold back)
        for part in parts:
            if _release_part(state, config, block, part, whole=len(part) == len(nodes), hostable=hostable,
                             live_nodes=live_nodes, spares=spares, now=now):  # fmt: skip
                live_nodes[block.group] = live_nodes.get(block.group, 0) - len(part)


def _idle_slices(nodes: list[NodeRecord], idle: list[NodeRecord]) -> list[list[NodeRecord]]:
    """The idle nodes of a partly busy block, by slice: a slice goes only when every node of it in the
    block is idle (a gang's nodes were bought together and come back together)."""
    idle_ids = {n.id for n in idle}
    by_slice: dict[str, list[NodeRecord]] = {}
    for node in nodes:
        by_slice.setdefault(node.slice_id, []).append(node)
    return [part for part in by_slice.values() if all(n.id in idle_ids for n in part)]


def _release_part(
    state: ClusterState,
    config: ControllerConfig,
    block: BlockRecord,
    nodes: list[NodeRecord],
    *,
    whole: bool,
    hostable: _Hostable,
    live_nodes: dict[str, int],
    spares: _Spares,
    now: datetime,
) -> bool:
    """Release ``nodes`` of ``block`` (all of its live nodes when ``whole``) if they have been idle past
    their hold and nothing keeps them; ``True`` when released."""
    idle_s = min((now - n.idle_since).total_seconds() for n in nodes if n.idle_since is not None)
    scale = config.time_scale(block.grant.provider)
    if idle_s < idle_hold(block.grant.provider, restart_s=0.0, arrivals_per_hour=0.0,
                          max_hold_s=config.idle_release_s, market_scale=scale).hold_s:  # fmt: skip
        return False  # within the shortest hold: the forecast cannot release it sooner
    hold = idle_hold(
        block.grant.provider,
        restart_s=restart_s(state, block, nodes, scale),
        arrivals_per_hour=hostable.arrivals_per_hour(nodes[0], len(nodes)),
        max_hold_s=config.idle_release_s,
        market_scale=scale,
    )
    if idle_s < hold.hold_s:
        return False
    waiting = next((job for n in nodes if (job := hostable.queued_fits(n)) is not None), None)
    if waiting is not None:
        return False  # the packer places it on this node next; releasing would buy the node again
    if not spares.may_release(block.group, {n.slice_id for n in nodes}):
        reserve = spares.reserves[block.group]
        if _first_keep_note(state, block.grant.block_id, RESTART_RESERVE_CODE):
            state.note("block", block.grant.block_id, reserve.reason(config.fast_spare_per_services))
        return False
    group = state.groups.get(block.group)
    keep = group.min_slices * group.slice_size if group is not None else 0
    left = live_nodes.get(block.group, 0) - len(nodes)
    if left < keep:
        if _first_keep_note(state, block.grant.block_id, "kept_for_min_slices"):
            minimum = group.min_slices if group is not None else 0
            size = group.slice_size if group is not None else 1
            state.note(
                "block",
                block.grant.block_id,
                Reason(
                    "kept_for_min_slices",
                    f"idle, but releasing it would leave {block.group} {left} nodes, below min_slices "
                    f"{minimum} x slice_size {size}",
                    "nodes",
                    keep,
                    left,
                ),
            )
        return False
    minimum = group.min_slices if group else 0
    if whole:
        reason = Reason(
            "idle",
            f"block {block.grant.block_id} ({len(nodes)} nodes of {block.group}) has been idle for {idle_s:g} s "
            f"(threshold {hold.hold_s:g} s); {left} nodes stay in the group (min_slices {minimum}). "
            f"The threshold: {hold.reason.message}",
            "idle_s",
            hold.hold_s,
            idle_s,
        )
        if sell_instead_of_release(state, config, block, now, reason):
            return False  # paid whole: its time is sold back (credited) rather than dropped
        release_block(state, block, "idle", reason)
        return True
    busy = sum(1 for n in block.node_ids if n in state.nodes and state.nodes[n].live) - len(nodes)
    names = ", ".join(n.id for n in nodes)
    reason = Reason(
        "idle_nodes",
        f"{len(nodes)} node{'s' if len(nodes) > 1 else ''} of block {block.grant.block_id} ({names}, "
        f"{block.group}) idle for {idle_s:g} s (threshold {hold.hold_s:g} s) while {busy} other "
        f"{'node of it holds' if busy == 1 else 'nodes of it hold'} work: {block.grant.provider} bills each "
        f"node while it runs, so {'they stop' if len(nodes) > 1 else 'it stops'} alone; {left} "
        f"node{'' if left == 1 else 's'} stay in the group (min_slices {minimum}). The threshold: "
        f"{hold.reason.message}",
        "idle_s",
        hold.hold_s,
        idle_s,
    )
    release_nodes(state, block, nodes, "idle", reason)
    return True


def _first_keep_note(state: ClusterState, block_id: str, code: str) -> bool:
    """Tell a block's story of being kept (for min_slices, for the restart reserve) once, not every step."""
    for index in reversed(state.story_index.get(block_id, [])):
        entry = state.story[index]
        return entry.reason.code != code
    return True


class _Spares:
    """The restart reserves (engine/reserve.py), read once a step when an idle slice may go: a free slice of
    a group goes only while the group keeps the free slices it wants without it."""

    def __init__(self, state: ClusterState, config: ControllerConfig, now: datetime) -> None:
        self._args = (state, config, now)
        self._reserves: dict[str, Reserve] | None = None
        self._left: dict[str, int] = {}

    @property
    def reserves(self) -> dict[str, Reserve]:
        if self._reserves is None:
            state, config, now = self._args
            self._reserves = restart_reserves(state, config.fast_spare_per_services, now)
            self._left = {g: r.free - r.wanted for g, r in self._reserves.items()}
        return self._reserves

    def may_release(self, group: str, slice_ids: set[str]) -> bool:
        if group not in self.reserves:
            return True
        if self._left[group] < len(slice_ids):
            return False
        self._left[group] -= len(slice_ids)
        return True
