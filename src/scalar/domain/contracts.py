"""The economics of a purchase: $ per unit of work, the work spot interruptions make redone, and how long
a contract to commit to against the demand forecast.

**Work units.** A work unit is one GPU-hour on the reference model (the A100 of the GPU registry,
``domain.gpus.relative_throughput`` = 1). A FLEX (batch) job's duration scales with the GPU's throughput:
on a model of throughput ``t`` it runs ``work / t`` hours, so what it costs is the price per GPU-hour
divided by ``t`` (``work_rate``). A FAST (latency-sensitive) job holds its GPU for its wall time whatever
the model: its cost is the price per GPU-hour (rate 1).

**Interruption risk.** A spot node is interrupted at a constant hazard ``h`` per hour: the offer's
published interruption probability ``p`` over ``period`` hours (AWS Spot Advisor bands; the seed's 10%
where none is published) read as ``h = -ln(1 - p) / period``. A FLEX job interrupted restarts from its
last checkpoint (every ``c`` hours of run time; none: from the start), so a segment of ``c`` hours takes
``(e^(h c) - 1) / h`` hours in expectation (the classic restart-from-checkpoint result for a memoryless
hazard, restarts free): the expected rework fraction is ``(e^(h c) - 1) / (h c) - 1``. The expected
cost of a job on an offer is ``price x duration x (1 + rework)``; a long uncheckpointed job on a
high-hazard node has a rework that grows exponentially and loses to on-demand or a block. A FAST job is a
service: interrupted, it comes back elsewhere with nothing to redo (rework 0).

**Interruptions observed.** A published rate is a prior, not the truth for the nodes one buys: every spot
node held is exposure and every preemption an observation. ``interruption_calibration`` compares the
preemptions seen on all the spot capacity held with the number its published hazards predicted over the
node-hours held, as a Gamma-Poisson posterior mean of their ratio with the published rates counted as
``prior`` interruptions of evidence: ``(prior + seen) / (prior + expected)``. Every published hazard is
priced times that factor: 1 with no history; with much, what the market actually does (none seen where a
hundred were due: spot is priced nearly safe; three times as many: three times the hazard). One factor for
all shapes, because the shapes one happens to hold are few per shape but share a market.

**A service's wait.** A FAST job is a service: an interruption costs it no work but the time until it runs
again, a node's boot. ``expected_downtime_s`` is the boot it waits for first (when its host must be
bought) and one restart per interruption expected over its run, each at the seller's mean time to READY
(``expected_boot_s``: the boots seen, with the kind's usual boot, ``BOOT_PRIORS_S``, counted as one). A
long service on a VM
interrupted five times a day waits five VM boots; on a pod a fifth of that; on demand, one.

**What an interruption teaches.** A duration is an estimate; a FLEX run that was interrupted after doing
``w`` work units proves the job needs more than ``w`` (it had not finished). ``known_work_s`` is the
estimate raised to the most work one interrupted run did, and that is the duration the rework is priced
on: a job told "13 hours" that has just lost a 24-hour run on spot is priced as the day-long job it is,
and goes where a restart does not redo a day of work.

**Contract length.** ``choose_contract`` prices each length the seller sells (SFCompute: the durations its
book lists, or the hours the queued jobs need; an hourly seller: an open-ended lease billed per unit,
``hourly``) as the commitment plus the forecast demand it leaves uncovered, bought at the cheapest
alternative: ``price x GPUs x hours + alternative x (forecast - covered)``. The forecast is the queued
work of the jobs the purchase is for, plus the steady part of recent arrivals (``steady_rate``: the
smallest hourly arrival rate of the last hours) over the forecast horizon. The cheapest wins, ties to the
shorter: a shorter contract that covers the forecast always beats a longer one at the same rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from scalar.domain.errors import InvalidSpecError, UnknownGpuModelError
from scalar.domain.gpus import relative_throughput
from scalar.domain.money import usd_fixed_plain
from scalar.domain.offers import AWS, AZURE, GCP, PRIME, RUNPOD, SFCOMPUTE, Offer
from scalar.domain.tier import Tier

DEFAULT_INTERRUPTION_RATE = 0.10  # the seed's rate where a seller publishes none (domain.arbitrage)
HOURS_PER_MONTH = 730.0  # the Spot Advisor's bands are monthly probabilities
MAX_REWORK = 1e6  # beyond this the job practically never finishes on the offer


def work_rate(gpu_model: str | None, tier: Tier) -> float:
    """Work units one GPU-hour of ``gpu_model`` does for a job of ``tier``: its relative throughput for FLEX
    (batch work runs faster on a faster GPU), 1 for FAST (a service holds its GPU for its wall time) and for
    a model the registry does not know."""
    if tier is not Tier.FLEX or not gpu_model:
        return 1.0
    try:
        rate = relative_throughput(gpu_model)
    except UnknownGpuModelError:
        return 1.0
    return rate if math.isfinite(rate) and rate > 0 else 1.0


def hazard_per_hour(
    offer: Offer,
    *,
    period_hours: float = HOURS_PER_MONTH,
    unpublished_rate: float = DEFAULT_INTERRUPTION_RATE,
) -> float:
    """Interruptions per hour of a node of ``offer``: 0 unless spot; ``-ln(1 - p) / period_hours``."""
    if not offer.spot:
        return 0.0
    p = unpublished_rate if offer.interruption_rate is None else offer.interruption_rate
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return math.inf
    return -math.log1p(-p) / period_hours


DEFAULT_INTERRUPTION_PRIOR = 5.0  # interruptions of evidence the published rates count as


def interruption_calibration(seen: int, expected: float, prior: float) -> float:
    """The factor the published hazards are priced at: ``seen`` preemptions where the published hazards
    predicted ``expected`` over the node-hours held, the published rates counted as ``prior`` interruptions
    of evidence (``prior`` infinite: 1, the published rates whatever was seen)."""
    if not math.isfinite(prior) or prior <= 0.0:
        return 1.0
    return (prior + max(0, seen)) / (prior + max(0.0, expected))


DEFAULT_BOOT_S = 300.0  # a node's time to READY assumed of a seller before any of its boots was seen
# What a seller's kind of capacity usually takes to be READY, before any of its boots was seen: containers
# on a host already up (pods), a cloud VM with its GPU drivers and image, a bare-metal node.
BOOT_PRIORS_S: dict[str, float] = {
    PRIME: 120.0,
    RUNPOD: 120.0,
    AWS: 300.0,
    AZURE: 300.0,
    GCP: 300.0,
    SFCOMPUTE: 600.0,
}


def expected_boot_s(provider: str, seen: int, total_s: float) -> float:
    """A seller's mean time from purchase to READY: ``seen`` boots taking ``total_s`` in all, with its prior
    (``BOOT_PRIORS_S``, else ``DEFAULT_BOOT_S``) counted as one more."""
    prior_s = BOOT_PRIORS_S.get(provider, DEFAULT_BOOT_S)
    return (prior_s + max(0.0, total_s)) / (1 + max(0, seen))


def expected_downtime_s(hazard: float, run_hours: float, boot_s: float, *, first_boot: bool) -> float:
    """A service's expected time without a node over its run: its first boot (``first_boot``: its host must
    be bought) and a restart after each interruption expected (``hazard`` per hour over ``run_hours``)."""
    restarts = max(0.0, hazard) * max(0.0, run_hours) if math.isfinite(hazard) else math.inf
    return max(0.0, boot_s) * ((1.0 if first_boot else 0.0) + restarts)


def time_held_s(spans: Sequence[tuple[float, float]]) -> float:
    """Seconds covered by at least one of ``spans`` (``(start, end)`` seconds; a gang's parts overlap):
    the time a job was running, so that its age less this is the time it has waited."""
    held = 0.0
    reach = -math.inf
    for start, end in sorted(spans):
        if end <= reach:
            continue
        held += end - max(start, reach)
        reach = end
    return held


def rework_fraction(hazard: float, run_hours: float, checkpoint_hours: float | None) -> float:
    """The expected work redone per unit of work (0: none) for a run of ``run_hours`` that checkpoints every
    ``checkpoint_hours`` (``None``: never) on a node interrupted ``hazard`` times per hour."""
    if hazard <= 0.0 or run_hours <= 0.0:
        return 0.0
    segment = run_hours if checkpoint_hours is None else min(checkpoint_hours, run_hours)
    x = hazard * segment
    if x > math.log(MAX_REWORK):
        return MAX_REWORK
    if x < 1e-9:
        return x / 2.0  # the series of (e^x - 1) / x - 1 near 0
    return math.expm1(x) / x - 1.0


def known_work_s(expected_s: float, longest_run_s: float) -> float:
    """The work a job is expected to need, in reference seconds: its estimate ``expected_s`` while no run
    has outlived it; once a run did ``longest_run_s`` > ``expected_s`` of work and was interrupted before
    the end, the estimate is proven wrong and the job is expected to need as much again as that run did:
    ``2 x longest_run_s`` (of a length known only to exceed ``L``, with no scale of its own, ``2L`` is the
    median: P(W > x | W > L) = L / x). Pricing it at ``L`` alone kept a job whose runs never reached its
    end on spot for ever: each lost run raised its length only to what that run had reached."""
    if longest_run_s <= expected_s:
        return expected_s
    return 2.0 * longest_run_s


def run_work_s(ran_s: float, gpu_model: str | None, tier: Tier) -> float:
    """Work units (reference seconds) a run of ``ran_s`` wall seconds on ``gpu_model`` did for a job of
    ``tier`` (``work_rate``; a FAST service's wall time)."""
    return max(0.0, ran_s) * work_rate(gpu_model, tier)


@dataclass(frozen=True, slots=True)
class JobCost:
    """What one job is expected to cost per work unit on an offer's shape, and the numbers behind it."""

    per_work_hour: Decimal  # host cost per hour / work rate x (1 + rework)
    rate: float  # work units per GPU-hour
    hazard: float  # interruptions per hour
    run_hours: float  # the job's expected run time on the model
    rework: float  # expected rework fraction
    commitment: Commitment | None = None  # a block paid whole: what its idle time adds (``with_commitment``)

    def describe(self) -> str:
        parts = [f"{usd_fixed_plain(self.per_work_hour, 4)}/work-h"]
        if self.rate != 1.0:
            parts.append(f"throughput {self.rate:.2f}x")
        if self.rework > 0:
            parts.append(
                f"{self.hazard:.3f} interruptions/h over {self.run_hours:.1f} h: +{self.rework:.0%} rework"
            )
        if self.commitment is not None and self.commitment.factor > 1.0:
            parts.append(self.commitment.describe())
        return ", ".join(parts)

    def with_commitment(self, commitment: Commitment) -> JobCost:
        """This cost on a block paid whole: the hourly share times ``commitment.factor``."""
        per_work = self.per_work_hour * Decimal(repr(commitment.factor))
        return JobCost(per_work, self.rate, self.hazard, self.run_hours, self.rework, commitment)


@dataclass(frozen=True, slots=True)
class Commitment:
    """What a block paid whole costs a job beyond its share of the nodes while it runs: the block's
    ``hours`` are paid whatever runs on them; the jobs it is bought for and the forecast arrivals fill
    ``utilisation`` of its GPU-hours, while those jobs, running, use ``density`` of its GPUs (their share
    of the nodes, which the hourly price already charges). ``factor`` = max(1, density / utilisation): 1
    when the forecast fills the block as well as the jobs fill its nodes; ``hours / run hours`` for a lone
    job with no arrivals forecast (a 2-minute job on a 1-hour block pays 30x its share)."""

    hours: float
    utilisation: float
    density: float

    @property
    def factor(self) -> float:
        if self.utilisation * MAX_REWORK <= self.density:
            return MAX_REWORK  # (almost) nothing of the block is used: as good as never worth it
        return max(1.0, self.density / self.utilisation)

    def describe(self) -> str:
        return (
            f"a {self.hours:g} h block paid whole, {self.utilisation:.0%} of it used by the forecast: "
            f"x{self.factor:.2f} its share while it runs"
        )


def expected_job_cost(
    cost_per_hour: Decimal,
    offer: Offer,
    tier: Tier,
    *,
    expected_s: float,
    checkpoint_s: float | None,
    period_hours: float = HOURS_PER_MONTH,
    unpublished_rate: float = DEFAULT_INTERRUPTION_RATE,
    hazard: float | None = None,
) -> JobCost:
    """A job's expected cost per work unit on ``offer`` (``cost_per_hour``: its share of the nodes holding
    it, ``procurement.hosting_cost_per_hour``): divided by the work rate, times ``1 + rework``. A FAST job
    never pays rework (a service restarts elsewhere with nothing to redo). ``hazard``: the interruptions
    per hour to price with (the published one times ``interruption_calibration``); ``None``: the offer's
    published one."""
    rate = work_rate(offer.gpu_model, tier)
    run_hours = max(0.0, expected_s) / 3600.0 / rate
    if hazard is None or not offer.spot:
        hazard = hazard_per_hour(offer, period_hours=period_hours, unpublished_rate=unpublished_rate)
    rework = 0.0
    if tier is Tier.FLEX:
        rework = rework_fraction(hazard, run_hours, None if checkpoint_s is None else checkpoint_s / 3600.0)
    per_work = cost_per_hour / Decimal(repr(rate)) * Decimal(repr(1.0 + rework))
    return JobCost(per_work, rate, hazard, run_hours, rework)


# ---- contract length -----------------------------------------------------------------------------------

HOURLY = 0  # an open-ended lease billed per unit (no commitment beyond the running time)


@dataclass(frozen=True, slots=True)
class Forecast:
    """The demand a purchase would serve, in GPU-hours of the block's model: the queued jobs' run hours
    (each job's GPUs x its expected hours on the model) and the steady arrival rate (GPU-hours per hour)
    expected for ``horizon_hours``."""

    queued: tuple[tuple[int, float], ...]  # (GPUs, run hours) per job the purchase is for
    rate_gpu_hours_per_hour: float = 0.0
    horizon_hours: float = 0.0

    def __post_init__(self) -> None:
        for name, value in (("rate", self.rate_gpu_hours_per_hour), ("horizon", self.horizon_hours)):
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(name, f"must be a finite number >= 0, got {value}")
        for gpus, hours in self.queued:
            if gpus < 0 or not (math.isfinite(hours) and hours >= 0):
                raise InvalidSpecError("queued", f"a job needs >= 0 GPUs for >= 0 hours, got {gpus}, {hours}")

    def total(self) -> float:
        return sum(g * h for g, h in self.queued) + self.rate_gpu_hours_per_hour * self.horizon_hours

    def covered(self, gpus: int, hours: float) -> float:
        """GPU-hours of the forecast ``gpus`` GPUs held for ``hours`` can serve (never more than they hold)."""
        queued = sum(g * min(h, hours) for g, h in self.queued)
        arriving = self.rate_gpu_hours_per_hour * min(hours, self.horizon_hours)
        return min(gpus * hours, queued + arriving)

    def longest_hours(self) -> float:
        return max((h for _, h in self.queued), default=0.0)


@dataclass(frozen=True, slots=True)
class ContractOption:
    """One contract length priced against the forecast: ``hours`` (``HOURLY``: open-ended), the commitment,
    the forecast it covers, and the expected total (commitment + the rest at the alternative's price)."""

    hours: float
    committed: Decimal
    covered_gpu_hours: float
    expected_total: Decimal

    @property
    def label(self) -> str:
        return "hourly" if self.hours == HOURLY else f"{self.hours:g} h"

    def utilisation(self, gpus: int) -> float:
        if self.hours == HOURLY:
            return 1.0
        return self.covered_gpu_hours / (gpus * self.hours) if gpus and self.hours else 0.0


@dataclass(frozen=True, slots=True)
class ContractChoice:
    chosen: ContractOption
    alternatives: tuple[ContractOption, ...]  # the others, cheapest first
    forecast_gpu_hours: float

    def text(self, gpus: int) -> str:
        c = self.chosen
        beat = "; ".join(f"{a.label} {usd_fixed_plain(a.expected_total)}" for a in self.alternatives[:4])
        head = (
            f"{c.label} contract: expected {usd_fixed_plain(c.expected_total)} for a forecast of "
            f"{self.forecast_gpu_hours:.1f} GPU-h, utilisation {c.utilisation(gpus):.0%}"
        )
        return f"{head} (beat {beat})" if beat else head


def choose_contract(
    *,
    gpus: int,
    price_per_gpu_hour: Decimal,
    lengths_hours: Sequence[float],
    forecast: Forecast,
    alternative_per_gpu_hour: Decimal | None = None,
) -> ContractChoice:
    """The contract length with the least expected cost for ``gpus`` GPUs at ``price_per_gpu_hour``.

    ``lengths_hours``: the lengths the seller sells (``HOURLY`` for an open-ended hourly lease, which
    commits only the forecast it serves). A length shorter than the longest queued job is not offered (the
    job could not finish on it). Demand a length does not cover is bought at ``alternative_per_gpu_hour``
    (default: this price). Ties go to the shorter contract."""
    if gpus < 1:
        raise InvalidSpecError("gpus", f"must be at least 1, got {gpus}")
    if not lengths_hours:
        raise InvalidSpecError("lengths_hours", "give at least one contract length")
    alt = price_per_gpu_hour if alternative_per_gpu_hour is None else alternative_per_gpu_hour
    total = forecast.total()
    longest = forecast.longest_hours()
    options: list[ContractOption] = []
    for hours in sorted(set(lengths_hours)):
        if hours < 0 or not math.isfinite(hours):
            raise InvalidSpecError("lengths_hours", f"lengths must be >= 0 hours, got {hours}")
        if hours == HOURLY:
            # An open-ended lease pays only while it serves: the forecast, at this price.
            cost = price_per_gpu_hour * Decimal(repr(total))
            options.append(ContractOption(HOURLY, Decimal(0), total, cost))
            continue
        if hours + 1e-9 < longest:
            continue
        covered = forecast.covered(gpus, hours)
        committed = price_per_gpu_hour * gpus * Decimal(repr(hours))
        rest = Decimal(repr(max(0.0, total - covered)))
        options.append(ContractOption(hours, committed, covered, committed + alt * rest))
    if not options:  # every length is shorter than the longest job: the longest length that exists
        hours = max(lengths_hours)
        covered = forecast.covered(gpus, hours)
        committed = price_per_gpu_hour * gpus * Decimal(repr(hours))
        options.append(ContractOption(hours, committed, covered, committed))
    ranked = sorted(options, key=lambda o: (o.expected_total, o.hours))
    return ContractChoice(ranked[0], tuple(ranked[1:]), total)


def steady_rate(hourly_gpu_hours: Sequence[float]) -> float:
    """The steady part of recent arrivals: the smallest of the last hours' arrived GPU-hours per hour (a
    burst in one hour does not count as sustained demand; an hour without arrivals makes it 0)."""
    return min(hourly_gpu_hours) if hourly_gpu_hours else 0.0
