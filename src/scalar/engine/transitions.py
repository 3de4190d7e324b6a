"""Moves that touch several records at once: finishing, stopping and preempting jobs, losing nodes,
keeping slices in step with their nodes, and backing a group off.

A preempted job is never lost: it moves PREEMPTED -> PENDING in the same breath, with the reason, and
keeps its place in the queue (priority, then original arrival).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal

from scalar.domain.contracts import known_work_s, run_work_s
from scalar.domain.market import NodeState
from scalar.domain.reasons import Reason
from scalar.domain.release import billing_unit_s
from scalar.domain.timefmt import exact_seconds
from scalar.engine.actions import ReleaseBlock, ReleaseNodes, StopWork
from scalar.engine.config import ControllerConfig
from scalar.engine.lifecycle import NODE_STAGE, JobState, is_legal
from scalar.engine.state import BlockRecord, ClusterState, GroupRecord, JobRecord, NodeRecord

_HOUR = Decimal(3600)


def stop_on(state: ClusterState, rec: JobRecord, node_ids: tuple[str, ...], why: str, reason: Reason) -> None:
    """A ``StopWork`` for each of ``node_ids`` that is still live."""
    for node_id in node_ids:
        node = state.nodes.get(node_id)
        if node is None or not node.live:
            continue
        action = StopWork(state.next_id("act"), reason, rec.spec.job_id, node_id, why)
        state.emit(action, (rec.spec.job_id, node_id))


def finish(
    state: ClusterState, rec: JobRecord, target: JobState, reason: Reason, reporter: str | None
) -> None:
    """The job ended (succeeded, failed or cancelled): free its GPUs, stop it on the other nodes."""
    nodes = state.release(rec)
    state.move_job(rec, target, reason)
    rec.finished_at = state.at
    if target is not JobState.SUCCEEDED:
        why = "cancelled" if target is JobState.CANCELLED else "gang_broken"
        others = tuple(n for n in nodes if n != reporter)
        stop_on(state, rec, others, why, reason)


def preempt(state: ClusterState, rec: JobRecord, reason: Reason, lost_node: str | None) -> None:
    """Take the job off its nodes and queue it again (PREEMPTED -> PENDING). A run that had started is
    remembered by the work it did (``JobRecord.longest_run_s``): the job needs more than that. Once a run
    outlived its estimate, the job is expected to need twice that run (``contracts.known_work_s``): its
    ``expected_duration_sec`` says so from here on, for the packer (a node must outlive it), contract
    sizing and the cost band alike (its spec keeps what the user said)."""
    ran = interrupted_run_work_s(state, rec)
    if ran > rec.longest_run_s:
        rec.longest_run_s = ran
    job = rec.job
    if job is not None:
        known = known_work_s(job.expected_duration_sec, rec.longest_run_s)
        if known > job.expected_duration_sec:
            rec.job = replace(job, expected_duration_sec=known)
    nodes = state.release(rec)
    state.move_job(rec, JobState.PREEMPTED, reason)
    rec.preemptions += 1
    rec.scheduled_at = None
    rec.started_at = None
    state.move_job(
        rec,
        JobState.PENDING,
        Reason(
            "requeued",
            f"job {rec.spec.job_id} queued again after preemption {rec.preemptions}: {reason.message}",
            "preemptions",
            have=rec.preemptions,
        ),
    )
    others = tuple(n for n in nodes if n != lost_node)
    stop_on(state, rec, others, "gang_broken", reason)


def interrupted_run_work_s(state: ClusterState, rec: JobRecord) -> float:
    """Work units (reference seconds) the job's current run has done: its time since it started at the
    work rate of the slowest of its nodes' GPUs (a gang moves at its slowest member); 0 before it started."""
    job = rec.job
    if rec.started_at is None or job is None:
        return 0.0
    ran = (state.at - rec.started_at).total_seconds()
    models = [state.nodes[n].node.block.gpu_model for n in rec.parts if n in state.nodes]
    if not models:
        return 0.0
    return min(run_work_s(ran, m, job.tier) for m in models)


def lose_node(
    state: ClusterState, node: NodeRecord, target: NodeState, reason: Reason, interrupted: bool = False
) -> None:
    """Move a node to FAILED or TERMINATED and preempt every job on it. ``interrupted``: the seller
    preempted it (counted in its spot group's history, ``ClusterState.node_stopped``)."""
    if not is_legal("node", node.state, target):
        return
    if node.live:
        state.node_stopped(node, interrupted)
    state.move_node(node, target, reason)
    for job_id in list(node.jobs):
        job = state.jobs[job_id]
        preempt(
            state,
            job,
            Reason(
                "preempted",
                f"node {node.id} {target.value}: {reason.message}",
                "node",
                have=node.id,
            ),
            node.id,
        )
    refresh_slice(state, node.slice_id)
    if target is NodeState.FAILED:
        stop_failed_node(state, node, reason)


def stop_failed_node(state: ClusterState, node: NodeRecord, reason: Reason) -> None:
    """A failed node of an open block whose seller bills running time, while other nodes of the block live
    on: ask the seller to stop it, so it is not paid for (the accounting stops counting it now,
    ``engine/costs.py`` ``paid_node``). A block with no live node left is released whole
    (``release_dead_blocks``); a block paid whole is paid for anyway."""
    block = state.blocks.get(node.block_id)
    if block is None or not block.open or block.fixed or billing_unit_s(block.grant.provider) is None:
        return
    if not any(state.nodes[n].live for n in block.node_ids if n in state.nodes):
        return
    why = Reason(
        "node_failed",
        f"node {node.id} of block {block.grant.block_id} failed ({reason.message}); {block.grant.provider} "
        f"bills each node while it runs, so it is stopped while the block's other nodes work",
        "node",
        have=node.id,
    )
    action = ReleaseNodes(
        state.next_id("act"), why, block.grant.block_id, block.grant.provider, (node.id,), "node_failed"
    )
    state.emit(action, (block.grant.block_id, block.group, node.id))


def refresh_slice(state: ClusterState, slice_id: str) -> None:
    """A slice's state follows its nodes: all terminated -> TERMINATED; any failed or terminated ->
    FAILED; otherwise the least advanced node's state."""
    sl = state.slices.get(slice_id)
    if sl is None or not sl.node_ids:
        return
    states = [state.nodes[n].state for n in sl.node_ids]
    if all(s is NodeState.TERMINATED for s in states):
        target = NodeState.TERMINATED
    elif any(s in (NodeState.FAILED, NodeState.TERMINATED) for s in states):
        target = NodeState.FAILED
    else:
        target = min(states, key=lambda s: NODE_STAGE[s])
    if target is not sl.state and is_legal("slice", sl.state, target):
        counts = ", ".join(f"{n} {state.nodes[n].state.value}" for n in sl.node_ids)
        state.move_slice(sl, target, Reason(f"slice_{target.value}", f"nodes: {counts}"))


def back_off(state: ClusterState, config: ControllerConfig, group: GroupRecord, reason: Reason) -> None:
    """The group launches nothing new for ``backoff_s`` (availability ``backoff`` for routing)."""
    group.failures += 1
    until = state.at + timedelta(seconds=config.backoff_s)
    if group.backoff_until is None or until > group.backoff_until:
        group.backoff_until = until
    group.backoff_reason = reason
    state.note(
        "group",
        group.name,
        Reason(
            "backoff",
            f"{group.name} backs off until {group.backoff_until.isoformat()} ({config.backoff_s:g} s): {reason.message}",
            "failures",
            have=group.failures,
        ),
    )


def release_block(state: ClusterState, block: BlockRecord, why: str, reason: Reason) -> None:
    """End a contract early: a ``ReleaseBlock``, then its nodes TERMINATED (nothing runs on them)."""
    if billing_unit_s(block.grant.provider) is None:
        _pay_the_rest(state, block)
    block.released_at = state.at
    action = ReleaseBlock(state.next_id("act"), reason, block.grant.block_id, block.grant.provider, why)
    state.emit(action, (block.grant.block_id, block.group))
    for node_id in block.node_ids:
        node = state.nodes.get(node_id)
        if node is not None and node.live:
            lose_node(state, node, NodeState.TERMINATED, reason)


def _pay_the_rest(state: ClusterState, block: BlockRecord) -> None:
    """A contract paid whole costs its commitment however early it ends: the time each node had left (to
    its cut where a sale took its tail, engine/resale.py) is paid at the release, as idle GPU-time, so the
    block's spend is what was committed less what resale brought back (issue 16, "costs that add up")."""
    now = state.at
    gpus = block.block.gpus_per_node
    for node_id in block.node_ids:
        node = state.nodes.get(node_id)
        end = block.block.end_time if node is None else min(block.block.end_time, node.node.block.end_time)
        if end > now:
            dt = exact_seconds(end - now)
            block.paid_gpu_s += gpus * dt
            block.accrued += block.grant.price_per_gpu_hour * gpus * dt / _HOUR


def release_nodes(
    state: ClusterState, block: BlockRecord, nodes: list[NodeRecord], why: str, reason: Reason
) -> None:
    """Stop paying for some nodes of a block whose seller bills running time: a ``ReleaseNodes``, then
    those nodes TERMINATED (nothing runs on them); the block stays open with the others."""
    ids = tuple(n.id for n in nodes if n.live)
    if not ids:
        return
    action = ReleaseNodes(state.next_id("act"), reason, block.grant.block_id, block.grant.provider, ids, why)
    state.emit(action, (block.grant.block_id, block.group, *ids))
    for node in nodes:
        if node.live:
            lose_node(state, node, NodeState.TERMINATED, reason)


def older_than(since: datetime | None, now: datetime, limit_s: float) -> bool:
    return since is not None and (now - since).total_seconds() >= limit_s
