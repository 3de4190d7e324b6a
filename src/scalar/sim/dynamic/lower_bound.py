"""The ideal lower bound: every demanded GPU-hour bought at the cheapest price offered for it, no packing loss.

For each job and each market hour it runs in (from its arrival, with no wait), the job pays the cheapest
offer *that could hold it* in that hour: an offer of a model it accepts, with enough memory per GPU, and
CPU and RAM per node for it (alone, or per node of a gang), at that hour's price. It pays that offer's
price per GPU-hour for the GPUs it occupies: a whole-GPU job its GPU count; a job sharing a GPU the share
of that GPU's memory it asks for (on a larger GPU, a share is cheaper, as it is when packed for real).

Nothing can beat it: any policy puts each job on some node that holds it, pays at least that node's price
for the GPUs (or GPU memory) the job occupies, and pays more for boots, idle GPUs, CPU-bound nodes and
whole contract windows. It ignores CPU and RAM as a cost: a job whose CPU fills a node while leaving GPUs
idle still pays only for its GPUs here, which is why no real policy comes close on a CPU-heavy trace
(:func:`dominant_share_cost` prices that effect for the report).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

from scalar.domain.offers import Offer
from scalar.sim.dynamic.loop import ORIGIN
from scalar.sim.dynamic.workload import HOUR_S, DynamicJob, Workload

JobClass = tuple[tuple[str, ...], int, bool, float, float, float]


class OfferSource(Protocol):
    """Anything that tells the offers on sale at a time (a ``MarketSession``, or a fixed list in tests)."""

    def offers(self, now: datetime) -> tuple[Offer, ...]: ...


@dataclass(frozen=True, slots=True)
class BoundResult:
    cost: Decimal
    dominant_share_cost: Decimal
    unpriced_jobs: int  # jobs no offer could hold in some hour they run (priced at nothing then)


def _class(job: DynamicJob) -> JobClass:
    return (job.models, job.gpu_count, job.share_gpu, job.vram_per_gpu_gb, job.cpu_cores, job.ram_gb)


def holds(offer: Offer, job_class: JobClass) -> bool:
    models, gpus, _share, vram, cpu, ram = job_class
    if not offer.gpu_model or offer.gpu_model.upper() not in models or offer.gpu_count < 1:
        return False
    if offer.gpu_memory_gb < vram:
        return False
    if offer.vcpu > 0 and offer.vcpu < cpu:
        return False
    return not (offer.memory_gb > 0 and offer.memory_gb < ram) and gpus >= 0


def gpu_cost_per_hour(offer: Offer, job_class: JobClass) -> float:
    """What the job's GPUs cost per hour on this offer (a share: its part of one GPU's memory)."""
    _models, gpus, share, vram, _cpu, _ram = job_class
    per_gpu = float(offer.price_per_hour) / offer.gpu_count
    if share and 0 < vram < offer.gpu_memory_gb:
        return per_gpu * vram / offer.gpu_memory_gb
    return per_gpu * gpus


def dominant_cost_per_hour(offer: Offer, job_class: JobClass) -> float:
    """The job's dominant share of the nodes of this offer it needs (GPUs, CPU or RAM per node, whichever it
    takes most of), times their price: what it would cost if every node were packed without loss."""
    _models, gpus, share, vram, cpu, ram = job_class
    nodes = max(1, math.ceil(gpus / offer.gpu_count))
    if share and 0 < vram < offer.gpu_memory_gb:
        gpu_share = vram / offer.gpu_memory_gb / offer.gpu_count
    else:
        gpu_share = gpus / nodes / offer.gpu_count
    cpu_share = cpu / offer.vcpu if offer.vcpu > 0 else 0.0
    ram_share = ram / offer.memory_gb if offer.memory_gb > 0 else 0.0
    return float(offer.price_per_hour) * nodes * max(gpu_share, cpu_share, ram_share)


def _cheapest(offers: Sequence[Offer], job_class: JobClass) -> tuple[float, float] | None:
    best: float | None = None
    best_dom: float | None = None
    for o in offers:
        if not holds(o, job_class):
            continue
        c = gpu_cost_per_hour(o, job_class)
        d = dominant_cost_per_hour(o, job_class)
        best = c if best is None else min(best, c)
        best_dom = d if best_dom is None else min(best_dom, d)
    if best is None or best_dom is None:
        return None
    return best, best_dom


def lower_bound(workload: Workload, session: OfferSource) -> BoundResult:
    cache: dict[tuple[int, JobClass], tuple[float, float] | None] = {}
    offers_by_hour: dict[int, tuple[Offer, ...]] = {}
    total = 0.0
    dominant = 0.0
    unpriced: set[str] = set()
    for job in workload.jobs:
        cls = _class(job)
        t = job.arrival_s
        end = job.arrival_s + job.duration_s
        while t < end - 1e-9:
            hour = int(t // HOUR_S)
            seg = min(end, (hour + 1) * HOUR_S) - t
            key = (hour, cls)
            if key not in cache:
                offers = offers_by_hour.get(hour)
                if offers is None:
                    offers = session.offers(_at(hour))
                    offers_by_hour[hour] = offers
                cache[key] = _cheapest(offers, cls)
            price = cache[key]
            if price is None:
                unpriced.add(job.job_id)
            else:
                total += price[0] * seg / HOUR_S
                dominant += price[1] * seg / HOUR_S
            t += seg
    return BoundResult(Decimal(repr(round(total, 6))), Decimal(repr(round(dominant, 6))), len(unpriced))


def _at(hour: int) -> datetime:
    return ORIGIN + timedelta(seconds=hour * HOUR_S)
