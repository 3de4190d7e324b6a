"""The autoscaling pass's consolidation step: the state's contracts and jobs into ``plan_moves``'s values,
and its moves back into the state (docs/decisions/procurement.md, "Consolidation").

``consolidation_step`` reads the state and returns the decisions (pure); ``apply_moves`` is called from the
pass's one place of writing (``autoscaler._apply``): each moved job is stopped on its old node
(``StopWork``), queued again with the move as its reason (its attempt counts up, so a late report from the
old node is fenced) and booked on its new GPUs at once (``StartWork``), so no other job takes them and the
emptied contract goes idle and is released by ``release_idle``.
"""

from __future__ import annotations

import math
from datetime import datetime
from decimal import Decimal

from scalar.domain.consolidation import (
    MOVE,
    ConsolidationDecision,
    Contract,
    HeldJob,
    plan_moves,
)
from scalar.domain.errors import DomainError
from scalar.domain.market import NodeState
from scalar.domain.packing_model import Node
from scalar.domain.reasons import Reason
from scalar.domain.release import billing_unit_s
from scalar.engine.actions import StartWork, WorkPlacement
from scalar.engine.config import ControllerConfig
from scalar.engine.lifecycle import JobState
from scalar.engine.scheduler import reservations
from scalar.engine.state import ClusterState, PlacementSummary
from scalar.engine.transitions import preempt

RECENT_DECISIONS = 50


def consolidation_step(
    state: ClusterState, config: ControllerConfig, now: datetime
) -> tuple[ConsolidationDecision, ...]:
    """Which underused contracts restartable jobs leave now (``domain.consolidation.plan_moves``)."""
    policy = config.consolidation
    if not policy.enabled or not state.restartable_held:
        return ()  # nothing could move: the pass costs nothing without a restartable job holding GPUs
    nodes: dict[str, Node] = {}
    contracts: list[Contract] = []
    for block in state.blocks.values():
        if not block.open:
            continue
        live = [state.nodes[n] for n in block.node_ids if n in state.nodes and state.nodes[n].live]
        ready = [n for n in live if n.state is NodeState.READY and not n.draining]
        if not ready:
            continue
        for n in ready:
            nodes[n.id] = n.node
        group = state.groups.get(block.group)
        sunk = block.fixed or billing_unit_s(block.grant.provider) is None
        whole = len(ready) == len(live)
        keep = group is not None and group.min_slices > 0
        recovery = Decimal(0) if sunk or keep or not whole else Decimal(1)
        contracts.append(
            Contract(
                block.grant.block_id,
                tuple(n.id for n in ready),
                block.grant.price_per_gpu_hour,
                block.block.end_time,
                recovery,
                sunk,
                agent=any(n.agent for n in ready),
            )
        )
    if not any(c.recovery > 0 for c in contracts):
        return ()
    for node_id in reservations(state, config, now, list(nodes)):
        del nodes[node_id]  # held for the jobs its purchase serves: neither emptied nor filled
    held: list[HeldJob] = []
    seen: set[str] = set()
    for node_id in nodes:
        for job_id in state.nodes[node_id].jobs:
            rec = state.jobs.get(job_id)
            if job_id in seen or rec is None or rec.job is None:
                continue
            seen.add(job_id)
            since = rec.started_at or rec.scheduled_at or now
            part = rec.parts.get(node_id, rec.job)
            held.append(
                HeldJob(
                    part,
                    tuple(rec.parts),
                    max(0.0, (now - since).total_seconds()),
                    agent=bool(rec.spec.command),
                )
            )
    return plan_moves(contracts, nodes, held, now, policy, safety_margin_s=config.safety_margin_s)


def apply_moves(state: ClusterState, decisions: tuple[ConsolidationDecision, ...], now: datetime) -> None:
    """Carry out the emptied contracts' moves and keep every decision for ``/autoscaler/status``."""
    state.consolidation_kept = tuple(d for d in decisions if not d.emptied)
    for decision in decisions:
        if not decision.emptied:
            continue
        state.consolidations.append((now, decision))
        state.note("block", decision.block_id, decision.reason)
        for move in decision.moves:
            rec = state.jobs[move.job_id]
            part = rec.parts.get(move.from_node)
            if part is None or rec.state not in (JobState.RUNNING, JobState.SCHEDULED):
                continue
            why = Reason(
                MOVE,
                f"moved from {move.from_node} to {move.to_node} (restartable; {move.lost_s:.0f} s of progress "
                f"lost): {decision.reason.message}",
                "node",
                have=move.to_node,
            )
            preempt(state, rec, why, None)
            try:
                state.book(rec, move.to_node, part, move.gpu_indices)
            except DomainError as err:  # never expected (planned on this state): it waits to be placed again
                state.release(rec)
                state.note("job", rec.spec.job_id, Reason("booking_refused", f"move refused: {err.message}"))
                continue
            state.move_job(rec, JobState.SCHEDULED, why)
            rec.scheduled_at = now
            rec.placement = PlacementSummary("EXISTING_NODE", why.message, (move.to_node,), (), now)
            action = StartWork(
                action_id=state.next_id("act"),
                reason=why,
                job_id=rec.spec.job_id,
                placements=(WorkPlacement(move.to_node, move.gpu_indices),),
                expected_duration_s=math.ceil(part.expected_duration_sec),
            )
            state.emit(action, (rec.spec.job_id, move.to_node))
