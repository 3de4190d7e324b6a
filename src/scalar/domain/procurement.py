"""Procurement: the one owner of provider choice (seed 000's autoscaler integration, DESIGN.md).

Each tick the control plane asks ``rank_offers(need, offers, policy)``: which offer shapes to buy a
capacity need from, best first, each with its reasons, and every excluded offer with why. The seed's
rules, in order:

1. Fit: whole GPUs of an allowed model with enough memory, enough GPUs per node for the largest job.
2. Tier cap: FLEX pays at most ``$10.00`` per **GPU-hour** (the seed's ``max_price_per_hour = $10.0``;
   see docs/decisions/procurement.md for why per GPU-hour), FAST is uncapped. Configurable per tier.
3. Size rule: below 8 GPUs Prime Intellect (``prime``) is preferred, from 8 GPUs SFCompute
   (``sfcompute``). When the preferred provider has no offer that survives 1-2, the others are ranked by
   the arbitrage default score and the reason says so.
4. Within a preference class: preferred regions first, then the arbitrage default score (price per
   needed GPU-hour, availability, GPU efficiency).

A need may say the CPU and RAM its jobs ask for: a shape then covers it with as many nodes as the
scarcest of GPUs, CPU and RAM demands (a 20-vCPU node holds one 12-core job whatever its GPU count).
``hosting_cost_per_hour`` prices one job on one shape (the whole nodes that hold it and the alike jobs
waiting with it, as many whole jobs per node as its scarcest resource allows, shared out) and ``cost_band`` keeps the shapes within
``host_cost_tolerance`` of the cheapest: the engine routes each job only to those, and the seed's order
above decides among them (docs/decisions/procurement.md).

``priorities_for_groups`` turns the ranking into routing's group priorities (lower = preferred, Iris
style). Moving restartable jobs off underused contracts is ``scalar.domain.consolidation``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from scalar.domain.arbitrage import (
    canonical_gpu_model,
    combine_default_score,
    effective_interruption_rate,
)
from scalar.domain.contracts import (
    DEFAULT_INTERRUPTION_PRIOR,
    DEFAULT_INTERRUPTION_RATE,
    HOURS_PER_MONTH,
    work_rate,
)
from scalar.domain.errors import InvalidSpecError
from scalar.domain.money import usd_cents_plain
from scalar.domain.offers import PRIME, SFCOMPUTE, Offer
from scalar.domain.reasons import Reason
from scalar.domain.tier import Tier

BLOCK_GPUS = 8  # an SFCompute node: 8xH100
DEFAULT_FLEX_CAP_PER_GPU_HOUR = Decimal("10.0")
DEFAULT_HOST_COST_TOLERANCE = Decimal("1.10")
# A short service: expected to end before this many interruptions on the host (hazard x expected hours).
DEFAULT_SHORT_SERVICE_INTERRUPTIONS = 0.5
# A FAST service back from an interruption restarts where its wait so far plus the boot it now waits for
# (and one per interruption expected over the rest of its run) stays within this, when any host can.
DEFAULT_FAST_RESTART_WAIT_S = 600.0
DEFAULT_FAST_MAX_WAIT_S = math.inf  # no limit; 600 holds the FAST tier's ten-minute target, restarts included
# A FLEX job is not sent where it is expected to redo more than this fraction of its work (spot rework,
# contracts.rework_fraction), when any host keeps it within: 1.0, expected done within twice its run.
DEFAULT_FLEX_MAX_REWORK = 1.0


@dataclass(frozen=True, slots=True)
class CapacityNeed:
    """GPUs to procure now.

    ``gpu_count`` is the total; ``min_gpus_per_node`` is the largest single job's GPU count (a shape with
    fewer GPUs per node cannot host it; 1 treats the need as divisible demand). ``gpu_memory_gb`` is the
    minimum memory per GPU, ``gpu_models`` the allowed canonical models (empty = any).
    """

    gpu_count: int
    tier: Tier = Tier.FAST
    gpu_memory_gb: float | None = None
    gpu_models: tuple[str, ...] = ()
    min_gpus_per_node: int = 1
    preferred_regions: tuple[str, ...] = ()
    cpu_cores: float = 0.0  # total over the need's jobs (per node of a gang); 0 = not limiting
    ram_gb: float = 0.0

    def __post_init__(self) -> None:
        for name, value in (("cpu_cores", self.cpu_cores), ("ram_gb", self.ram_gb)):
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(name, f"must be a finite number >= 0, got {value}")
        if self.gpu_count < 1:
            raise InvalidSpecError("gpu_count", f"must be at least 1, got {self.gpu_count}")
        if self.min_gpus_per_node < 1:
            raise InvalidSpecError("min_gpus_per_node", f"must be at least 1, got {self.min_gpus_per_node}")
        if self.min_gpus_per_node > self.gpu_count:
            raise InvalidSpecError(
                "min_gpus_per_node",
                f"{self.min_gpus_per_node} exceeds the need's {self.gpu_count} GPUs",
            )
        if self.gpu_memory_gb is not None and not (
            math.isfinite(self.gpu_memory_gb) and self.gpu_memory_gb >= 0
        ):
            raise InvalidSpecError("gpu_memory_gb", f"must be >= 0, got {self.gpu_memory_gb}")


@dataclass(frozen=True, slots=True)
class ProcurementPolicy:
    """The seed's numbers, each configurable. Caps are USD per GPU-hour; ``None`` means uncapped."""

    flex_max_price_per_gpu_hour: Decimal | None = DEFAULT_FLEX_CAP_PER_GPU_HOUR
    fast_max_price_per_gpu_hour: Decimal | None = None
    block_gpus: int = BLOCK_GPUS
    small_provider: str = PRIME
    large_provider: str = SFCOMPUTE
    # A job is routed only to shapes hosting it within this factor of the cheapest host (``cost_band``).
    host_cost_tolerance: Decimal = DEFAULT_HOST_COST_TOLERANCE
    # A FAST job keeps the seed's size rule (the preferred provider's pods boot fastest) unless it is a short
    # service (first run, under ``short_service_interruptions`` expected interruptions on the host) and the
    # preferred provider hosts it at more than ``fast_preference_limit`` x the cheapest such host (``None``,
    # the default: the rule always holds; measured at 1.25). engine/cost_band.py.
    fast_preference_limit: Decimal | None = None
    short_service_interruptions: float = DEFAULT_SHORT_SERVICE_INTERRUPTIONS
    # A spot group hosting FAST services keeps one free slice per this many of them (0: none), so that an
    # interrupted one restarts there at once (engine/reserve.py); its restarts then cost no boot.
    fast_spare_per_services: int = 0
    # Spot hazards (domain/contracts.py): a published interruption probability is per this many hours (the
    # Spot Advisor's bands are monthly); where none is published the seed's rate is assumed.
    interruption_period_hours: float = HOURS_PER_MONTH
    unpublished_interruption_rate: float = DEFAULT_INTERRUPTION_RATE
    # The interruptions of evidence the published rates count as against the preemptions seen on the spot
    # nodes held (``contracts.interruption_calibration``); ``inf``: price with the published rates only.
    interruption_prior: float = DEFAULT_INTERRUPTION_PRIOR
    # A FAST job goes where its expected downtime (first boot, a restart per expected interruption) stays
    # within this many seconds, when any host can keep it there (``contracts.expected_downtime_s``); ``inf``,
    # the default: no limit (measured on Protocol B at 600 s: FAST p99 over 10 minutes on 3 runs of 15
    # instead of 6, at 17% more cost; docs/decisions/procurement.md). engine/cost_band.py.
    fast_max_wait_s: float = DEFAULT_FAST_MAX_WAIT_S
    # A FAST service interrupted restarts where it is expected back within what is left of this many seconds
    # of wait (its first wait and every restart's counted), when any host can bring it back so soon; else
    # where it is back soonest. ``inf``: restarts are priced like first runs. engine/cost_band.py.
    fast_restart_wait_s: float = DEFAULT_FAST_RESTART_WAIT_S
    # A FLEX job's hosts are those where its expected rework (``contracts.rework_fraction``: the work redone
    # after interruptions, per unit of work) stays within this, when any host keeps it there; ``inf``: none
    # dropped (spot is used up to where its rework eats its discount). engine/cost_band.py.
    flex_max_rework: float = DEFAULT_FLEX_MAX_REWORK

    def cap_for(self, tier: Tier) -> Decimal | None:
        return self.flex_max_price_per_gpu_hour if tier is Tier.FLEX else self.fast_max_price_per_gpu_hour

    def preferred_provider(self, gpu_count: int) -> str:
        """Seed 000: "< 8 GPUs: prefer Prime Intellect; >= 8 GPUs: use SFCompute"."""
        return self.large_provider if gpu_count >= self.block_gpus else self.small_provider


@dataclass(frozen=True, slots=True)
class RankedOffer:
    """One offer's place in the ranking. ``rank`` is 1-based for included offers, ``None`` if excluded.

    ``nodes`` instances of the shape cover the need at ``cost_per_hour``; ``price_per_gpu_hour`` is the
    offer's own quote; the score prices the need per *needed* GPU-hour (idle GPUs are paid for).
    """

    offer: Offer
    rank: int | None
    score: float | None
    price_per_gpu_hour: Decimal | None
    nodes: int
    cost_per_hour: Decimal
    preferred: bool
    reasons: tuple[Reason, ...] = field(default=())

    @property
    def included(self) -> bool:
        return self.rank is not None


def _money(value: Decimal | None) -> str:
    return "-" if value is None else usd_cents_plain(value)


def _exclusion(o: Offer, cn: CapacityNeed, cap: Decimal | None) -> Reason | None:
    """The first rule an offer breaks, as a reason with numbers; ``None`` when it may serve the need."""
    if o.gpu_count <= 0:
        return Reason("no_gpus", f"{o.instance_type} has no GPUs", resource="gpus", need=cn.gpu_count, have=0)
    if o.gpu_count != int(o.gpu_count):
        return Reason(
            "fractional_gpu",
            f"{o.instance_type} sells a fraction of a GPU ({o.gpu_count:g}); capacity needs whole GPUs",
            resource="gpus",
            have=o.gpu_count,
        )
    if cn.gpu_models:
        allowed = {canonical_gpu_model(m) for m in cn.gpu_models}
        model = canonical_gpu_model(o.gpu_model) if o.gpu_model else None
        if model not in allowed:
            names = ", ".join(sorted(allowed))
            return Reason(
                "gpu_model_not_allowed",
                f"{o.instance_type} has {model or 'an unknown GPU'}; the need allows {names}",
                resource="gpu_model",
                need=names,
                have=model,
            )
    if cn.gpu_memory_gb is not None and o.gpu_memory_gb < cn.gpu_memory_gb:
        return Reason(
            "insufficient_gpu_memory",
            f"needs GPUs with >= {cn.gpu_memory_gb:g} GB, {o.instance_type} has {o.gpu_memory_gb:g} GB",
            resource="gpu_memory_gb",
            need=cn.gpu_memory_gb,
            have=o.gpu_memory_gb,
        )
    if o.gpu_count < cn.min_gpus_per_node:
        return Reason(
            "too_few_gpus_per_node",
            f"the largest job needs {cn.min_gpus_per_node} GPUs on one node, "
            f"{o.instance_type} has {o.gpu_count:g}",
            resource="gpus_per_node",
            need=cn.min_gpus_per_node,
            have=o.gpu_count,
        )
    per_gpu = o.price_per_gpu_hour
    if cap is not None and per_gpu is not None and per_gpu > cap:
        return Reason(
            "over_tier_cap",
            f"{_money(per_gpu)}/GPU-h is over the {cn.tier.value} cap of {_money(cap)}/GPU-h",
            resource="price_per_gpu_hour",
            need=str(cap),
            have=str(per_gpu),
            limit=str(cap),
        )
    return None


def _cpu_ram_text(need: CapacityNeed) -> str:
    if need.cpu_cores <= 0 and need.ram_gb <= 0:
        return ""
    return f" ({need.cpu_cores:g} CPU cores, {need.ram_gb:g} GB RAM)"


def nodes_to_cover(need: CapacityNeed, offer: Offer) -> int:
    """Nodes of ``offer``'s shape the need fills: the most its GPUs, CPU or RAM take (at least 1)."""
    if offer.gpu_count <= 0:
        return 1
    nodes = max(1, math.ceil(need.gpu_count / offer.gpu_count))
    if need.cpu_cores > 0 and offer.vcpu > 0:
        nodes = max(nodes, math.ceil(need.cpu_cores / offer.vcpu - 1e-9))
    if need.ram_gb > 0 and offer.memory_gb > 0:
        nodes = max(nodes, math.ceil(need.ram_gb / offer.memory_gb - 1e-9))
    return nodes


def _score(offer: Offer, need: CapacityNeed, nodes: int) -> float:
    """The arbitrage default score with the need's economics: price per needed unit of work (per GPU-hour
    for FAST, divided by the model's throughput for FLEX: domain/contracts.py), GPU efficiency."""
    cost = offer.price_per_hour * nodes
    bought = nodes * offer.gpu_count
    rate = Decimal(repr(work_rate(offer.gpu_model, need.tier)))
    return combine_default_score(
        cost / Decimal(need.gpu_count) / rate, offer.interruption_rate, need.gpu_count / bought
    )


def rank_offers(need: CapacityNeed, offers: Sequence[Offer], policy: ProcurementPolicy) -> list[RankedOffer]:
    """Rank offer shapes for ``need``: included offers by rank, then excluded ones (input order).
    ``policy``: the controller's (``ControllerConfig.procurement``: the seed's numbers, the tiers' caps)."""
    cap = policy.cap_for(need.tier)
    preferred_provider = policy.preferred_provider(need.gpu_count)
    size_word = "below" if need.gpu_count < policy.block_gpus else "at least"

    included: list[tuple[Offer, int, float, Reason]] = []
    excluded: list[RankedOffer] = []
    for offer in offers:
        nodes = nodes_to_cover(need, offer)
        cost = offer.price_per_hour * nodes
        why_not = _exclusion(offer, need, cap)
        if why_not is not None:
            excluded.append(
                RankedOffer(offer, None, None, offer.price_per_gpu_hour, nodes, cost, False, (why_not,))
            )
            continue
        cap_text = "uncapped" if cap is None else f"within the {need.tier.value} cap of {_money(cap)}/GPU-h"
        fits = Reason(
            "fits",
            f"{nodes} x {offer.instance_type} ({offer.gpu_count:g} x {offer.gpu_model or 'GPU'}) covers "
            f"{need.gpu_count} GPUs{_cpu_ram_text(need)} at {_money(cost)}/h "
            f"({_money(offer.price_per_gpu_hour)}/GPU-h, {cap_text})",
            resource="gpus",
            need=need.gpu_count,
            have=nodes * offer.gpu_count,
            limit=None if cap is None else str(cap),
        )
        included.append((offer, nodes, _score(offer, need, nodes), fits))

    preferred_available = any(o.provider == preferred_provider for o, *_ in included)
    regions = need.preferred_regions

    def order(item: tuple[Offer, int, float, Reason]) -> tuple[bool, bool, float, Decimal, str]:
        o, _, score, _ = item
        return (
            o.provider != preferred_provider,
            bool(regions) and o.region not in regions,
            -score,
            o.price_per_gpu_hour or o.price_per_hour,
            o.key,
        )

    preferred_excluded = [r for r in excluded if r.offer.provider == preferred_provider]
    ranked: list[RankedOffer] = []
    for rank, (offer, nodes, score, fits) in enumerate(sorted(included, key=order), start=1):
        reasons = [fits]
        is_preferred = offer.provider == preferred_provider
        if is_preferred:
            reasons.append(
                Reason(
                    "preferred_provider",
                    f"{preferred_provider} is preferred for a need {size_word} {policy.block_gpus} GPUs "
                    f"({need.gpu_count})",
                    resource="provider",
                    need=need.gpu_count,
                    limit=policy.block_gpus,
                )
            )
        elif preferred_available:
            reasons.append(
                Reason(
                    "not_preferred",
                    f"ranked after {preferred_provider}'s offers, preferred for a need {size_word} "
                    f"{policy.block_gpus} GPUs ({need.gpu_count})",
                    resource="provider",
                    need=preferred_provider,
                    have=offer.provider,
                )
            )
        else:
            codes = Counter(r.reasons[0].code for r in preferred_excluded)
            why = (
                f"all {len(preferred_excluded)} of its offers excluded: "
                + ", ".join(f"{n} {code}" for code, n in sorted(codes.items()))
                if preferred_excluded
                else "it has no offers"
            )
            reasons.append(
                Reason(
                    "fallback",
                    f"{preferred_provider} (preferred for {need.gpu_count} GPUs) cannot serve this need "
                    f"({why}); ranked by the arbitrage default score",
                    resource="provider",
                    need=preferred_provider,
                    have=offer.provider,
                )
            )
        if regions:
            inside = offer.region in regions
            reasons.append(
                Reason(
                    "preferred_region" if inside else "outside_preferred_regions",
                    f"{offer.region} is {'in' if inside else 'outside'} the preferred regions ({', '.join(regions)})",
                    resource="region",
                    need=", ".join(regions),
                    have=offer.region,
                )
            )
        reasons.append(
            Reason(
                "score",
                f"default score {score:.2f} (rate {effective_interruption_rate(offer):g})",
                resource="score",
                have=round(score, 4),
            )
        )
        ranked.append(
            RankedOffer(
                offer,
                rank,
                score,
                offer.price_per_gpu_hour,
                nodes,
                offer.price_per_hour * nodes,
                is_preferred,
                tuple(reasons),
            )
        )
    return ranked + excluded


# ---- one job's cost on a shape -------------------------------------------------------------------------


def hosting_cost_per_hour(
    offer: Offer,
    *,
    gpu_count: int,
    cpu_cores: float = 0.0,
    ram_gb: float = 0.0,
    vram_per_gpu_gb: float = 0.0,
    share_gpu: bool = False,
    jobs: int = 1,
) -> Decimal | None:
    """What one of ``jobs`` alike jobs costs per hour on ``offer``'s shape: the whole nodes that hold all of
    them, shared out. A node holds as many whole jobs as its scarcest resource allows (GPUs, vCPUs, RAM; a
    job sharing a GPU takes its part of one GPU's memory), at least one; the jobs need
    ``ceil(jobs / per node)`` nodes. A gang (more GPUs than a node has) takes its nodes whole. ``None`` for
    a GPU-less shape.

    One job pays whole nodes (a lone 2-GPU job on an 8-GPU node pays all 8); many jobs share the nodes that
    hold them: four 2-GPU jobs fill one 8-GPU node. Jobs fit a node whole, not by fractions: 1-GPU jobs
    asking 12 cores fit a 4-GPU, 20-vCPU node one at a time, so five of them need five nodes.
    """
    if offer.gpu_count <= 0 or jobs < 1:
        return None
    gpus = int(offer.gpu_count)
    if gpu_count > gpus:  # a gang takes its nodes whole
        return offer.price_per_hour * math.ceil(gpu_count / gpus)
    if share_gpu and 0 < vram_per_gpu_gb < offer.gpu_memory_gb:
        per_node = gpus * math.floor(offer.gpu_memory_gb / vram_per_gpu_gb + 1e-9)
    else:
        per_node = gpus // max(1, gpu_count)
    if cpu_cores > 0 and offer.vcpu > 0:
        per_node = min(per_node, math.floor(offer.vcpu / cpu_cores + 1e-9))
    if ram_gb > 0 and offer.memory_gb > 0:
        per_node = min(per_node, math.floor(offer.memory_gb / ram_gb + 1e-9))
    per_node = max(
        1, per_node
    )  # a job larger than the shape is priced at a whole node (fit is checked elsewhere)
    return offer.price_per_hour * math.ceil(jobs / per_node) / jobs


def cost_band(costs: dict[str, Decimal], tolerance: Decimal = DEFAULT_HOST_COST_TOLERANCE) -> tuple[str, ...]:
    """The names whose cost is within ``tolerance`` x the cheapest, in input order (none for no costs)."""
    if not costs:
        return ()
    cheapest = min(costs.values())
    limit = cheapest * tolerance
    return tuple(name for name, cost in costs.items() if cost <= limit)


# ---- routing priorities ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScaleGroupShape:
    """A scale group's offer shape: provider x instance type x tier (``tier`` None = any tier)."""

    name: str
    provider: str
    instance_type: str
    tier: Tier | None = None


def priorities_for_groups(
    ranked: Sequence[RankedOffer],
    groups: Sequence[ScaleGroupShape],
    tier: Tier | None = None,
    excluded_priority: int | None = None,
) -> dict[str, int]:
    """``{group_name: priority}`` for routing: 1 = most preferred, dense ranks by each group's best offer.

    A group's priority comes from its best-ranked included offer of the same provider and instance type.
    Groups of another tier are left out. Groups with no included offer are left out too, unless
    ``excluded_priority`` is given: routing's default for an unset priority is 100 (Iris), so a caller
    that must never grow them marks them unavailable instead.
    """
    best: dict[tuple[str, str], int] = {}
    for r in ranked:
        if r.rank is None:
            continue
        shape = (r.offer.provider, r.offer.instance_type)
        best[shape] = min(best.get(shape, r.rank), r.rank)
    eligible = [g for g in groups if tier is None or g.tier is None or g.tier is tier]
    ranks = sorted(
        {best[(g.provider, g.instance_type)] for g in eligible if (g.provider, g.instance_type) in best}
    )
    dense = {rank: i for i, rank in enumerate(ranks, start=1)}
    out: dict[str, int] = {}
    for g in eligible:
        shape = (g.provider, g.instance_type)
        if shape in best:
            out[g.name] = dense[best[shape]]
        elif excluded_priority is not None:
            out[g.name] = excluded_priority
    return out
