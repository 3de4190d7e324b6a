"""The truth about every job's work: how much is left, how long a run takes on its model, what a stop loses.

The market ends a job's run when its timer runs out; every policy starts runs through the
:class:`~scalar.sim.dynamic.market.MarketSession`, which asks this tracker how long the run really takes:
the work left divided by the model's speed (:mod:`scalar.sim.dynamic.speed`), whatever the policy believes
(it was told an estimate). A run that ends early (its node preempted, released or ended with it on board,
or the policy stopping it to move it) keeps the work up to its last checkpoint (every ``checkpoint_s`` of
run time; none by default, so everything is lost) and the rest is counted as lost GPU-hours:
``preempted`` when the node stopped under the job, ``moved`` when the policy stopped it. A FAST job is a
service: stopped, it comes back up elsewhere for the rest of its life (nothing to redo, nothing lost;
the time it was down counts in its wait).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from scalar.sim.dynamic.speed import run_seconds, scales_with_speed, speed
from scalar.sim.dynamic.workload import DynamicJob

PREEMPTED = "preempted"
MOVED = "moved"


@dataclass(slots=True)
class _Run:
    model: str
    started: datetime
    duration_s: int


class WorkTracker:
    """Work left per job (in reference seconds) and the runs under way."""

    def __init__(self, jobs: Sequence[DynamicJob], checkpoint_s: float | None = None) -> None:
        self.jobs = {j.job_id: j for j in jobs}
        self.left: dict[str, float] = {j.job_id: j.duration_s for j in jobs}
        self.runs: dict[str, _Run] = {}
        self.last_model: dict[str, str] = {}
        self.checkpoint_s = checkpoint_s
        self.lost_gpu_s: dict[str, float] = {PREEMPTED: 0.0, MOVED: 0.0}
        self.restarts = 0

    def start(self, job_id: str, model: str, now: datetime) -> int | None:
        """Seconds this run takes on ``model`` (a gang's later nodes get the same run); ``None``: unknown job."""
        job = self.jobs.get(job_id)
        if job is None:
            return None
        run = self.runs.get(job_id)
        if run is not None:
            return run.duration_s
        seconds = max(1, math.ceil(run_seconds(self.left[job_id], job.tier, model) - 1e-9))
        self.runs[job_id] = _Run(model.upper(), now, seconds)
        self.last_model[job_id] = model.upper()
        return seconds

    def finished(self, job_id: str) -> None:
        if self.runs.pop(job_id, None) is not None:
            self.left[job_id] = 0.0

    def stopped(self, job_id: str, at: datetime, cause: str) -> None:
        """The run ended before its work did: keep what was checkpointed, count the rest as lost."""
        run = self.runs.pop(job_id, None)
        if run is None:
            return
        job = self.jobs[job_id]
        elapsed = max(0.0, min((at - run.started).total_seconds(), float(run.duration_s)))
        kept = 0.0
        if not scales_with_speed(job.tier):
            kept = elapsed  # a service comes back up for the rest of its life: nothing to redo
        elif self.checkpoint_s:
            kept = math.floor(elapsed / self.checkpoint_s) * self.checkpoint_s
        rate = speed(run.model) if scales_with_speed(job.tier) else 1.0
        self.left[job_id] = max(0.0, self.left[job_id] - kept * rate)
        self.lost_gpu_s[cause] = self.lost_gpu_s.get(cause, 0.0) + (elapsed - kept) * job.gpus
        self.restarts += 1

    def ideal_s(self, job: DynamicJob) -> float:
        """The job's run time on the model it last ran on (its duration when it never ran)."""
        model = self.last_model.get(job.job_id)
        return job.duration_s if model is None else run_seconds(job.duration_s, job.tier, model)

    def lost_gpu_hours(self, cause: str) -> float:
        return self.lost_gpu_s.get(cause, 0.0) / 3600.0
