"""Protocol B over many runs: seeds x windows x preemption scales, in parallel processes, and their summary.

A *run* is one (market seed, window start day, preemption scale): every asked policy on the same workload
and market, plus the lower bound (always computed: each policy's ``ratio_to_lower_bound`` needs it). Runs
are split into one task per (run, policy) and spread over ``jobs`` processes, the engine's (longest) first;
each process builds a run's workload once for all its policies; results come back in order.

:func:`summarize` gives, per policy, the mean of every run's cost (``cost``), its sample standard deviation
(``cost_sd``), the mean FAST and FLEX p99 waits, the mean ratio to the bound, the total ``killed_runs`` and
the mean ``preempted_gpu_hours``; and, per baseline, on how many runs Scalar **wins**: it costs less, and
its FAST p99 wait is no worse than the baseline's plus 6 s or under the 10-minute FAST target.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scalar.domain.tier import Tier
from scalar.sim.dynamic.metrics import SLO_WAIT_S
from scalar.sim.dynamic.workload import WindowOptions, Workload
from scalar.sim.protocol_b import (
    LOWER_BOUND,
    ON_DEMAND,
    SCALAR,
    PolicyResult,
    ProtocolBResult,
    load_workload,
    run_policy,
)

WIN_SLACK_S = 6.0


@dataclass(frozen=True, slots=True)
class RunSpec:
    seed: int
    start_day: float | None
    preemption_scale: float = 1.0


# Rough relative cost of one run of each policy (the engine's policies take longest): tasks are handed to
# the processes longest first, so that no long one starts last while the other processes sit idle.
_WEIGHT = {SCALAR: 4, ON_DEMAND: 2}
_WORKLOADS: dict[tuple[str, int, int, int, WindowOptions], Workload] = {}


def _workload(pods: str, seed: int, window: WindowOptions) -> Workload:
    """The run's workload, built once per process (every policy of a run replays the same one)."""
    stat = Path(pods).stat()
    key = (pods, stat.st_mtime_ns, stat.st_size, seed, window)
    found = _WORKLOADS.get(key)
    if found is None:
        if len(_WORKLOADS) >= 64:
            _WORKLOADS.clear()
        found = _WORKLOADS[key] = load_workload(pods, seed, window)
    return found


def _task(
    pods: str, window: WindowOptions, spec: RunSpec, policy: str
) -> tuple[PolicyResult, Workload | None]:
    workload = _workload(pods, spec.seed, replace(window, start_day=spec.start_day))
    result = run_policy(policy, workload, spec.seed, preemption_scale=spec.preemption_scale)
    return result, (workload if policy == LOWER_BOUND else None)


def run_matrix(
    pods: Path | str,
    window: WindowOptions,
    specs: Sequence[RunSpec],
    policies: Sequence[str],
    *,
    jobs: int = 1,
    done: Callable[[RunSpec, str], None] | None = None,
) -> list[ProtocolBResult]:
    """Every policy (and the bound) on every run; ``jobs`` processes (1: in this process)."""
    wanted = list(dict.fromkeys([*policies, LOWER_BOUND]))
    tasks = [(i, spec, p) for i, spec in enumerate(specs) for p in wanted]
    out: dict[tuple[int, str], tuple[PolicyResult, Workload | None]] = {}
    if jobs <= 1:
        for i, spec, p in tasks:
            out[(i, p)] = _task(str(pods), window, spec, p)
            if done is not None:
                done(spec, p)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            longest_first = sorted(tasks, key=lambda t: -_WEIGHT.get(t[2], 1))
            submitted = {
                (i, p): pool.submit(_task, str(pods), window, spec, p) for i, spec, p in longest_first
            }
            futures = {(i, p): submitted[(i, p)] for i, _spec, p in tasks}
            for (i, p), future in futures.items():
                out[(i, p)] = future.result()
                if done is not None:
                    done(specs[i], p)
    results: list[ProtocolBResult] = []
    for i, spec in enumerate(specs):
        bound, workload = out[(i, LOWER_BOUND)]
        assert workload is not None
        rows = tuple(out[(i, p)][0] for p in policies)
        results.append(ProtocolBResult(workload, spec.seed, rows, bound.cost, spec.preemption_scale))
    return results


def _mean(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return round(statistics.fmean(got), 4) if got else None


def _sd(values: Sequence[float]) -> float | None:
    return round(statistics.stdev(values), 4) if len(values) > 1 else 0.0 if values else None


def scalar_wins(scalar: dict[str, Any], other: dict[str, Any]) -> bool:
    """Scalar costs less, at a FAST p99 no worse than the other's plus 6 s or under the FAST target."""
    if scalar["cost"] >= other["cost"]:
        return False
    mine, theirs = scalar["fast"]["wait_p99_s"], other["fast"]["wait_p99_s"]
    if mine is None:
        return True
    if mine < SLO_WAIT_S[Tier.FAST]:
        return True
    return theirs is not None and mine <= theirs + WIN_SLACK_S


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over runs per policy, and Scalar's wins against each baseline."""
    names: list[str] = []
    for run in runs:
        for p in run["policies"]:
            if p["policy"] not in names:
                names.append(p["policy"])
    rows: list[dict[str, Any]] = []
    wins: dict[str, dict[str, int]] = {}
    for name in names:
        got = [next(p for p in run["policies"] if p["policy"] == name) for run in runs]
        costs = [float(p["cost"]) for p in got]
        row: dict[str, Any] = {
            "policy": name,
            "runs": len(got),
            "cost": _mean(costs),
            "cost_sd": _sd(costs),
            "ratio_to_lower_bound": _mean([p.get("ratio_to_lower_bound") for p in got]),
            "paid_gpu_hours": _mean([p["paid_gpu_hours"] for p in got]),
            "idle_gpu_hours": _mean([p["idle_gpu_hours"] for p in got]),
            "killed_runs": sum(int(p["killed_runs"]) for p in got),
            "interruptions": sum(int(p.get("interruptions", 0)) for p in got),
            "interruptions_per_gpu_hour": _mean([p.get("interruptions_per_gpu_hour") for p in got]),
            "preempted_gpu_hours": _mean([p.get("preempted_gpu_hours", 0.0) for p in got]),
            "timed_out_runs": sum(1 for p in got if p.get("timed_out")),
        }
        for tier in ("fast", "flex"):
            row[tier] = {
                key: _mean([p[tier][key] for p in got])
                for key in ("wait_p50_s", "wait_p95_s", "wait_p99_s", "slo_attainment")
            }
            row[tier]["wait_p99_s_sd"] = _sd([p[tier]["wait_p99_s"] or 0.0 for p in got])
        rows.append(row)
        if name not in (SCALAR, LOWER_BOUND):
            count = 0
            for run in runs:
                by = {p["policy"]: p for p in run["policies"]}
                if SCALAR in by and name in by and scalar_wins(by[SCALAR], by[name]):
                    count += 1
            wins[name] = {"scalar_wins": count, "runs": len(runs)}
    for row in rows:
        if row["policy"] in wins:
            row["wins"] = wins[row["policy"]]
    return {"runs": list(runs), "policies": rows, "wins": wins}
