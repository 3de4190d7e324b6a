"""How long a purchase commits for: each length the seller sells, priced against the demand forecast.

``size_contract`` builds the forecast a purchase would serve (``domain.contracts.Forecast``): the queued
jobs it is for (GPUs x expected hours on the group's model: FLEX work divided by the model's throughput),
plus the steady part of the arrivals of the last ``FORECAST_HOURS`` hours of jobs of the group's tier that
may run on its model (``steady_rate``: the quietest of those hours, counting only the whole hours the
controller watched: none in its first hour), expected to go on for as long again.
Then ``choose_contract`` prices the lengths:

- a block seller (SFCompute, paid whole when bought: ``domain.release.BLOCK_SELLERS``): the durations its
  book lists (1 h, 1 day, 1 week, 1 month in the built-in market) and the whole hours the queued jobs need;
  demand a block does not cover is priced at the cheapest hourly alternative of the tier (per unit of
  work, converted to the block's model);
- an hourly seller: an open-ended lease billed per unit while held (no commitment beyond the running time;
  idle nodes are released by ``domain.release.idle_hold``). The request still names a lease (the market
  ends the node then, and budgets count it): twice the longest queued job's expected run plus the
  allowances (``HOURLY_LEASE_RUNS``), at least the group's or ``config.contract_length_s``. The slack costs
  nothing (the node is paid while held and released when idle) and keeps a job that runs past its estimate
  from being cut off by its own lease; a job that outlived its estimate once is priced at twice that run
  (``domain.contracts.known_work_s``), its next lease at twice that.

The purchase's reason names the chosen length, the ones it beat and the expected utilisation, with numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from scalar.domain.contracts import (
    HOURLY,
    Commitment,
    ContractChoice,
    Forecast,
    choose_contract,
    steady_rate,
    work_rate,
)
from scalar.domain.packing_model import Job
from scalar.domain.release import BLOCK_SELLERS
from scalar.engine.config import ControllerConfig
from scalar.engine.state import ClusterState, GroupRecord, JobRecord

FORECAST_HOURS = 6  # the arrivals looked back on, and the hours ahead they are expected to go on for
FORECAST_WINDOW = timedelta(hours=FORECAST_HOURS)
DEFAULT_BOOK_HOURS = (1.0, 24.0, 168.0, 720.0)  # SFCompute's usual lengths when no book was observed
MAX_BLOCK_HOURS = 720.0  # the longest contract a block seller sells (30 days)
# An hourly lease outlives this many times the longest queued job's expected run (plus the allowances).
HOURLY_LEASE_RUNS = 2.0


@dataclass(frozen=True, slots=True)
class Sizing:
    """The request's duration and why (a clause for the purchase's reason)."""

    duration_s: int
    text: str
    choice: ContractChoice


def _may_run_on(models: tuple[str, ...] | None, model: str | None) -> bool:
    if models is None or model is None:
        return True
    return model in models  # both canonical (engine/validation.py, the catalogs)


def forecast_for(
    state: ClusterState, config: ControllerConfig, rec: GroupRecord, jobs: list[JobRecord], now: datetime
) -> Forecast:
    """The demand the purchase would serve, in GPU-hours of the group's model, in the market's time."""
    offer = rec.offer
    model = offer.gpu_model if offer is not None else None
    rate = work_rate(model, rec.tier)
    scale = config.time_scale(rec.provider)  # jobs run in the engine's time, contracts in the market's
    queued = tuple(
        (r.job.gpu_count, r.job.expected_duration_sec * scale / 3600.0 / rate)
        for r in jobs
        if r.job is not None
    )
    start = now - FORECAST_WINDOW
    hourly = [0.0] * FORECAST_HOURS
    for at, job in state.arrived_jobs:
        if at <= start or job.tier is not rec.tier or not _may_run_on(job.gpu_models, model):
            continue
        slot = min(FORECAST_HOURS - 1, int((now - at).total_seconds() // 3600))
        hourly[slot] += job.gpu_count * job.expected_duration_sec / 3600.0 / rate
    # Only the hours watched in full count: an hour before the controller's first step is unknown, not
    # quiet (a controller started three hours ago into steady arrivals sees three busy hours, not a zero).
    hourly = hourly[: observed_hours(state, now)]
    # a steady rate (GPUs busy) is the same in either clock; the hours it goes on for are the market's
    return Forecast(queued, steady_rate(hourly), float(FORECAST_HOURS) * scale)


def observed_hours(state: ClusterState, now: datetime) -> int:
    """How many of the last :data:`FORECAST_HOURS` whole hours the controller watched arrivals through."""
    if state.observed_since is None:
        return 0
    watched_s = (now - state.observed_since).total_seconds()
    return max(0, min(FORECAST_HOURS, int(watched_s // 3600)))


def alternative_price(state: ClusterState, rec: GroupRecord) -> Decimal | None:
    """The cheapest hourly seller's price per unit of work for the tier, per GPU-hour of ``rec``'s model."""
    best: Decimal | None = None
    for other in state.groups.values():
        o = other.offer
        if (
            other.tier is not rec.tier
            or o is None
            or other.excluded is not None
            or other.provider in BLOCK_SELLERS
        ):
            continue
        per_gpu = o.price_per_gpu_hour
        if per_gpu is None:
            continue
        per_work = per_gpu / Decimal(repr(work_rate(o.gpu_model, rec.tier)))
        best = per_work if best is None else min(best, per_work)
    if best is None or rec.offer is None:
        return None
    return best * Decimal(repr(work_rate(rec.offer.gpu_model, rec.tier)))


def block_lengths(state: ClusterState, rec: GroupRecord, needed_s: float, for_jobs: bool) -> list[float]:
    """The block lengths (hours) a purchase for jobs needing ``needed_s`` of the market's time may commit
    to: the durations ``rec``'s book lists (``DEFAULT_BOOK_HOURS`` when none was observed) and, when it is
    ``for_jobs``, the whole hours they need, none shorter than that."""
    book = state.books.get(rec.instance_type)
    listed = {float(a.duration_hours) for a in book.asks} if book is not None else set()
    lengths = sorted(h for h in (listed or set(DEFAULT_BOOK_HOURS)) if 1 <= h <= MAX_BLOCK_HOURS)
    if not for_jobs:
        return lengths
    needed = min(MAX_BLOCK_HOURS, max(1.0, math.ceil(needed_s / 3600.0)))
    lengths.append(needed)
    return [h for h in lengths if h >= needed] or [needed]


def block_commitment(
    state: ClusterState,
    config: ControllerConfig,
    rec: GroupRecord,
    job: Job,
    jobs: int,
    nodes: float,
    now: datetime,
    arrivals: Forecast | None = None,
    alternative: tuple[Decimal | None] | None = None,
) -> Commitment | None:
    """What buying ``rec``'s block for ``jobs`` jobs like ``job`` (held on ``nodes`` of its nodes while they
    run) commits them to beyond their share of the nodes (``domain.contracts.Commitment``): the contract
    ``size_contract`` would choose for them, against the same forecast (their run hours on the model plus
    the steady arrivals: ``arrivals``, ``forecast_for`` the group with no jobs, and ``alternative``,
    ``(alternative_price(state, rec),)``, when the caller has them), and how much of it that forecast
    fills. ``None`` for an hourly seller."""
    offer = rec.offer
    if rec.provider not in BLOCK_SELLERS or offer is None or offer.gpu_count <= 0 or jobs < 1:
        return None
    price = offer.price_per_gpu_hour
    if price is None:
        return None
    gpus = max(1, math.ceil(nodes - 1e-9)) * int(offer.gpu_count)
    scale = config.time_scale(rec.provider)
    run_h = job.expected_duration_sec * scale / 3600.0 / work_rate(offer.gpu_model, rec.tier)
    queued = ((jobs * job.gpu_count, run_h),)  # the alike jobs as one: the same GPU-hours, the same longest
    base = arrivals if arrivals is not None else forecast_for(state, config, rec, [], now)
    forecast = Forecast(queued, base.rate_gpu_hours_per_hour, base.horizon_hours)
    allowance = (config.safety_margin_s + config.request_timeout_s + config.boot_timeout_s) * scale
    choice = choose_contract(
        gpus=gpus,
        price_per_gpu_hour=price,
        lengths_hours=block_lengths(state, rec, run_h * 3600.0 + allowance, True),
        forecast=forecast,
        alternative_per_gpu_hour=alternative_price(state, rec) if alternative is None else alternative[0],
    )
    density = min(1.0, jobs * job.gpu_count / gpus)
    return Commitment(choice.chosen.hours, choice.chosen.utilisation(gpus), density)


def size_contract(
    state: ClusterState,
    config: ControllerConfig,
    rec: GroupRecord,
    nodes: int,
    price_per_gpu_hour: Decimal,
    jobs: list[JobRecord],
    now: datetime,
) -> Sizing:
    offer = rec.offer
    assert offer is not None
    gpus = nodes * int(offer.gpu_count)
    scale = config.time_scale(rec.provider)
    allowance = (config.safety_margin_s + config.request_timeout_s + config.boot_timeout_s) * scale
    forecast = forecast_for(state, config, rec, jobs, now)
    longest_s = forecast.longest_hours() * 3600.0
    if rec.provider in BLOCK_SELLERS:
        lengths = block_lengths(state, rec, longest_s + allowance, bool(jobs))
        choice = choose_contract(
            gpus=gpus,
            price_per_gpu_hour=price_per_gpu_hour,
            lengths_hours=lengths,
            forecast=forecast,
            alternative_per_gpu_hour=alternative_price(state, rec),
        )
        duration = int(choice.chosen.hours * 3600)
        return Sizing(duration, choice.text(gpus), choice)
    choice = choose_contract(
        gpus=gpus, price_per_gpu_hour=price_per_gpu_hour, lengths_hours=(HOURLY,), forecast=forecast
    )
    contract = (rec.config.contract_length_s if rec.config else None) or config.contract_length_s
    lease = max(contract, math.ceil(HOURLY_LEASE_RUNS * longest_s + allowance)) if jobs else contract
    expected_h = max(1.0, choice.chosen.covered_gpu_hours / gpus if gpus else 1.0)
    text = (
        f"hourly: billed per unit while held, {choice.forecast_gpu_hours:.1f} GPU-h forecast "
        f"(about {expected_h:.1f} h of use)"
    )
    return Sizing(lease, text, choice)
