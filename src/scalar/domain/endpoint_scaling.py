"""Serverless endpoint workers and requests (seed 004): lifecycles, the cold start and service-time models,
and the scaler, a pure function from what the endpoint sees now to how many workers it should have and why.

Workers are jobs of the control plane; this module knows nothing of jobs. The runtime
(``scalar.runtime.endpoints``) feeds the scaler its numbers and applies the decision.

Scaling rules (``decide_scale``), in order; the first that applies decides:

1. ``workersMax`` lowered below the active workers: stop idle workers down to it.
2. Fewer active workers than ``workersMin``: start the missing ones.
3. Requests queued and no worker at all (scale from zero): start one (QUEUE_DELAY) or the REQUEST_COUNT
   target, whatever the delay.
4. QUEUE_DELAY: the oldest queued request has waited more than ``scalerValue`` s and the starting workers
   cannot absorb the queue: start one worker per queued request not covered by a starting worker.
   REQUEST_COUNT: target = ceil((queued + in progress) / ``scalerValue``): start up to it.
5. Scale down: idle workers idle for at least ``idleTimeout`` s are stopped, longest idle first, down to
   the target (never below ``workersMin``; to zero when ``workersMin`` is 0).
6. Otherwise hold.

Every result is clamped to ``workersMin``..``workersMax`` and carries its ``Reason``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from scalar.domain.endpoints import ServerlessEndpoint, ServerlessScalerType
from scalar.domain.gpus import Architecture, GpuGroup
from scalar.domain.reasons import Reason


class WorkerState(StrEnum):
    """A worker's lifecycle. ``PENDING``: its job waits for GPUs; ``INITIALIZING``: the job runs, the worker
    loads (cold start); ``IDLE``/``BUSY``: serving; ``STOPPING``: scale-down cancelled its job;
    ``STOPPED``: gone on purpose; ``LOST``: its job ended without being asked (node lost, preempted)."""

    PENDING = "pending"
    INITIALIZING = "initializing"
    IDLE = "idle"
    BUSY = "busy"
    STOPPING = "stopping"
    STOPPED = "stopped"
    LOST = "lost"

    @property
    def active(self) -> bool:
        return self in (WorkerState.PENDING, WorkerState.INITIALIZING, WorkerState.IDLE, WorkerState.BUSY)


WORKER_TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    WorkerState.PENDING: frozenset({WorkerState.INITIALIZING, WorkerState.STOPPING, WorkerState.LOST}),
    WorkerState.INITIALIZING: frozenset({WorkerState.IDLE, WorkerState.STOPPING, WorkerState.LOST}),
    WorkerState.IDLE: frozenset({WorkerState.BUSY, WorkerState.STOPPING, WorkerState.LOST}),
    WorkerState.BUSY: frozenset({WorkerState.IDLE, WorkerState.STOPPING, WorkerState.LOST}),
    WorkerState.STOPPING: frozenset({WorkerState.STOPPED}),
    WorkerState.STOPPED: frozenset(),
    WorkerState.LOST: frozenset(),
}


class IllegalTransitionError(ValueError):
    pass


def check_worker_move(old: WorkerState, new: WorkerState) -> None:
    """Raise ``IllegalTransitionError`` unless ``old -> new`` is in :data:`WORKER_TRANSITIONS`."""
    if new is not old and new not in WORKER_TRANSITIONS[old]:
        raise IllegalTransitionError(f"a worker cannot move from {old.value} to {new.value}")


class RequestStatus(StrEnum):
    """RunPod's request statuses."""

    IN_QUEUE = "IN_QUEUE"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMED_OUT = "TIMED_OUT"

    @property
    def terminal(self) -> bool:
        return self not in (RequestStatus.IN_QUEUE, RequestStatus.IN_PROGRESS)


# ---------------------------------------------------------------------------------------------- models

# Relative serving speed per architecture (Ampere = 1): roughly the generations' inference throughput.
ARCHITECTURE_SPEED: dict[Architecture, float] = {
    Architecture.AMPERE: 1.0,
    Architecture.ADA: 1.4,
    Architecture.HOPPER: 2.2,
    Architecture.BLACKWELL: 2.8,
}
COLD_START_BASE_S = 4.0
"""Container start and handler import, before any weights load."""
COLD_START_S_PER_GB = 0.1
"""Loading weights sized to the group's memory: a worker on a bigger GPU loads a bigger model."""
DEFAULT_WORK_S = 1.0
"""One request's work on an Ampere GPU, when the request does not say."""


def cold_start_s(group: GpuGroup) -> float:
    """Seconds from the worker's job running to the worker serving: base start plus weight loading."""
    return round(COLD_START_BASE_S + COLD_START_S_PER_GB * group.memory_gb, 3)


def group_speed(group: GpuGroup) -> float:
    return ARCHITECTURE_SPEED.get(group.architecture, 1.0)


def service_time_s(group: GpuGroup, rng: random.Random, work_s: float = DEFAULT_WORK_S) -> float:
    """One request's service time on ``group``: ``work_s`` scaled by the group's speed, with lognormal
    noise (sigma 0.25, mean 1) drawn from the seeded ``rng``."""
    sigma = 0.25
    noise = rng.lognormvariate(-sigma * sigma / 2, sigma)
    return max(0.001, work_s / group_speed(group) * noise)


# ---------------------------------------------------------------------------------------------- scaler


@dataclass(frozen=True, slots=True)
class WorkerView:
    """What the scaler needs of one active worker. ``idle_for_s`` only for an IDLE worker."""

    worker_id: str
    state: WorkerState
    idle_for_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ScalingInput:
    queued: int
    in_progress: int
    oldest_queued_wait_s: float | None
    workers: tuple[WorkerView, ...]


class ScaleAction(StrEnum):
    UP = "up"
    DOWN = "down"
    HOLD = "hold"


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    action: ScaleAction
    workers_before: int
    target: int
    start: int
    stop: tuple[str, ...]
    reason: Reason


def _decision(before: int, target: int, start: int, stop: Sequence[str], reason: Reason) -> ScaleDecision:
    if start > 0:
        action = ScaleAction.UP
    elif stop:
        action = ScaleAction.DOWN
    else:
        action = ScaleAction.HOLD
    return ScaleDecision(action, before, target, start, tuple(stop), reason)


def _idle_longest_first(workers: Sequence[WorkerView], min_idle_s: float | None) -> list[WorkerView]:
    idle = [w for w in workers if w.state is WorkerState.IDLE]
    if min_idle_s is not None:
        idle = [w for w in idle if w.idle_for_s >= min_idle_s]
    return sorted(idle, key=lambda w: (-w.idle_for_s, w.worker_id))


def request_count_target(spec: ServerlessEndpoint, in_flight: int) -> int:
    return math.ceil(in_flight / spec.scaler_value) if in_flight > 0 else 0


def decide_scale(spec: ServerlessEndpoint, seen: ScalingInput) -> ScaleDecision:
    """How many workers ``spec`` should have now and why (see the module's docstring for the rules)."""
    workers = [w for w in seen.workers if w.state.active]
    active = len(workers)
    lo, hi = spec.workers_min, spec.workers_max
    starting = sum(1 for w in workers if w.state in (WorkerState.PENDING, WorkerState.INITIALIZING))
    in_flight = seen.queued + seen.in_progress
    counts = {"queued": seen.queued, "in_progress": seen.in_progress, "starting": starting}

    if active > hi:
        idle = _idle_longest_first(workers, None)
        stop = [w.worker_id for w in idle[: active - hi]]
        reason = Reason(
            "above_workers_max",
            f"{active} workers are more than workersMax {hi}: stopping {len(stop)} idle worker(s)"
            + ("" if len(stop) == active - hi else "; the busy ones stop when they finish"),
            "workers",
            have=active,
            limit=hi,
        )
        return _decision(active, hi, 0, stop, reason)
    if active < lo:
        reason = Reason(
            "below_workers_min",
            f"{active} workers are fewer than workersMin {lo}: starting {lo - active}",
            "workers",
            need=lo,
            have=active,
        )
        return _decision(active, lo, lo - active, (), reason)

    if spec.scaler_type is ServerlessScalerType.REQUEST_COUNT:
        wanted = min(hi, max(lo, request_count_target(spec, in_flight)))
        if wanted > active:
            reason = Reason(
                "request_count",
                f"{in_flight} requests in flight ({seen.queued} queued, {seen.in_progress} running) at "
                f"{spec.scaler_value} per worker need {request_count_target(spec, in_flight)} workers"
                + (f" (capped at workersMax {hi})" if request_count_target(spec, in_flight) > hi else "")
                + f"; have {active}: starting {wanted - active}",
                "workers",
                need=wanted,
                have=active,
                limit=hi,
            )
            return _decision(active, wanted, wanted - active, (), reason)
        down_to = wanted
    else:
        if seen.queued > 0 and active == 0 and hi > 0:
            reason = Reason(
                "scale_from_zero",
                f"{seen.queued} request(s) queued and no worker: starting 1",
                "workers",
                need=1,
                have=0,
            )
            return _decision(0, 1, 1, (), reason)
        wait = seen.oldest_queued_wait_s
        if wait is not None and wait > spec.scaler_value and seen.queued > starting:
            add = min(hi - active, seen.queued - starting)
            if add > 0:
                reason = Reason(
                    "queue_delay",
                    f"the oldest queued request has waited {wait:.1f} s, more than scalerValue "
                    f"{spec.scaler_value} s, and {starting} starting worker(s) cannot absorb "
                    f"{seen.queued} queued: starting {add}",
                    "queue_delay_s",
                    need=spec.scaler_value,
                    have=round(wait, 3),
                    limit=hi,
                )
                return _decision(active, active + add, add, (), reason)
            if active >= hi:
                reason = Reason(
                    "at_workers_max",
                    f"the oldest queued request has waited {wait:.1f} s (scalerValue {spec.scaler_value} s) "
                    f"but the endpoint already has workersMax {hi} workers",
                    "workers",
                    have=active,
                    limit=hi,
                )
                return _decision(active, active, 0, (), reason)
        down_to = lo if seen.queued == 0 else active

    down_to = max(lo, down_to)
    if active > down_to:
        idle = _idle_longest_first(workers, float(spec.idle_timeout_s))
        stop = [w.worker_id for w in idle[: active - down_to]]
        if stop:
            longest = idle[0].idle_for_s
            reason = Reason(
                "idle_timeout" if down_to > 0 else "scale_to_zero",
                f"{len(stop)} worker(s) idle for at least idleTimeout {spec.idle_timeout_s} s (longest "
                f"{longest:.0f} s) with {in_flight} request(s) in flight: stopping them"
                + (" (workersMin is 0: scaling to zero)" if active - len(stop) == 0 else ""),
                "workers",
                need=down_to,
                have=active,
                limit=spec.idle_timeout_s,
            )
            return _decision(active, active - len(stop), 0, stop, reason)
    reason = Reason(
        "hold",
        f"{active} worker(s) ({starting} starting) for {in_flight} request(s) in flight: holding",
        "workers",
        have=active,
        need=counts["queued"],
    )
    return _decision(active, active, 0, (), reason)
