"""Seed 002's spot-price arbitrage: which offer one workload should take, and why.

``find_optimal_placement(requirements, prices)`` applies the seed's filters (in a stated order), its region
preference with fallback, a score, and returns the winner with its top three alternatives. Two scorers:

* ``seed``: the seed's ``calculateScore`` exactly, apart from its JavaScript truthiness bugs. Its price term
  is ``max(0, 100 - price_per_hour * 10)``, which is 0 for every offer above $10/h, i.e. every multi-GPU
  instance: it cannot tell an $18/h 8xH100 from a $55/h one.
* ``default``: price per requested GPU-hour (per instance-hour when the workload needs no GPU) through a
  fixed monotone transform, combined with availability and efficiency. No term depends on the other
  candidates, so adding or removing a third offer never changes how two offers compare.

See docs/seeds/002-arbitrage.md for every deviation from the seed and the test that pins it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from scalar.domain.errors import DomainError, InvalidSpecError
from scalar.domain.gpus import canonical_gpu_model as canonical_gpu_model  # the registry's; re-exported
from scalar.domain.money import usd_cents_plain, usd_exact
from scalar.domain.offers import Offer
from scalar.domain.reasons import Reason

# The seed's ``interruptionRate || 0.1``: a rate nobody published counts as 10%.
DEFAULT_INTERRUPTION_RATE = 0.1

SCORER_DEFAULT = "default"
SCORER_SEED = "seed"
SCORERS = (SCORER_DEFAULT, SCORER_SEED)

# Default scorer: price term = 100 * P_REF / (P_REF + price); it is 50 at P_REF and strictly decreasing.
PRICE_REFERENCE_PER_UNIT_HOUR = Decimal("2.00")
DEFAULT_WEIGHTS = (0.6, 0.3, 0.1)  # price, availability, efficiency (each term on 0..100)
SEED_WEIGHTS = (0.5, 0.3, 0.2)

ALTERNATIVES = 3


def effective_interruption_rate(offer: Offer) -> float:
    """The published rate, or the seed's 10% when none is published. A published 0 stays 0."""
    return DEFAULT_INTERRUPTION_RATE if offer.interruption_rate is None else offer.interruption_rate


@dataclass(frozen=True, slots=True)
class WorkloadRequirements:
    """The seed's ``WorkloadRequirements``. ``None`` means "no limit"; 0 is a real limit.

    ``gpu_count`` None or 0 means the workload needs no GPU (GPU offers still pass, but their GPUs are
    not a discount). ``network_bandwidth_gbps`` is accepted and reported, never filtered on: offers carry
    no bandwidth figure.
    """

    min_cpu: float = 0.0
    min_memory_gb: float = 0.0
    gpu_count: float | None = None
    gpu_type: str | None = None
    preferred_regions: tuple[str, ...] = ()
    max_price_per_hour: Decimal | None = None
    max_interruption_rate: float | None = None
    network_bandwidth_gbps: float | None = None

    def __post_init__(self) -> None:
        for name, value in (
            ("minCPU", self.min_cpu),
            ("minMemoryGB", self.min_memory_gb),
            ("gpuCount", self.gpu_count),
            ("networkBandwidthGbps", self.network_bandwidth_gbps),
        ):
            if value is not None and (not math.isfinite(value) or value < 0):
                raise InvalidSpecError(name, f"must be a finite number >= 0, got {value}")
        if self.gpu_type is not None and not self.gpu_type.strip():
            raise InvalidSpecError("gpuType", "must name a GPU model", "omit gpuType to accept any GPU")
        if self.max_price_per_hour is not None and (
            not self.max_price_per_hour.is_finite() or self.max_price_per_hour < 0
        ):
            raise InvalidSpecError("maxPricePerHour", f"must be >= 0, got {self.max_price_per_hour}")
        rate = self.max_interruption_rate
        if rate is not None and not (0.0 <= rate <= 1.0):
            raise InvalidSpecError("maxInterruptionRate", f"must be between 0 and 1, got {rate}")

    @property
    def needs_gpus(self) -> bool:
        return (self.gpu_count is not None and self.gpu_count > 0) or self.gpu_type is not None


@dataclass(frozen=True, slots=True)
class Placement:
    """One scored offer: the winner or an alternative (each carries its own score and price)."""

    offer: Offer
    score: float

    @property
    def provider(self) -> str:
        return self.offer.provider

    @property
    def region(self) -> str:
        return self.offer.region

    @property
    def availability_zone(self) -> str | None:
        return self.offer.availability_zone

    @property
    def instance_type(self) -> str:
        return self.offer.instance_type

    @property
    def price_per_hour(self) -> Decimal:
        return self.offer.price_per_hour

    @property
    def price_per_gpu_hour(self) -> Decimal | None:
        return self.offer.price_per_gpu_hour


@dataclass(frozen=True, slots=True)
class FilterCount:
    """How many offers one filter removed (each offer counts against the first filter it fails)."""

    name: str  # the seed's requirement field: minCPU, minMemoryGB, gpuCount, gpuType, ...
    removed: int
    rule: str  # "at least 96 vCPUs"


@dataclass(frozen=True, slots=True)
class PlacementDecision:
    """The seed's ``PlacementDecision`` plus the offer itself, the scorer and the reasons."""

    provider: str
    region: str
    availability_zone: str | None
    instance_type: str
    price_per_hour: Decimal
    score: float
    alternatives: tuple[Placement, ...]
    offer: Offer
    scorer: str
    considered: int
    removed_by: tuple[FilterCount, ...]
    region_fallback: bool
    reasons: tuple[Reason, ...]

    @property
    def price_per_gpu_hour(self) -> Decimal | None:
        return self.offer.price_per_gpu_hour


class NoSuitableInstanceError(DomainError):
    """No offer passes every filter. Says how many each filter removed and what to relax."""

    def __init__(self, considered: int, removed_by: tuple[FilterCount, ...], suggestions: tuple[str, ...]):
        self.considered = considered
        self.removed_by = removed_by
        self.suggestions = suggestions
        if considered == 0:
            message = "No suitable instances available for requirements: no price records were given."
        else:
            counts = "; ".join(f"{f.name} ({f.rule}) removed {f.removed}" for f in removed_by)
            message = (
                f"No suitable instances available for requirements: none of {considered} offers passes "
                f"every filter. In filter order, each offer counted once: {counts}."
            )
        super().__init__(message, "; or ".join(suggestions) if suggestions else None)


# ---- filters --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Filter:
    name: str
    rule: str
    passes: Callable[[Offer], bool]
    relax: Callable[[Sequence[Offer]], str]


def _num(value: float) -> str:
    return f"{value:g}"


def _where(offer: Offer) -> str:
    zone = f"/{offer.availability_zone}" if offer.availability_zone else ""
    return f"{offer.provider} {offer.instance_type} in {offer.region}{zone}"


def _relax_price(offers: Sequence[Offer]) -> str:
    cheapest = min(offers, key=lambda o: (o.price_per_hour, o.key))
    return (
        f"raise maxPricePerHour to {usd_exact(cheapest.price_per_hour)} "
        f"(cheapest otherwise-fitting offer: {_where(cheapest)})"
    )


def _relax_interruption(offers: Sequence[Offer]) -> str:
    safest = min(offers, key=lambda o: (effective_interruption_rate(o), o.price_per_hour, o.key))
    return (
        f"raise maxInterruptionRate to {_num(effective_interruption_rate(safest))} "
        f"(most reliable otherwise-fitting offer: {_where(safest)})"
    )


def _filters(req: WorkloadRequirements) -> tuple[_Filter, ...]:
    """The seed's filters in the order they are counted: hardware fit first, then budget, then risk."""
    out = [
        _Filter(
            "minCPU",
            f">= {_num(req.min_cpu)} vCPUs",
            lambda o: o.vcpu >= req.min_cpu,
            lambda os: f"lower minCPU to {_num(max(o.vcpu for o in os))}",
        ),
        _Filter(
            "minMemoryGB",
            f">= {_num(req.min_memory_gb)} GB memory",
            lambda o: o.memory_gb >= req.min_memory_gb,
            lambda os: f"lower minMemoryGB to {_num(max(o.memory_gb for o in os))}",
        ),
    ]
    if req.gpu_count is not None:
        need = req.gpu_count
        out.append(
            _Filter(
                "gpuCount",
                f">= {_num(need)} GPUs",
                lambda o: o.gpu_count >= need,
                lambda os: f"lower gpuCount to {_num(max(o.gpu_count for o in os))}",
            )
        )
    if req.gpu_type is not None:
        want = canonical_gpu_model(req.gpu_type)
        out.append(
            _Filter(
                "gpuType",
                f"GPU model {want}",
                lambda o: o.gpu_model is not None and canonical_gpu_model(o.gpu_model) == want,
                lambda os: (
                    "set gpuType to "
                    + " or ".join(sorted({canonical_gpu_model(o.gpu_model or "") for o in os}))
                    + " (or omit it)"
                ),
            )
        )
    if req.max_price_per_hour is not None:
        cap = req.max_price_per_hour
        out.append(
            _Filter(
                "maxPricePerHour",
                f"<= {usd_exact(cap)}/h",
                lambda o: o.price_per_hour <= cap,
                _relax_price,
            )
        )
    if req.max_interruption_rate is not None:
        limit = req.max_interruption_rate
        out.append(
            _Filter(
                "maxInterruptionRate",
                f"interruption rate <= {_num(limit)}, unpublished = {DEFAULT_INTERRUPTION_RATE}",
                lambda o: effective_interruption_rate(o) <= limit,
                _relax_interruption,
            )
        )
    return tuple(out)


def _suggestions(
    filters: Sequence[_Filter], failed: Sequence[tuple[Offer, tuple[int, ...]]]
) -> tuple[str, ...]:
    """What to relax: per filter, the change that lets the closest offer failing only it through."""
    if not failed:
        return ("supply at least one price record",)
    fewest = min(len(f) for _, f in failed)
    if fewest == 1:
        out = []
        for i, flt in enumerate(filters):
            only_this = [o for o, f in failed if f == (i,)]
            if only_this:
                out.append(flt.relax(only_this))
        return tuple(out)
    # No single change is enough: name every change the cheapest nearest offer needs.
    offer, fails = min(
        ((o, f) for o, f in failed if len(f) == fewest), key=lambda of: (of[0].price_per_hour, of[0].key)
    )
    changes = " and ".join(filters[i].relax([offer]) for i in fails)
    return (f"no single change is enough; for {_where(offer)}: {changes}",)


# ---- scores ---------------------------------------------------------------------------------------------


def _efficiency(requested: float, offered: float) -> float:
    """The seed's ``min(1, requested / offered)``; an offer with 0 of it wastes nothing (seed: NaN)."""
    if offered <= 0:
        return 1.0
    return min(1.0, requested / offered)


def seed_score(offer: Offer, req: WorkloadRequirements) -> float:
    """The seed's ``calculateScore``, exact apart from the missing-vs-zero interruption rate fix."""
    price_score = max(0.0, 100.0 - float(offer.price_per_hour) * 10.0)
    availability_score = (1.0 - effective_interruption_rate(offer)) * 100.0
    efficiency = (_efficiency(req.min_cpu, offer.vcpu) + _efficiency(req.min_memory_gb, offer.memory_gb)) / 2
    efficiency_score = efficiency * 50.0
    w_price, w_avail, w_eff = SEED_WEIGHTS
    return price_score * w_price + availability_score * w_avail + efficiency_score * w_eff


def price_basis_per_hour(offer: Offer, req: WorkloadRequirements) -> Decimal:
    """What the default scorer prices: dollars per requested GPU-hour.

    With ``gpuCount`` given, the instance price divided by the GPUs asked for (GPUs beyond the request
    are paid for but not used, so they are no discount); with only ``gpuType`` given, the offer's own
    $/GPU-hour; for a workload that needs no GPU (or a CPU-only offer), $/instance-hour.
    """
    if req.gpu_count is not None and req.gpu_count > 0:
        return offer.price_per_hour / Decimal(str(req.gpu_count))
    if req.gpu_type is not None and offer.gpu_count > 0:
        return offer.price_per_hour / Decimal(str(offer.gpu_count))
    return offer.price_per_hour


def price_score(price_per_unit_hour: Decimal) -> float:
    """A fixed, strictly decreasing map of $/unit-hour onto (0, 100]: 100 at $0, 50 at $2, 20 at $8."""
    p = float(price_per_unit_hour)
    ref = float(PRICE_REFERENCE_PER_UNIT_HOUR)
    return 100.0 * ref / (ref + max(0.0, p))


def combine_default_score(
    price_per_unit_hour: Decimal, interruption_rate: float | None, efficiency: float
) -> float:
    """The default score from its three inputs; shared with procurement so both rank alike."""
    rate = DEFAULT_INTERRUPTION_RATE if interruption_rate is None else interruption_rate
    w_price, w_avail, w_eff = DEFAULT_WEIGHTS
    return (
        w_price * price_score(price_per_unit_hour)
        + w_avail * (1.0 - rate) * 100.0
        + w_eff * max(0.0, min(1.0, efficiency)) * 100.0
    )


def default_score(offer: Offer, req: WorkloadRequirements) -> float:
    efficiency = (_efficiency(req.min_cpu, offer.vcpu) + _efficiency(req.min_memory_gb, offer.memory_gb)) / 2
    return combine_default_score(price_basis_per_hour(offer, req), offer.interruption_rate, efficiency)


_SCORERS: dict[str, Callable[[Offer, WorkloadRequirements], float]] = {
    SCORER_DEFAULT: default_score,
    SCORER_SEED: seed_score,
}


def score_offer(offer: Offer, req: WorkloadRequirements, scorer: str = SCORER_DEFAULT) -> float:
    try:
        fn = _SCORERS[scorer]
    except KeyError:
        raise InvalidSpecError(
            "scorer", f"unknown scorer {scorer!r}", f"use one of {', '.join(SCORERS)}"
        ) from None
    return fn(offer, req)


def _rank_key(placement: Placement) -> tuple[object, ...]:
    """Higher score first. Ties: cheaper per hour, the offer's key, the newest observation, then the
    remaining figures (more reliable, a published rate, more GPUs, CPUs, memory), so the order of the input never matters.
    """
    o = placement.offer
    newest = -o.observed_at.timestamp() if o.observed_at is not None else 0.0
    return (
        -placement.score,
        o.price_per_hour,
        o.key,
        o.observed_at is None,
        newest,
        effective_interruption_rate(o),
        o.interruption_rate is None,
        -o.gpu_count,
        -o.vcpu,
        -o.memory_gb,
        -o.gpu_memory_gb,
        o.gpu_model or "",
    )


# ---- the decision ---------------------------------------------------------------------------------------


def find_optimal_placement(
    requirements: WorkloadRequirements, prices: Sequence[Offer], scorer: str = SCORER_DEFAULT
) -> PlacementDecision:
    """Seed 002's ``findOptimalPlacement``: filter, prefer regions (with fallback), score, pick, explain.

    Raises ``NoSuitableInstanceError`` when no offer passes every filter.
    """
    if scorer not in _SCORERS:
        raise InvalidSpecError("scorer", f"unknown scorer {scorer!r}", f"use one of {', '.join(SCORERS)}")
    filters = _filters(requirements)
    removed = [0] * len(filters)
    passed: list[Offer] = []
    failed: list[tuple[Offer, tuple[int, ...]]] = []
    for offer in prices:
        fails = tuple(i for i, f in enumerate(filters) if not f.passes(offer))
        if fails:
            removed[fails[0]] += 1
            failed.append((offer, fails))
        else:
            passed.append(offer)
    removed_by = tuple(FilterCount(f.name, n, f.rule) for f, n in zip(filters, removed, strict=True))
    if not passed:
        raise NoSuitableInstanceError(len(prices), removed_by, _suggestions(filters, failed))

    reasons: list[Reason] = []
    pool = passed
    region_fallback = False
    preferred = requirements.preferred_regions
    if preferred:
        in_preferred = [o for o in passed if o.region in preferred]
        names = ", ".join(preferred)
        if in_preferred:
            pool = in_preferred
            reasons.append(
                Reason(
                    "preferred_region",
                    f"{len(in_preferred)} of {len(passed)} fitting offers are in the preferred regions "
                    f"({names}); only those were scored",
                    resource="region",
                    need=names,
                    have=len(in_preferred),
                )
            )
        else:
            region_fallback = True
            reasons.append(
                Reason(
                    "region_fallback",
                    f"no fitting offer in the preferred regions ({names}); "
                    f"scored all {len(passed)} fitting offers elsewhere",
                    resource="region",
                    need=names,
                    have=0,
                )
            )

    ranked = sorted((Placement(o, score_offer(o, requirements, scorer)) for o in pool), key=_rank_key)
    best = ranked[0]
    total_removed = sum(removed)
    counts = ", ".join(f"{f.name} {f.removed}" for f in removed_by)
    reasons.insert(
        0,
        Reason(
            "chosen",
            f"took {_where(best.offer)}{' (spot)' if best.offer.spot else ''} at "
            f"{usd_cents_plain(best.price_per_hour)}/h"
            + (
                f" ({usd_cents_plain(best.price_per_gpu_hour)}/GPU-h)"
                if best.price_per_gpu_hour is not None
                else ""
            )
            + f", score {best.score:.2f} by the {scorer} scorer, best of {len(ranked)} scored offers",
            resource="price_per_hour",
            have=str(best.price_per_hour),
            limit=None if requirements.max_price_per_hour is None else str(requirements.max_price_per_hour),
        ),
    )
    reasons.insert(
        1,
        Reason(
            "filtered",
            f"{len(prices)} offers considered, {total_removed} removed by filters ({counts}), {len(passed)} fit",
            resource="offers",
            need=len(prices),
            have=len(passed),
        ),
    )
    if requirements.network_bandwidth_gbps is not None:
        reasons.append(
            Reason(
                "bandwidth_not_checked",
                f"networkBandwidthGbps {_num(requirements.network_bandwidth_gbps)} was not checked: "
                "price records carry no bandwidth",
                resource="network_bandwidth_gbps",
                need=requirements.network_bandwidth_gbps,
            )
        )
    return PlacementDecision(
        provider=best.provider,
        region=best.region,
        availability_zone=best.availability_zone,
        instance_type=best.instance_type,
        price_per_hour=best.price_per_hour,
        score=best.score,
        alternatives=tuple(ranked[1 : 1 + ALTERNATIVES]),
        offer=best.offer,
        scorer=scorer,
        considered=len(prices),
        removed_by=removed_by,
        region_fallback=region_fallback,
        reasons=tuple(reasons),
    )
