"""The lower bound: per market hour, the cheapest fractional fleet that covers the hour's GPU, CPU and RAM demand.

For every hour ``h`` of the window, a linear program (solved with HiGHS through ``scipy.optimize.linprog``):

- **Demand.** Jobs are grouped into classes (same models, GPUs, GPU sharing and memory, CPU, RAM, tier). A
  class's demand in hour ``h`` is ``w_c``: the job-hours its jobs run in that hour if each ran from its
  arrival without waiting (its trace duration, cut to the hour). A FLEX job's duration is work on the
  reference model; a FAST job's is wall time on any model (:mod:`scalar.sim.dynamic.speed`).
- **Variables.** ``x_o >= 0``: node-hours of offer shape ``o`` bought in hour ``h`` (fractional: any amount);
  ``y_co >= 0``: the part of class ``c``'s demand served on ``o``, only where one node of ``o`` holds one
  job of ``c`` (its model, GPU memory, CPU and RAM per node).
- **Constraints.** ``sum_o y_co = 1`` for every class; for every shape and resource ``r`` (GPUs, vCPUs, RAM
  GB): ``sum_c y_co * w_c * need_cr(o) / rate_c(o) <= x_o * cap_or``, where ``rate_c(o)`` is the speed of
  ``o``'s model for FLEX and 1 for FAST (a faster GPU holds a FLEX job's resources for less time) and a
  GPU-sharing job needs its part of one GPU's memory.
- **Objective.** ``min sum_o x_o * p_o(h)`` with ``p_o(h)`` the lowest price of shape ``o`` over hours
  ``<= h`` (a policy that bought at a dip keeps that price; fixed-price contracts keep their price).

Why no policy pays less (for work run in the hour it arrives): in hour ``h`` a policy holds some nodes of
each shape for some seconds; dividing each job's resource-seconds in ``h`` by the node-seconds that held
them gives a feasible ``(x, y)`` whose objective is at most what those nodes cost (each was bought at a
price no lower than ``p_o(h)``), and boots, idle nodes, fragmentation, waits and lost work only add to the
bill. A policy that delays FLEX work into a later, cheaper hour could in principle beat it by the price
difference (spot prices drift at most 5% an hour); nothing else can.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

from scalar.domain.offers import Offer
from scalar.domain.tier import Tier
from scalar.sim.dynamic.loop import ORIGIN
from scalar.sim.dynamic.speed import scales_with_speed, speed
from scalar.sim.dynamic.workload import HOUR_S, DynamicJob, Workload

# models, GPUs, shares a GPU, GPU memory, CPU, RAM, tier
JobClass = tuple[tuple[str, ...], int, bool, float, float, float, Tier]
Shape = tuple[str, str, bool]


class OfferSource(Protocol):
    """Anything that tells the offers on sale at a time (a ``MarketSession``, or a fixed list in tests)."""

    def offers(self, now: datetime) -> tuple[Offer, ...]: ...


@dataclass(frozen=True, slots=True)
class BoundResult:
    cost: Decimal
    hours: int  # linear programs solved
    unpriced_jobs: int  # jobs no offer could hold in some hour they run (their demand is left out)


def job_class(job: DynamicJob) -> JobClass:
    return (
        job.models,
        job.gpu_count,
        job.share_gpu,
        job.vram_per_gpu_gb,
        job.cpu_cores,
        job.ram_gb,
        job.tier,
    )


def holds(offer: Offer, cls: JobClass) -> bool:
    models, _gpus, _share, vram, cpu, ram, _tier = cls
    if not offer.gpu_model or offer.gpu_model.upper() not in models or offer.gpu_count < 1:
        return False
    if offer.gpu_memory_gb < vram:
        return False
    if offer.vcpu > 0 and offer.vcpu < cpu:
        return False
    return not (offer.memory_gb > 0 and offer.memory_gb < ram)


def needs(offer: Offer, cls: JobClass) -> tuple[float, float, float]:
    """GPUs, vCPUs and RAM one job of ``cls`` holds on ``offer`` (a gang: on each of its nodes)."""
    _models, gpus, share, vram, cpu, ram, _tier = cls
    nodes = max(1, math.ceil(gpus / offer.gpu_count))
    gpu = vram / offer.gpu_memory_gb if share and 0 < vram < offer.gpu_memory_gb else float(gpus)
    return gpu, cpu * nodes, ram * nodes


def _demand(workload: Workload) -> dict[int, dict[JobClass, float]]:
    """Job-hours per class per hour, each job from its arrival for its duration."""
    out: dict[int, dict[JobClass, float]] = {}
    for job in workload.jobs:
        cls = job_class(job)
        t, end = job.arrival_s, job.arrival_s + job.duration_s
        while t < end - 1e-9:
            hour = int(t // HOUR_S)
            seg = min(end, (hour + 1) * HOUR_S) - t
            row = out.setdefault(hour, {})
            row[cls] = row.get(cls, 0.0) + seg / HOUR_S
            t += seg
    return out


def solve_hour(demand: dict[JobClass, float], offers: Sequence[Offer]) -> tuple[float, set[JobClass]]:
    """The hour's linear program: its optimal cost and the classes no offer holds (left out)."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    classes = [c for c, w in demand.items() if w > 0]
    pairs: list[tuple[int, int]] = []
    unheld: set[JobClass] = set()
    for ci, cls in enumerate(classes):
        found = False
        for oi, offer in enumerate(offers):
            if holds(offer, cls):
                pairs.append((ci, oi))
                found = True
        if not found:
            unheld.add(cls)
    if not pairs:
        return 0.0, unheld
    n_x = len(offers)
    n = n_x + len(pairs)
    cost = np.zeros(n)
    for oi, offer in enumerate(offers):
        cost[oi] = float(offer.price_per_hour)
    eq_rows, eq_cols = [], []
    ub_rows: list[int] = []
    ub_cols: list[int] = []
    ub_vals: list[float] = []
    caps = [(o.gpu_count, o.vcpu, o.memory_gb) for o in offers]
    for oi, (g, c, r) in enumerate(caps):
        for k, cap in enumerate((g, c, r)):
            if cap > 0:
                ub_rows.append(3 * oi + k)
                ub_cols.append(oi)
                ub_vals.append(-float(cap))
    row_of = {ci: i for i, ci in enumerate(sorted({ci for ci, _ in pairs}))}
    for p, (ci, oi) in enumerate(pairs):
        col = n_x + p
        cls, offer = classes[ci], offers[oi]
        eq_rows.append(row_of[ci])
        eq_cols.append(col)
        rate = speed(offer.gpu_model or "") if scales_with_speed(cls[6]) else 1.0
        w = demand[cls] / rate
        for k, (need, cap) in enumerate(zip(needs(offer, cls), caps[oi], strict=True)):
            if cap > 0 and need > 0:
                ub_rows.append(3 * oi + k)
                ub_cols.append(col)
                ub_vals.append(w * need)
    a_ub = coo_matrix((ub_vals, (ub_rows, ub_cols)), shape=(3 * n_x, n)).tocsr()
    a_eq = coo_matrix(([1.0] * len(eq_rows), (eq_rows, eq_cols)), shape=(len(row_of), n)).tocsr()
    result = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(3 * n_x),
        A_eq=a_eq,
        b_eq=np.ones(len(row_of)),
        bounds=(0, None),
        method="highs",
    )
    if result.status != 0:  # pragma: no cover - always feasible: every kept class has a holding offer
        raise RuntimeError(f"the lower-bound LP failed: {result.message}")
    return float(result.fun), unheld


def _shape(offer: Offer) -> Shape:
    return (offer.provider, offer.instance_type, offer.spot)


def lower_bound(workload: Workload, session: OfferSource) -> BoundResult:
    """Solve the hourly LPs over the workload's hours (prices: each shape's minimum so far)."""
    demand = _demand(workload)
    cheapest: dict[Shape, Offer] = {}
    total = 0.0
    unpriced: set[JobClass] = set()
    last = max(demand, default=-1)
    for hour in range(last + 1):
        for offer in session.offers(_at(hour)):
            seen = cheapest.get(_shape(offer))
            if seen is None or offer.price_per_hour < seen.price_per_hour:
                cheapest[_shape(offer)] = offer
        row = demand.get(hour)
        if not row:
            continue
        cost, unheld = solve_hour(row, list(cheapest.values()))
        total += cost
        unpriced |= unheld
    jobs_out = sum(1 for j in workload.jobs if job_class(j) in unpriced)
    return BoundResult(Decimal(repr(round(total, 6))), len(demand), jobs_out)


def _at(hour: int) -> datetime:
    return ORIGIN + timedelta(seconds=hour * HOUR_S)
