"""Protocol B: the trace replayed in time against the built-in market, Scalar against the autoscalers users run.

``run_protocol_b(pods_path, options)`` builds the workload (:mod:`scalar.sim.dynamic.workload`), then runs
each asked policy on a fresh market with the same seed and measures it with the same ledger and metrics:

- ``scalar``: the engine's ``Controller`` with :func:`scalar_config` (every decision is the engine's);
- ``on-demand``: the same engine, allowed only on-demand fixed-price offers;
- ``per-pod``, ``per-pod-fast``, ``karpenter``, ``ray-v2``: :mod:`scalar.sim.dynamic.baselines`;
- ``lower-bound``: :mod:`scalar.sim.dynamic.lower_bound` (no run: hourly linear programs, no waits).

:func:`run_matrix` runs many (seed, window) runs, in parallel processes, and :func:`summarize` gives the
means, spreads and per-baseline wins.

See docs/simulator-dynamic.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from scalar.domain.money import round_cents, to_json_number
from scalar.domain.offers import AWS, AZURE, GCP, PRIME, RUNPOD, SFCOMPUTE, Offer
from scalar.domain.tier import Tier
from scalar.engine import ControllerConfig, ScaleGroupConfig
from scalar.sim.dynamic.baselines import (
    KARPENTER,
    PER_POD,
    PER_POD_CONFIG,
    PER_POD_FAST,
    PER_POD_FAST_CONFIG,
    RAY_V2,
    KarpenterDriver,
    PerPodDriver,
    RayV2Driver,
)
from scalar.sim.dynamic.engine_run import EngineDriver
from scalar.sim.dynamic.loop import DEFAULT_TICK_S, ORIGIN, LoopPolicy, RunTrace, run_loop
from scalar.sim.dynamic.lower_bound import lower_bound
from scalar.sim.dynamic.mapping import ALL_MAPPED_MODELS
from scalar.sim.dynamic.market import INTERRUPTION_PERIOD_HOURS, MarketSession
from scalar.sim.dynamic.metrics import TierWaits, tier_waits
from scalar.sim.dynamic.progress import MOVED, PREEMPTED, WorkTracker
from scalar.sim.dynamic.workload import WindowOptions, Workload, build_workload

SCALAR = "scalar"
ON_DEMAND = "on-demand"
LOWER_BOUND = "lower-bound"
POLICIES = (SCALAR, PER_POD, PER_POD_FAST, KARPENTER, RAY_V2, ON_DEMAND, LOWER_BOUND)
BASELINES = (PER_POD, PER_POD_FAST, KARPENTER, RAY_V2, ON_DEMAND)
FIXED_PRICE_PROVIDERS = (PRIME, RUNPOD, AWS, AZURE, GCP)
DEFAULT_SEED = 42

Progress = Callable[[str, float, float], None]  # (policy, done, total)


def scalar_config(offers: Sequence[Offer] = ()) -> ControllerConfig:
    """The engine's configuration for Protocol B (docs/simulator-dynamic.md, "Scalar's configuration").

    Scale-group entries, first match wins: the orderbook seller's shapes (``sfcompute``, never
    interruptible); every *interruptible* (spot) shape of the fixed-price sellers; and every on-demand
    shape of the fixed-price sellers. Up to 64 nodes per shape (the market's capacity per location). The
    engine chooses among them per job by expected cost per unit of work (engine/cost_band.py): a job's
    share of the nodes that hold it, divided by the model's throughput for FLEX work, times the rework spot
    interruptions are expected to cost it (the market's hazards, read per hour as the simulator's market
    reads them: ``interruption_period_hours = 1``). On-demand capacity is bought where that risk makes spot
    dearer (a long job that does not checkpoint) or no spot shape holds the job. Everything else is the
    engine's default. ``offers`` is accepted for callers that pass the market's offers; the groups do
    not depend on them.
    """
    del offers
    groups = [
        ScaleGroupConfig(name="orderbook", providers=(SFCOMPUTE,), max_slices=64),
        ScaleGroupConfig(name="interruptible", providers=FIXED_PRICE_PROVIDERS, spot=True, max_slices=64),
        ScaleGroupConfig(name="on-demand", providers=FIXED_PRICE_PROVIDERS, spot=False, max_slices=64),
    ]
    return ControllerConfig(scale_groups=tuple(groups), interruption_period_hours=INTERRUPTION_PERIOD_HOURS)


def on_demand_config() -> ControllerConfig:
    """Scalar's packing and autoscaling, allowed only on-demand offers of fixed-price sellers."""
    base = scalar_config()
    group = ScaleGroupConfig(name="on-demand", providers=FIXED_PRICE_PROVIDERS, spot=False, max_slices=64)
    return ControllerConfig(
        scale_groups=(group,),
        tiers=base.tiers,
        contract_length_s=base.contract_length_s,
        idle_release_s=base.idle_release_s,
        flex_batch_wait_s=base.flex_batch_wait_s,
        flex_batch_gpus=base.flex_batch_gpus,
        reservation_s=base.reservation_s,
        interruption_period_hours=base.interruption_period_hours,
    )


@dataclass(frozen=True, slots=True)
class ProtocolBOptions:
    window: WindowOptions = field(default_factory=WindowOptions)
    seed: int = DEFAULT_SEED
    policies: tuple[str, ...] = POLICIES
    tick_s: float = DEFAULT_TICK_S
    preemption_scale: float = 1.0


@dataclass(frozen=True, slots=True)
class PolicyResult:
    policy: str
    cost: Decimal
    paid_gpu_hours: float
    delivered_gpu_hours: float
    waits: dict[Tier, TierWaits]
    nodes_bought: int
    spend: dict[str, dict[str, float]]
    sim_end_s: float
    steps: int
    killed_runs: int
    timed_out: bool
    wall_s: float
    busy_gpu_hours: float = 0.0
    preempted_gpu_hours: float = 0.0
    moved_lost_gpu_hours: float = 0.0
    interruptions: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def interruptions_per_gpu_hour(self) -> float | None:
        return None if self.paid_gpu_hours <= 0 else self.interruptions / self.paid_gpu_hours

    @property
    def idle_gpu_hours(self) -> float:
        """Paid GPU-hours with no job on the GPU (boots, empty nodes, unusable fragments)."""
        return max(0.0, self.paid_gpu_hours - self.busy_gpu_hours)

    @property
    def cost_per_delivered_gpu_hour(self) -> Decimal | None:
        if self.delivered_gpu_hours <= 0:
            return None
        return self.cost / Decimal(repr(self.delivered_gpu_hours))

    def to_dict(self) -> dict[str, Any]:
        per = self.cost_per_delivered_gpu_hour
        return {
            "policy": self.policy,
            "cost": to_json_number(round_cents(self.cost)),
            "cost_per_delivered_gpu_hour": None if per is None else round(float(per), 4),
            "paid_gpu_hours": round(self.paid_gpu_hours, 2),
            "delivered_gpu_hours": round(self.delivered_gpu_hours, 2),
            "busy_gpu_hours": round(self.busy_gpu_hours, 2),
            "idle_gpu_hours": round(self.idle_gpu_hours, 2),
            "fast": self.waits[Tier.FAST].to_dict(),
            "flex": self.waits[Tier.FLEX].to_dict(),
            "nodes_bought": self.nodes_bought,
            "spend": self.spend,
            "sim_end_s": round(self.sim_end_s, 1),
            "steps": self.steps,
            "killed_runs": self.killed_runs,
            "interruptions": self.interruptions,
            "interruptions_per_gpu_hour": None
            if self.interruptions_per_gpu_hour is None
            else round(self.interruptions_per_gpu_hour, 6),
            "preempted_gpu_hours": round(self.preempted_gpu_hours, 2),
            "moved_lost_gpu_hours": round(self.moved_lost_gpu_hours, 2),
            "timed_out": self.timed_out,
            "wall_s": round(self.wall_s, 2),
            **self.extra,
        }


@dataclass(frozen=True, slots=True)
class ProtocolBResult:
    workload: Workload
    seed: int
    results: tuple[PolicyResult, ...]
    bound: Decimal | None = None  # the lower bound's cost, for every policy's ratio
    preemption_scale: float = 1.0

    def by_policy(self) -> dict[str, PolicyResult]:
        return {r.policy: r for r in self.results}

    def to_dict(self) -> dict[str, Any]:
        wl = self.workload
        policies = []
        for r in self.results:
            row = r.to_dict()
            row["ratio_to_lower_bound"] = None if not self.bound else round(float(r.cost / self.bound), 4)
            policies.append(row)
        return {
            "pods_file": wl.source,
            "seed": self.seed,
            "preemption_scale": self.preemption_scale,
            "checkpoint_minutes": None if wl.checkpoint_s is None else wl.checkpoint_s / 60,
            "window": {
                "start_s": wl.start_s,
                "end_s": wl.end_s,
                "start_day": round(wl.start_s / 86_400, 3),
                "days": round((wl.end_s - wl.start_s) / 86_400, 3),
                "compress": wl.compress,
                "simulated_s": round(wl.horizon_s, 1),
            },
            "workload": {
                "pods_read": wl.pods_read,
                "jobs": len(wl.jobs),
                "tiers": wl.tiers,
                "skipped": wl.skipped,
                "clipped_to_window": wl.clipped,
                "demanded_gpu_hours": round(wl.demanded_gpu_hours, 2),
                "mapping": [
                    {
                        "trace_models": r.trace_models,
                        "models": list(r.models),
                        "pods": r.pods,
                        "gpu_hours": round(r.gpu_hours, 2),
                    }
                    for r in wl.mapping
                ],
                "pods_per_model": wl.pods_per_model(),
            },
            "policies": policies,
        }


def _waits(
    workload: Workload, trace: RunTrace, refused: set[str], tracker: WorkTracker
) -> dict[Tier, TierWaits]:
    return {
        t: tier_waits(workload.jobs, trace.finished_at, refused, trace.ended_at, t, ideal=tracker.ideal_s)
        for t in Tier
    }


def _delivered(workload: Workload, trace: RunTrace) -> float:
    return sum(j.demanded_gpu_hours for j in workload.jobs if j.job_id in trace.finished_at)


def _driver(
    policy: str, session: MarketSession, workload: Workload, config: ControllerConfig | None = None
) -> LoopPolicy:
    if policy == SCALAR:
        return EngineDriver(config or scalar_config(), session, workload.checkpoint_s)
    if policy == ON_DEMAND:
        return EngineDriver(on_demand_config(), session, workload.checkpoint_s)
    if policy == PER_POD:
        return PerPodDriver(session, workload.horizon_s, PER_POD_CONFIG, PER_POD)
    if policy == PER_POD_FAST:
        return PerPodDriver(session, workload.horizon_s, PER_POD_FAST_CONFIG, PER_POD_FAST)
    if policy == KARPENTER:
        return KarpenterDriver(session, workload.horizon_s)
    if policy == RAY_V2:
        return RayV2Driver(session, workload.horizon_s)
    raise ValueError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")


def run_policy(
    policy: str,
    workload: Workload,
    seed: int,
    *,
    tick_s: float = DEFAULT_TICK_S,
    progress: Progress | None = None,
    config: ControllerConfig | None = None,
    preemption_scale: float = 1.0,
) -> PolicyResult:
    """Run one policy on a fresh market of ``seed`` and measure it (``config``: the engine's, for
    ``scalar``; the default is :func:`scalar_config`)."""
    started = time.perf_counter()
    tracker = WorkTracker(workload.jobs, workload.checkpoint_s)
    with MarketSession(
        seed, ALL_MAPPED_MODELS, preemption_scale=preemption_scale, tracker=tracker
    ) as session:
        if policy == LOWER_BOUND:
            bound = lower_bound(workload, session)
            end = ORIGIN
            trace = RunTrace(finished_at={}, ended_at=end)
            zero = {t: tier_waits((), {}, set(), end, t) for t in Tier}
            return PolicyResult(
                policy=policy,
                cost=bound.cost,
                paid_gpu_hours=workload.demanded_gpu_hours,
                delivered_gpu_hours=workload.demanded_gpu_hours,
                waits={t: _ideal_waits(workload, t, zero[t]) for t in Tier},
                nodes_bought=0,
                spend={},
                sim_end_s=workload.horizon_s,
                steps=trace.steps,
                killed_runs=0,
                timed_out=False,
                wall_s=time.perf_counter() - started,
                busy_gpu_hours=workload.demanded_gpu_hours,
                extra={"unpriced_jobs": bound.unpriced_jobs, "lp_hours": bound.hours},
            )
        driver = _driver(policy, session, workload, config)
        report = None if progress is None else (lambda done, total: progress(policy, done, total))
        trace = run_loop(workload, session, driver, tick_s=tick_s, progress=report)
        until = trace.ended_at
        refused = driver.given_up()
        spend = {
            k: {
                "cost": round(float(v["cost"]), 2),
                "gpu_hours": round(float(v["gpu_hours"]), 2),
                "nodes": int(v["nodes"]),
            }
            for k, v in session.ledger.by_kind(until).items()
        }
        return PolicyResult(
            policy=policy,
            cost=session.ledger.cost(until),
            paid_gpu_hours=float(session.ledger.paid_gpu_hours(until)),
            delivered_gpu_hours=_delivered(workload, trace),
            waits=_waits(workload, trace, refused, tracker),
            nodes_bought=sum(len(b.grant.node_ids) for b in session.ledger.blocks.values()),
            spend=spend,
            sim_end_s=(until - ORIGIN).total_seconds(),
            steps=trace.steps,
            killed_runs=trace.killed_runs,
            timed_out=trace.timed_out,
            wall_s=time.perf_counter() - started,
            busy_gpu_hours=float(session.occupancy.busy_gpu_hours(until)),
            preempted_gpu_hours=tracker.lost_gpu_hours(PREEMPTED),
            moved_lost_gpu_hours=tracker.lost_gpu_hours(MOVED),
            interruptions=session.preemptions,
            extra={**_extra(driver), "cost_curve": cost_curve(session, until)},
        )


COST_CURVE_STEP_S = 3 * 3600


def cost_curve(session: MarketSession, until: datetime) -> list[float]:
    """Cumulative cost every :data:`COST_CURVE_STEP_S` from the window's start to ``until`` (and at it)."""
    end = (until - ORIGIN).total_seconds()
    points = [ORIGIN + timedelta(seconds=t) for t in range(0, int(end), COST_CURVE_STEP_S)] + [until]
    return [round(float(session.ledger.cost(t)), 2) for t in points]


def _extra(driver: LoopPolicy) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("launches", "moves", "consolidations"):
        value = getattr(driver, name, None)
        if value is not None:
            out[name] = value
    return out


def _ideal_waits(workload: Workload, tier: Tier, empty: TierWaits) -> TierWaits:
    n = sum(1 for j in workload.jobs if j.tier is tier)
    if not n:
        return empty
    return TierWaits(tier, n, n, 0, 0.0, 0.0, 0.0, 0.0, empty.slo_s, 1.0)


def load_workload(pods_path: Path | str, seed: int, window: WindowOptions) -> Workload:
    """Build the workload against the offers the market shows at the window's start (``seed`` also draws
    the duration estimates)."""
    with MarketSession(seed, ALL_MAPPED_MODELS) as session:
        return build_workload(pods_path, session.offers(ORIGIN), window, seed=seed)


def run_protocol_b(
    pods_path: Path | str,
    options: ProtocolBOptions | None = None,
    *,
    progress: Progress | None = None,
    workload: Workload | None = None,
) -> ProtocolBResult:
    opts = options or ProtocolBOptions()
    wl = workload or load_workload(pods_path, opts.seed, opts.window)
    results = [
        run_policy(
            p, wl, opts.seed, tick_s=opts.tick_s, progress=progress, preemption_scale=opts.preemption_scale
        )
        for p in opts.policies
    ]
    by = {r.policy: r for r in results}
    bound = by[LOWER_BOUND].cost if LOWER_BOUND in by else None
    if bound is None:
        bound = run_policy(LOWER_BOUND, wl, opts.seed).cost
    return ProtocolBResult(wl, opts.seed, tuple(results), bound, opts.preemption_scale)


def policy_list(names: Sequence[str]) -> tuple[str, ...]:
    """``["all"]`` -> every policy; otherwise the names, checked."""
    if not names or "all" in names:
        return POLICIES
    for n in names:
        if n not in POLICIES:
            raise ValueError(f"unknown policy {n!r}; use one of {', '.join(POLICIES)} or all")
    return tuple(dict.fromkeys(names))
