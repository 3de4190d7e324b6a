"""What happens to one node, decided when it is granted: boot milestones, boot failure, preemption, end.

``plan_node`` draws the node's whole future from the seed and its id (so it does not matter who asks, or
when); ``due_moves`` says which of those moves have happened by a given time. All times are market
microseconds since the epoch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalar.domain.market import CAUSE_PREEMPTED, NodeState
from scalar.providers.builtin.clock import US_PER_HOUR, scaled_us
from scalar.providers.builtin.config import HOURS_PER_MONTH, BootProfile, hazard_per_hour
from scalar.providers.builtin.draws import rng_for

BOOT_ORDER = (NodeState.REQUESTING, NodeState.BOOTING, NodeState.INITIALIZING, NodeState.READY)
FINAL_STATES = frozenset({NodeState.FAILED, NodeState.TERMINATED})

# Why a node stopped (``NodeEvent.details["cause"]``).
CAUSE_BOOT_FAILED = "boot_failed"
CAUSE_CONTRACT_ENDED = "contract_ended"
CAUSE_RELEASED = "released"


@dataclass(frozen=True, slots=True)
class NodePlan:
    """A node's future: milestone times, whether its boot fails (and why), when it is preempted."""

    booting_us: int
    initializing_us: int
    ready_us: int
    fail_cause: str | None
    preempt_us: int | None
    end_us: int

    @property
    def stop_us(self) -> int:
        """When the node stops running: preempted or the contract's end, whichever comes first."""
        return self.end_us if self.preempt_us is None else min(self.preempt_us, self.end_us)


def plan_node(
    *,
    seed: int,
    node_id: str,
    start_us: int,
    end_us: int,
    profile: BootProfile,
    time_scale: float,
    boot_failure_rate: float,
    forced_failure: bool,
    monthly_interruption_rate: float | None,
    interruption_period_hours: float = HOURS_PER_MONTH,
    preemption_scale: float = 1.0,
) -> NodePlan:
    """Draw the node's boot stages (uniform in each stage's range), its boot failure and its preemption.

    Preemption: spot nodes face a constant hazard ``h = scale * -ln(1 - p) / T`` per hour from the contract
    start (``p`` the rate, ``T`` the hours it refers to: 730 for the Spot Advisor's monthly bands), so the time to preemption is exponential (inverse-CDF draw); it is divided by the time scale
    like every other market duration.
    """
    rng = rng_for(seed, "boot", node_id)
    stages = [rng.uniform(low, high) for low, high in profile]
    booting = start_us + scaled_us(stages[0], time_scale)
    initializing = booting + scaled_us(stages[1], time_scale)
    ready = initializing + scaled_us(stages[2], time_scale)
    fail_cause = None
    if forced_failure:
        fail_cause = "injected (fail_next_boot)"
    elif boot_failure_rate > 0 and rng_for(seed, "boot-failure", node_id).random() < boot_failure_rate:
        fail_cause = f"boot_failure_rate {boot_failure_rate:g}"
    preempt = None
    if monthly_interruption_rate is not None:
        hazard = hazard_per_hour(monthly_interruption_rate, interruption_period_hours, preemption_scale)
        if hazard > 0:
            u = rng_for(seed, "preempt", node_id).random()
            hours = -math.log1p(-u) / hazard
            offset = hours * US_PER_HOUR / time_scale
            if start_us + offset < end_us:
                preempt = start_us + max(1, round(offset))
    return NodePlan(booting, initializing, ready, fail_cause, preempt, end_us)


@dataclass(frozen=True, slots=True)
class Move:
    """One lifecycle move of a node at ``at_us``; ``cause`` set for FAILED and TERMINATED."""

    state: NodeState
    at_us: int
    cause: str | None = None


def due_moves(state: NodeState, plan: NodePlan, until_us: int) -> tuple[Move, ...]:
    """The moves after ``state`` that happen at or before ``until_us``, in order.

    A boot milestone at or after the node's stop time never happens: the node stops first. A failing
    boot ends in FAILED at the time it would have become READY.
    """
    if state in FINAL_STATES:
        return ()
    moves: list[Move] = []
    stop = plan.stop_us
    position = BOOT_ORDER.index(state)
    milestones = (
        (NodeState.BOOTING, plan.booting_us),
        (NodeState.INITIALIZING, plan.initializing_us),
        (NodeState.READY, plan.ready_us),
    )
    for target, at in milestones[position:]:
        if at >= stop or at > until_us:
            break
        if target is NodeState.READY and plan.fail_cause is not None:
            moves.append(Move(NodeState.FAILED, at, CAUSE_BOOT_FAILED))
            return tuple(moves)
        moves.append(Move(target, at))
    if stop <= until_us:
        preempted = plan.preempt_us is not None and plan.preempt_us < plan.end_us
        moves.append(Move(NodeState.TERMINATED, stop, CAUSE_PREEMPTED if preempted else CAUSE_CONTRACT_ENDED))
    return tuple(moves)


def next_move_us(state: NodeState, plan: NodePlan) -> int | None:
    """When the node's next move happens (``None`` for a node in a final state)."""
    if state in FINAL_STATES:
        return None
    position = BOOT_ORDER.index(state)
    times = (plan.booting_us, plan.initializing_us, plan.ready_us)
    if position < len(times):
        upcoming = times[position]
        if upcoming < plan.stop_us:
            return upcoming
    return plan.stop_us
