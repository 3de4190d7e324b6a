"""Agent-backed nodes: user-owned hosts, agents of bought nodes, attempts and their fencing.

- ``HostRegistered``: a user-owned host becomes a fixed-capacity block of one READY, agent-backed node
  (at the join token's price per GPU-hour, 0 by default; never released for idleness; ends at the host's
  contract expiry when it has one).
- ``AgentRegistered``: the agent of a node Scalar bought registered; the node is agent-backed and READY.
- ``AssignmentReported``: an agent's report about one attempt of a job. The attempt is the job's
  ``preemptions + 1`` when it was placed; a report about another attempt is fenced (ignored, told in the
  story), so a node that comes back after it was LOST cannot finish or fail a job that runs elsewhere now.
- ``HostRemoveRequested``: an admin removes a user-owned host: it drains (nothing new is placed there); with
  ``force`` its jobs are requeued as when it is LOST (same attempt count and fencing); once it runs nothing
  its block is released (``end_removed_hosts``, each step), which stops its cost and drains its agent.
- A node that missed its heartbeat lease is reported SUSPECT, then LOST (the runtime decides when, from its
  lease table, and reports the move). LOST requeues the node's jobs with ``attempt + 1`` up to
  ``max_job_attempts``; a job past the limit fails with the reason.

Pure and deterministic like the rest of the engine: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from scalar.domain.errors import DomainError
from scalar.domain.gpus import canonical_gpu_model
from scalar.domain.market import BlockGrant, NodeState
from scalar.domain.money import usd_text
from scalar.domain.packing_model import Block, Node
from scalar.domain.reasons import Reason
from scalar.domain.tier import Tier
from scalar.domain.timefmt import exact_seconds
from scalar.engine.config import ControllerConfig
from scalar.engine.events import AgentRegistered, AssignmentReported, HostRegistered, HostRemoveRequested
from scalar.engine.groups import Eligibility, base_of, group_name
from scalar.engine.lifecycle import JobState, is_legal
from scalar.engine.state import BlockRecord, ClusterState, JobRecord, NodeRecord, SliceRecord
from scalar.engine.transitions import finish, preempt, refresh_slice, release_block

# A host without a contract end is held for this long (it is the user's own machine).
OPEN_ENDED = timedelta(days=3650)
_HOUR = Decimal(3600)
NEEDS_AGENT_NODE = "needs_agent_node"


def attempt_of(rec: JobRecord) -> int:
    """The job's current attempt, 1 for its first run; each requeue adds one."""
    return rec.preemptions + 1


def runs_command(rec: JobRecord) -> bool:
    return bool(rec.spec.command)


def on_host_registered(state: ClusterState, event: HostRegistered) -> None:
    node_id = event.node_id
    if node_id in state.nodes or event.block_id in state.blocks:
        state.note(
            "node",
            node_id,
            Reason("duplicate_registration", f"host {node_id} is already registered; ignored"),
        )
        return
    try:
        price = event.price_per_gpu_hour
        if not price.is_finite() or price < 0:
            raise ValueError(f"price_per_gpu_hour {price} is not a finite amount >= 0")
        tier = Tier.parse(event.tier)
        end = event.end_time if event.end_time is not None else state.at + OPEN_ENDED
        if end.tzinfo is None:
            raise ValueError(f"end_time {end.isoformat()} has no time zone")
        block = Block(
            id=event.block_id,
            provider=event.provider,
            instance_type=event.instance_type,
            gpus_per_node=event.gpu_count,
            vram_per_gpu_gb=event.vram_per_gpu_gb,
            cpu_per_node=event.cpu_cores,
            ram_per_node_gb=event.ram_gb,
            start_time=state.at,
            end_time=max(end, state.at),
            cost_per_hour=price * event.gpu_count,
            tier=tier,
            gpu_model=canonical_gpu_model(event.gpu_model, event.vram_per_gpu_gb)
            if event.gpu_model
            else None,
            cuda_version=event.cuda_version,
            driver_version=event.driver_version,
        )
        node = Node.empty(node_id, block)
    except (DomainError, ValueError, TypeError) as err:
        message = err.message if isinstance(err, DomainError) else str(err)
        state.note("node", node_id, Reason("bad_registration", f"host {node_id} refused: {message}"))
        return
    group = group_name(event.provider, event.instance_type, False, tier)
    grant = BlockGrant(
        block_id=event.block_id,
        provider=event.provider,
        instance_type=event.instance_type,
        gpu_model=event.gpu_model,
        gpus_per_node=event.gpu_count,
        vram_per_gpu_gb=event.vram_per_gpu_gb,
        cpu_per_node=event.cpu_cores,
        ram_per_node_gb=event.ram_gb,
        start_time=block.start_time,
        end_time=block.end_time,
        price_per_gpu_hour=price,
        node_ids=(node_id,),
        cuda_version=event.cuda_version,
        driver_version=event.driver_version,
    )
    # committed: the contract's full value; an open-ended host has no contract to commit to
    hours = exact_seconds(block.end_time - block.start_time) / _HOUR if event.end_time is not None else 0
    committed = price * event.gpu_count * hours
    state.blocks[event.block_id] = BlockRecord(
        grant, block, group, None, (node_id,), state.at, committed, fixed=True
    )
    reason = Reason(
        "host_registered",
        f"user-owned host {node_id} registered its agent: {event.gpu_count}x {event.gpu_model or 'GPU'} "
        f"{event.vram_per_gpu_gb:g} GB, {event.cpu_cores:g} CPU, {event.ram_gb:g} GB RAM"
        f"{f', CUDA {event.cuda_version}' if event.cuda_version else ''} as fixed block "
        f"{event.block_id} ({event.provider}) at {usd_text(price)}/GPU-h until {block.end_time.isoformat()}",
    )
    sl = SliceRecord(state.next_id("slice"), group, None, 1, None, state.at)
    sl.node_ids.append(node_id)
    record = NodeRecord(
        node=node,
        state=NodeState.BOOTING,
        group=group,
        slice_id=sl.id,
        block_id=event.block_id,
        created_at=state.at,
        state_at=state.at,
        agent=True,
    )
    state.create_node(record, reason)
    state.add_slice(sl, NodeState.BOOTING, reason)
    ready = Reason("agent_registered", f"the agent of {node_id} runs: the host is READY")
    state.move_node(record, NodeState.READY, ready)
    state.move_slice(sl, NodeState.READY, ready)
    state.schedule_dirty = True


def on_agent_registered(state: ClusterState, event: AgentRegistered) -> None:
    node = state.nodes.get(event.node_id)
    if node is None:
        state.note(
            "node", event.node_id, Reason("unknown_node", f"agent of unknown node {event.node_id}; ignored")
        )
        return
    node.agent = True
    state.schedule_dirty = True
    reason = Reason("agent_registered", f"the agent of node {node.id} registered")
    if node.state is NodeState.READY or not is_legal("node", node.state, NodeState.READY):
        state.note("node", node.id, reason)
        return
    state.move_node(node, NodeState.READY, reason)
    refresh_slice(state, node.slice_id)


def hold_for_agent(config: ControllerConfig, node: NodeRecord, target: NodeState) -> NodeState:
    """A bought node of an agent provider is READY only once its agent registered: hold it INITIALIZING."""
    if target is NodeState.READY and not node.agent and node.node.block.provider in config.agent_providers:
        return NodeState.INITIALIZING
    return target


def on_assignment_reported(state: ClusterState, event: AssignmentReported) -> None:
    rec = state.jobs.get(event.job_id)
    node_id = event.node_id
    if rec is None or rec.state is None:
        state.note(
            "job", event.job_id, Reason("unknown_job", f"report for unknown job {event.job_id}; ignored")
        )
        return
    current = attempt_of(rec)
    if event.attempt != current or node_id not in rec.parts:
        where = "" if node_id in rec.parts else f", and it is not on {node_id} now"
        state.note(
            "job",
            event.job_id,
            Reason(
                "stale_attempt",
                f"node {node_id} reported attempt {event.attempt} of job {event.job_id} {event.outcome}; the "
                f"current attempt is {current}{where}: fenced, ignored",
                "attempt",
                current,
                event.attempt,
            ),
        )
        return
    if event.outcome == "running":
        if rec.state is JobState.SCHEDULED:
            state.move_job(rec, JobState.RUNNING, Reason("running", f"job {event.job_id} runs on {node_id}"))
            rec.started_at = state.at
        return
    if event.outcome == "succeeded":
        finish(
            state,
            rec,
            JobState.SUCCEEDED,
            Reason("succeeded", f"job {event.job_id} exited 0 on {node_id} (attempt {current})"),
            node_id,
        )
        return
    why = event.reason or "no reason given"
    finish(
        state,
        rec,
        JobState.FAILED,
        Reason("failed", f"job {event.job_id} failed on {node_id} (attempt {current}): {why}"),
        node_id,
    )


def requeue_lost(state: ClusterState, config: ControllerConfig, node: NodeRecord, reason: Reason) -> None:
    """The node is LOST: its jobs go back to PENDING (attempt + 1), or fail past ``max_job_attempts``."""
    for job_id in list(node.jobs):
        rec = state.jobs[job_id]
        attempt = attempt_of(rec)
        if attempt >= config.max_job_attempts:
            finish(
                state,
                rec,
                JobState.FAILED,
                Reason(
                    "attempts_exhausted",
                    f"job {job_id} failed: attempt {attempt} of {config.max_job_attempts} was lost with node "
                    f"{node.id} ({reason.message}); no attempt is left (max_job_attempts)",
                    "attempts",
                    config.max_job_attempts,
                    attempt,
                ),
                node.id,
            )
            continue
        preempt(
            state,
            rec,
            Reason(
                "node_lost",
                f"node {node.id} lost: {reason.message}; attempt {attempt + 1} of {config.max_job_attempts} "
                "will run elsewhere",
                "node",
                have=node.id,
            ),
            node.id,
        )


def on_host_remove_requested(
    state: ClusterState, config: ControllerConfig, event: HostRemoveRequested
) -> None:
    node = state.nodes.get(event.node_id)
    block = state.blocks.get(node.block_id) if node is not None else None
    if node is None or block is None or not block.fixed:
        what = "unknown node" if node is None else "a node Scalar bought (release its block instead)"
        state.note(
            "node", event.node_id, Reason("not_removable", f"removal of {event.node_id}: {what}; ignored")
        )
        return
    if not block.open or not node.live:
        state.note(
            "node", node.id, Reason("already_removed", f"removal of {node.id}: its block has ended already")
        )
        return
    who = f" by {event.actor}" if event.actor else ""
    jobs = len(node.jobs)
    if event.force and jobs:
        then = f"its {jobs} job(s) are requeued"
    elif jobs:
        then = f"its {jobs} job(s) may finish, then its block {block.grant.block_id} ends"
    else:
        then = f"it runs nothing: its block {block.grant.block_id} ends"
    node.draining = True
    reason = Reason(
        "host_removal", f"user-owned host {node.id} removed{who}{' (force)' if event.force else ''}: {then}"
    )
    state.note("node", node.id, reason)
    if event.force and jobs:
        requeue_lost(state, config, node, Reason("host_removed", f"host {node.id} was removed{who} (force)"))
    end_removed_hosts(state)


def end_removed_hosts(state: ClusterState) -> None:
    """Release the block of each user-owned host being removed that runs nothing any more."""
    for node in state.nodes.values():
        if not node.draining or node.jobs or not node.live:
            continue
        block = state.blocks.get(node.block_id)
        if block is None or not block.open:
            continue
        release_block(
            state,
            block,
            "host_removed",
            Reason(
                "host_removed",
                f"user-owned host {node.id} was removed and runs nothing: block {block.grant.block_id} ends",
            ),
        )


def agent_views(state: ClusterState, config: ControllerConfig, where: Eligibility) -> Eligibility:
    """Only groups whose bought nodes run an agent (``agent_providers``) may serve a job with a command."""
    keep: list[str] = []
    dropped: list[tuple[str, Reason]] = []
    for view in where.views:
        group = state.groups.get(base_of(view)[0])
        if group is not None and group.provider in config.agent_providers:
            keep.append(view)
        else:
            provider = group.provider if group is not None else "?"
            dropped.append(
                (
                    view,
                    Reason(
                        NEEDS_AGENT_NODE, f"{view}: {provider} nodes run no Scalar agent (agent_providers)"
                    ),
                )
            )
    return replace(where, views=tuple(keep), passed_over=(*where.passed_over, *dropped))
