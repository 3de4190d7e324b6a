"""Purchases: what routing launches becomes one ``BuyCapacity`` per group, at a limit price, within budgets.

``purchase_step`` plans one order per group routing launches slices in (within its node headroom), one by
one so that a budget sees the orders planned before it; the jobs it serves wait for it. It writes nothing:
its answer is a ``PurchasePlan`` (engine/pass_outcomes.py) that the pass records at its end
(``autoscaler._apply``), and what it decides about each job goes into the pass's ``Outcomes``.

``limit_price``: the orderbook's optimal price (``analyze_orderbook``) for ``node_count x gpus_per_node`` GPUs
where the provider publishes a book, the offer's price otherwise. A FLEX purchase never goes above the FLEX
cap: when the optimal level is above it, the book is analysed again with only the asks within the cap, and
if those cannot cover the need the demand waits (a ``Reason`` instead of a ``Price``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal

from scalar.domain.errors import DomainError
from scalar.domain.market import CapacityRequest
from scalar.domain.money import usd
from scalar.domain.orderbook import analyze_orderbook
from scalar.domain.packing_text import fmt_duration, fmt_num
from scalar.domain.reasons import Reason
from scalar.domain.routing_model import RoutingDecision
from scalar.domain.tier import Tier
from scalar.engine.budget import fit_launch
from scalar.engine.config import ControllerConfig
from scalar.engine.contract_sizing import size_contract
from scalar.engine.groups import base_of, node_headroom
from scalar.engine.lifecycle import OrderStatus
from scalar.engine.pass_outcomes import JobOutcome, Outcomes, PlannedOrder, PurchasePlan
from scalar.engine.scheduler import need_text
from scalar.engine.state import ClusterState, GroupRecord, JobRecord

NO_PRICE = "no_price"


@dataclass(frozen=True, slots=True)
class Price:
    """A limit price, a short note for the purchase's reason, and the full why (told in the order's story)."""

    per_gpu_hour: Decimal
    note: str
    reason: Reason


def limit_price(
    state: ClusterState, rec: GroupRecord, gpus: int, cap: Decimal | None, spot_headroom: float = 0.0
) -> Price | Reason:
    """The limit of a purchase: an orderbook's optimal level; a fixed price as offered, a spot price (which
    moves between two observations of the market) that plus ``spot_headroom`` of it, never over the tier's
    cap. The seller charges its price at the fill, never more than the limit."""
    offer = rec.offer
    assert offer is not None
    book = state.books.get(rec.instance_type)
    if book is not None and book.provider == rec.provider:
        try:
            analysis = analyze_orderbook(book.asks, book.bids, gpus)
        except DomainError as err:
            return Reason(
                "bad_book", f"the {rec.instance_type} book at {rec.provider} is unusable: {err.message}"
            )
        price = analysis.optimal_price_per_gpu_hour
        if price is None:
            return Reason(
                NO_PRICE, f"the {rec.instance_type} book at {rec.provider} has no asks", "asks", gpus, 0
            )
        note = f"optimal level {analysis.optimal_index} of the {rec.instance_type} book"
        if analysis.insufficient_liquidity:
            note += f", which holds only {analysis.total_ask_liquidity} of {gpus} GPUs"
        if cap is not None and price > cap:
            within = tuple(a for a in book.asks if a.price_per_gpu_hour <= cap)
            capped = analyze_orderbook(within, (), gpus) if within else None  # asks already checked above
            if capped is None or capped.insufficient_liquidity or capped.optimal_price_per_gpu_hour is None:
                held = sum(a.quantity_gpus for a in within)
                return Reason(
                    "over_tier_cap",
                    f"the {rec.instance_type} book's optimal level {usd(price)}/GPU-h is over the "
                    f"{rec.tier.value} cap {usd(cap)}/GPU-h and the asks within the cap hold {held} of "
                    f"{gpus} GPUs; waiting for cheaper asks",
                    "price_per_gpu_hour",
                    str(cap),
                    str(price),
                    str(cap),
                )
            note = (
                f"optimal level {capped.optimal_index} among the asks within the {rec.tier.value} cap "
                f"{usd(cap)}/GPU-h (the whole book's optimum {usd(price)} is over it)"
            )
            price = capped.optimal_price_per_gpu_hour
            analysis = capped
        return Price(price, note, analysis.reason)
    per_gpu = offer.price_per_gpu_hour
    if per_gpu is None:
        return Reason(NO_PRICE, f"{rec.name}'s offer has no GPU price", "price_per_gpu_hour")
    if cap is not None and per_gpu > cap:
        return Reason(
            "over_tier_cap",
            f"{rec.name} costs {usd(per_gpu)}/GPU-h, over the {rec.tier.value} cap {usd(cap)}/GPU-h",
            "price_per_gpu_hour",
            str(cap),
            str(per_gpu),
            str(cap),
        )
    if offer.spot and spot_headroom > 0:
        limit = (per_gpu * (1 + Decimal(str(spot_headroom)))).quantize(Decimal("0.000001"))
        if cap is not None:
            limit = min(limit, cap)
        note = (
            f"{rec.provider}'s spot price in {offer.region} when last seen, {usd(per_gpu)}/GPU-h, "
            f"+{spot_headroom:.0%} for its move before the order lands"
        )
        why = Reason(
            "offer_price",
            f"{rec.provider} sold {rec.instance_type} spot at {usd(per_gpu)}/GPU-h in {offer.region} when last "
            f"seen; the order's limit is {usd(limit)}/GPU-h ({spot_headroom:.0%} above, within the "
            f"{rec.tier.value} cap) and the seller charges its price at the fill",
            "price_per_gpu_hour",
            need=str(limit),
            have=str(per_gpu),
        )
        return Price(limit, note, why)
    note = f"{rec.provider}'s offer price in {offer.region}"
    why = Reason(
        "offer_price",
        f"{rec.provider} sells {rec.instance_type} at a fixed {usd(per_gpu)}/GPU-h in {offer.region}",
        "price_per_gpu_hour",
        have=str(per_gpu),
    )
    return Price(per_gpu, note, why)


def placement_text(state: ClusterState, rec: JobRecord, margin_s: float) -> str:
    """``12 nodes lack 4 GPUs with 60 GB free, 3 expire within 2h05m``: why no READY node took the job."""
    summary, job = state.placement_of(rec), rec.job
    if summary is None or not summary.rejections or job is None:
        return "no READY node can take it"
    other = Tier.FLEX.value if job.tier is Tier.FAST else Tier.FAST.value
    gpus = (
        f"{job.gpu_count} GPU{'s' if job.gpu_count != 1 else ''} with {fmt_num(job.vram_per_gpu_gb)} GB free"
    )
    parts = []
    for i, c in enumerate(summary.rejections):
        one = c.count == 1
        text = {
            "tier_mismatch": f"{'is' if one else 'are'} {other}",
            "gpu_model_not_allowed": f"{'has' if one else 'have'} a GPU model the job does not allow",
            "cuda_mismatch": f"{'has' if one else 'have'} a CUDA version the job does not allow",
            "expires_too_soon": f"expire{'s' if one else ''} within {fmt_duration(job.expected_duration_sec + margin_s)}",
            "insufficient_cpu": f"lack{'s' if one else ''} {fmt_num(job.cpu_cores)} free CPU cores",
            "insufficient_ram": f"lack{'s' if one else ''} {fmt_num(job.ram_gb)} GB free RAM",
            "insufficient_gpus": f"lack{'s' if one else ''} {gpus}",
            "not_whole_free": f"hold{'s' if one else ''} other jobs (a gang needs whole nodes)",
        }.get(c.code, c.code)
        noun = f" node{'' if one else 's'}" if i == 0 else ""
        parts.append(f"{c.count}{noun} {text}")
    return ", ".join(parts)


def purchase_step(
    state: ClusterState,
    config: ControllerConfig,
    now: datetime,
    decision: RoutingDecision,
    new_demand: Mapping[str, list[JobRecord]],
    out: Outcomes,
    passed_over: Mapping[str, tuple[tuple[str, Reason], ...]] | None = None,
    spares: Mapping[str, Reason] | None = None,
) -> PurchasePlan:
    """One order (a ``BuyCapacity``) per group routing launches slices in (within its node headroom, at a
    limit price, within budgets); its jobs wait for it. Orders are planned one by one: a budget sees the
    ones planned before it. ``passed_over``: per job, the groups its cost band dropped and why (the
    purchase's reason names the ones it beat). ``spares``: per group short of its restart reserve, why (the
    reason of a purchase made for no job there). Reads ``state``, writes nothing to it."""
    headroom: dict[str, int] = {}
    planned: list[PlannedOrder] = []
    for pending in decision.pending_groups:
        launches = pending.slices_to_launch
        if launches <= 0:
            continue
        base, gang = base_of(pending.name)
        rec = state.groups[base]
        if base not in headroom:
            headroom[base] = node_headroom(state, rec)
        unit = gang if gang is not None else rec.slice_size
        launches = min(launches, headroom[base] // unit)
        jobs = new_demand.get(pending.name, [])
        if launches <= 0:
            out.unmet_jobs(jobs, Reason("at_max_slices", f"{base} has no node headroom left this round"))
            continue
        nodes = launches * unit
        offer = rec.offer
        assert offer is not None
        gpus_per_node = int(offer.gpu_count)
        price = limit_price(
            state, rec, nodes * gpus_per_node, config.cap_for(rec.tier), config.spot_limit_headroom
        )
        if isinstance(price, Reason):
            out.unmet_jobs(jobs, price)
            continue
        headroom[base] -= nodes
        beat = _beaten(jobs, passed_over or {})
        launch_reason = pending.launch_reason
        spare = (spares or {}).get(pending.name)
        if spare is not None and not jobs:
            launch_reason = spare  # bought for no job: a spare for the group's FAST services' restarts
        order = _plan_order(
            state, config, now, rec, gang, launches, unit, price, jobs, launch_reason, out, beat, planned
        )
        if order is not None:
            planned.append(order)
    return PurchasePlan(tuple(planned))


def _beaten(jobs: list[JobRecord], passed_over: Mapping[str, tuple[tuple[str, Reason], ...]]) -> str:
    """``; it beat b at ..., c at ...``: the hosts the first job's cost band passed over, costlier, expected
    to keep a FAST job waiting too long or to make a FLEX job redo too much of its work."""
    for r in jobs[:1]:
        costlier = [
            why.message
            for _, why in passed_over.get(r.spec.job_id, ())
            if why.code in ("costlier_host", "fast_wait", "flex_rework")
        ]
        if costlier:
            more = f" (and {len(costlier) - 3} more)" if len(costlier) > 3 else ""
            return "; it beat " + "; ".join(costlier[:3]) + more
    return ""


def _as_placed(state: ClusterState, planned: Sequence[PlannedOrder], now: datetime) -> ClusterState:
    """The state as a budget sees it once the orders planned before are placed: a shallow copy whose
    orders include them (``state`` itself is not written)."""
    if not planned:
        return state
    view = copy.copy(state)
    view.orders = {
        **state.orders,
        **{p.key: replace(p.record(now), status=OrderStatus.PLACED) for p in planned},
    }
    return view


def _plan_order(
    state: ClusterState,
    config: ControllerConfig,
    now: datetime,
    rec: GroupRecord,
    gang: int | None,
    launches: int,
    unit: int,
    price: Price,
    jobs: list[JobRecord],
    launch_reason: Reason | None,
    out: Outcomes,
    beat: str,
    planned: Sequence[PlannedOrder],
) -> PlannedOrder | None:
    """The order for ``launches`` slices of ``unit`` nodes, after ``planned`` (``None``: budgets allow
    none of it)."""
    offer = rec.offer
    assert offer is not None
    nodes = launches * unit
    sizing = size_contract(state, config, rec, nodes, price.per_gpu_hour, jobs, now)
    duration = sizing.duration_s
    # The action id the order gets when the pass records its purchases in order (PurchasePlan.apply_to).
    key = f"act-{state.counters.get('act', 0) + len(planned) + 1:06d}"
    if config.budgets:  # spend limits (engine/budget.py): a job over one waits, told the numbers
        per_launch = price.per_gpu_hour * unit * int(offer.gpu_count)
        ids = [r.spec.job_id for r in jobs]
        committed = _as_placed(state, planned, now)
        fit = fit_launch(committed, config.budgets, key, per_launch, launches, duration, ids, now)
        for r in jobs:
            over = fit.refused.get(r.spec.job_id)
            if over is not None:  # keep the numbers (limit, committed, this purchase) on the job's reason
                out.unmet_jobs([r], over)
                out.decide(
                    r.spec.job_id,
                    JobOutcome(
                        reason=replace(over, message=f"cannot buy capacity for it now: {over.message}")
                    ),
                )
        if not fit.launches:
            return None
        jobs = [r for r in jobs if r.spec.job_id in fit.job_ids]
        launches, nodes = fit.launches, fit.launches * unit
    request = CapacityRequest(
        provider=rec.provider,
        instance_type=rec.instance_type,
        node_count=nodes,
        duration_s=duration,
        limit_price_per_gpu_hour=price.per_gpu_hour,
        tier=rec.tier,
        gpu_model=offer.gpu_model,
        gpus_per_node=int(offer.gpu_count),
        spot=offer.spot,
        region=offer.region,
    )
    buying = (
        f"buying {nodes}x {rec.instance_type} on {rec.provider} at {usd(price.per_gpu_hour)}/GPU-h "
        f"({price.note}) for {fmt_duration(duration)}; {sizing.text}"
    )
    if jobs:
        first = jobs[0]
        assert first.job is not None
        more = f" (and {len(jobs) - 1} more job{'s' if len(jobs) > 2 else ''})" if len(jobs) > 1 else ""
        head = f"{first.job.tier.value} job {first.job.id} needs {need_text(first.job)}{more}: {placement_text(state, first, config.safety_margin_s)}"
    else:
        head = launch_reason.message if launch_reason is not None else f"{rec.name} below min_slices"
    reason = Reason("buy_capacity", f"{head}; {buying}{beat}", "nodes", nodes, 0, str(price.per_gpu_hour))
    job_ids = tuple(r.spec.job_id for r in jobs)
    for r in jobs:
        out.decide(
            r.spec.job_id,
            JobOutcome(
                order_key=key,
                reason=Reason(
                    "waiting_for_capacity",
                    f"waiting for {nodes}x {rec.instance_type} bought on {rec.provider} at "
                    f"{usd(price.per_gpu_hour)}/GPU-h (purchase {key})",
                ),
            ),
        )
    return PlannedOrder(key, rec.name, request, job_ids, reason, price.reason, gang, launches, unit)
