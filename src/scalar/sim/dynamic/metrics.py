"""Protocol B's numbers, measured the same way for every policy.

- **Wait** of a job: ``finish - arrival - run time`` (its run time on the model it last ran on): all the time it was not making progress (queueing,
  boots, and work lost to a preemption and run again). A job that never finished (the run hit its safety
  horizon) counts ``end of run - arrival`` and misses its SLO; a job a policy refused is counted apart and
  misses its SLO too.
- **SLO attainment** per tier: the share of the tier's jobs whose wait is within the bound, FAST 10 minutes,
  FLEX 1 hour (FLEX may wait for a batch and a cheaper node; an hour is the longest a batch user would
  not notice on work that runs a median 4 minutes to hours).
- Percentiles: nearest rank (the smallest wait with at least p% of the jobs at or below it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from scalar.domain.tier import Tier
from scalar.sim.dynamic.loop import ORIGIN
from scalar.sim.dynamic.workload import DynamicJob

SLO_WAIT_S: dict[Tier, float] = {Tier.FAST: 600.0, Tier.FLEX: 3600.0}
PERCENTILES = (50, 95, 99)


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile of ``values`` (``None`` when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class TierWaits:
    tier: Tier
    jobs: int
    finished: int
    refused: int
    p50_s: float | None
    p95_s: float | None
    p99_s: float | None
    max_s: float | None
    slo_s: float
    slo_attainment: float | None

    def to_dict(self) -> dict[str, object]:
        return {
            "jobs": self.jobs,
            "finished": self.finished,
            "refused": self.refused,
            "wait_p50_s": _r(self.p50_s),
            "wait_p95_s": _r(self.p95_s),
            "wait_p99_s": _r(self.p99_s),
            "wait_max_s": _r(self.max_s),
            "slo_wait_s": self.slo_s,
            "slo_attainment": None if self.slo_attainment is None else round(self.slo_attainment, 4),
        }


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def tier_waits(
    jobs: Iterable[DynamicJob],
    finished_at: dict[str, datetime],
    refused: set[str],
    ended_at: datetime,
    tier: Tier,
    ideal: Callable[[DynamicJob], float] | None = None,
) -> TierWaits:
    """Waits of ``tier``'s jobs; ``ideal(job)``: its run time without waiting (default: its duration; with
    GPUs of different speeds, its run time on the model it last ran on)."""
    waits: list[float] = []
    n = finished = n_refused = ok = 0
    bound = SLO_WAIT_S[tier]
    for job in jobs:
        if job.tier is not tier:
            continue
        n += 1
        if job.job_id in refused:
            n_refused += 1
            continue
        done = finished_at.get(job.job_id)
        if done is None:
            wait = (ended_at - ORIGIN).total_seconds() - job.arrival_s
        else:
            finished += 1
            ran = job.duration_s if ideal is None else ideal(job)
            wait = max(0.0, (done - ORIGIN).total_seconds() - job.arrival_s - ran)
            ok += wait <= bound
        waits.append(wait)
    return TierWaits(
        tier=tier,
        jobs=n,
        finished=finished,
        refused=n_refused,
        p50_s=percentile(waits, 50),
        p95_s=percentile(waits, 95),
        p99_s=percentile(waits, 99),
        max_s=max(waits) if waits else None,
        slo_s=bound,
        slo_attainment=ok / n if n else None,
    )
