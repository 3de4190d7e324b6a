"""The autoscaling pass: unplaced demand -> routing over scale groups -> priced purchases.

1. Demand: every PENDING job left after scheduling, in queue order, one entry each (a gang is one
   coscheduled entry). FAST demand is routed at once. FLEX demand is held back until the oldest
   waiting FLEX job has waited ``flex_batch_wait_s`` or the waiting FLEX jobs need ``flex_batch_gpus``
   GPUs (a node's worth); then all of it is routed together.
2. Priorities: procurement ranks each tier's groups from their live offers (``rank_offers`` +
   ``priorities_for_groups``); it is the one owner of provider choice, routing takes its order as is.
   The need counts the CPU cores and RAM the tier's jobs ask for as well as their GPUs. Each job's
   eligible groups are then narrowed to its cost band (``cheapest_hosts``: within procurement's
   ``host_cost_tolerance`` of the cheapest group that can host it now, per ``hosting_cost_per_hour``; a
   FAST job draws its band among the seed's preferred provider's groups when that provider can host it).
3. Routing: ``route_demand`` over every group (and gang views). In-flight slices (REQUESTING, BOOTING,
   INITIALIZING) are pending capacity, so demand already bought for is never bought twice.
4. Purchases: each launch becomes one ``BuyCapacity`` at a limit price: the orderbook's optimal price
   (``analyze_orderbook``) for ``node_count x gpus_per_node`` GPUs where the provider publishes a book,
   the offer's price otherwise. A FLEX purchase never goes above the FLEX cap: when the optimal level is
   above it, the book is analysed again with only the asks within the cap, and if those cannot cover
   the need the demand waits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal

from scalar.domain.errors import DomainError
from scalar.domain.market import CapacityRequest, NodeState
from scalar.domain.orderbook import analyze_orderbook, format_usd
from scalar.domain.packing_model import Job, order_pending
from scalar.domain.packing_text import fmt_duration, fmt_num
from scalar.domain.procurement import (
    CapacityNeed,
    ScaleGroupShape,
    cost_band,
    hosting_cost_per_hour,
    priorities_for_groups,
    rank_offers,
)
from scalar.domain.reasons import Reason
from scalar.domain.routing import route_demand
from scalar.domain.routing_model import Availability, RoutedCode, RoutingDecision
from scalar.domain.tier import Tier
from scalar.engine.actions import BuyCapacity
from scalar.engine.agents import NEEDS_AGENT_NODE, agent_views
from scalar.engine.budget import fit_launch
from scalar.engine.config import ControllerConfig
from scalar.engine.groups import (
    Eligibility,
    availability_of,
    base_of,
    demand_entry,
    eligibility,
    node_headroom,
    routing_groups,
)
from scalar.engine.lifecycle import OrderStatus
from scalar.engine.scheduler import need_text
from scalar.engine.state import (
    ClusterState,
    GroupRecord,
    JobRecord,
    OrderRecord,
    SliceRecord,
    UnmetDemandView,
)

FLEX_WAITING = "flex_waiting"
NO_ELIGIBLE_GROUP = "no_eligible_group"
NO_PRICE = "no_price"


@dataclass(frozen=True, slots=True)
class Price:
    """A limit price, a short note for the purchase's reason, and the full why (told in the order's story)."""

    per_gpu_hour: Decimal
    note: str
    reason: Reason


def update_priorities(
    state: ClusterState,
    config: ControllerConfig,
    demand_gpus: dict[Tier, int],
    demand_cpu_ram: dict[Tier, tuple[float, float]] | None = None,
) -> None:
    """Procurement ranks each tier's groups; the ranks become routing priorities (1 = first).

    The need is the tier's GPUs and the CPU cores and RAM its jobs ask for (a shape covers it with as many
    nodes as the scarcest of the three takes). The ranking depends only on the groups' offers, that demand
    and the config, so it is kept while none of them changed (the same ranks, without ranking hundreds of
    offers every step)."""
    cpu_ram = demand_cpu_ram or {}
    key = (
        state.offers_version,
        tuple(max(1, demand_gpus.get(t, 0)) for t in Tier),
        tuple(cpu_ram.get(t, (0.0, 0.0)) for t in Tier),
    )
    if key == state.priorities_key:
        return
    state.priorities_key = key
    policy = config.procurement
    for tier in Tier:
        recs = [r for r in state.groups.values() if r.tier is tier]
        offered = [r for r in recs if r.offer is not None]
        for r in recs:
            if r.offer is None:
                r.priority = None
                r.rank_reasons = ()
                r.excluded = None
        if not offered:
            continue
        # Offers are ranked under their group's name, so that spot and on-demand shapes of one instance
        # type keep their own ranks (priorities_for_groups keys by provider and instance type).
        offers = [replace(r.offer, instance_type=r.name) for r in offered if r.offer is not None]
        cpu, ram = cpu_ram.get(tier, (0.0, 0.0))
        need = CapacityNeed(gpu_count=max(1, demand_gpus.get(tier, 0)), tier=tier, cpu_cores=cpu, ram_gb=ram)
        ranked = rank_offers(need, offers, policy)
        shapes = [ScaleGroupShape(r.name, r.provider, r.name, tier) for r in offered]
        priorities = priorities_for_groups(ranked, shapes, tier=tier)
        by_name = {ro.offer.instance_type: ro for ro in ranked}
        for r in offered:
            ro = by_name[r.name]
            r.priority = priorities.get(r.name)
            r.rank_reasons = ro.reasons
            r.excluded = None if ro.included else ro.reasons[0]


def _flex_released(config: ControllerConfig, flex: list[JobRecord], now: datetime) -> Reason:
    gpus = sum(rec.job.gpu_count for rec in flex if rec.job is not None)
    oldest = min(rec.pending_since or now for rec in flex)
    waited = (now - oldest).total_seconds()
    if waited >= config.flex_batch_wait_s or gpus >= config.flex_batch_gpus:
        return Reason(
            "flex_released",
            f"FLEX demand released: {len(flex)} jobs need {gpus} GPUs (batch at {config.flex_batch_gpus}), "
            f"oldest waited {waited:g} s (batch wait {config.flex_batch_wait_s:g} s)",
            "gpus",
            gpus,
            gpus,
            config.flex_batch_gpus,
        )
    return Reason(
        FLEX_WAITING,
        f"FLEX batching: {len(flex)} waiting jobs need {gpus} of {config.flex_batch_gpus} GPUs and the oldest "
        f"has waited {waited:g} of {config.flex_batch_wait_s:g} s; buying when either is reached",
        "gpus",
        config.flex_batch_gpus,
        gpus,
    )


def _limit_price(state: ClusterState, rec: GroupRecord, gpus: int, cap: Decimal | None) -> Price | Reason:
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
                    f"the {rec.instance_type} book's optimal level {format_usd(price)}/GPU-h is over the "
                    f"{rec.tier.value} cap {format_usd(cap)}/GPU-h and the asks within the cap hold {held} of "
                    f"{gpus} GPUs; waiting for cheaper asks",
                    "price_per_gpu_hour",
                    str(cap),
                    str(price),
                    str(cap),
                )
            note = (
                f"optimal level {capped.optimal_index} among the asks within the {rec.tier.value} cap "
                f"{format_usd(cap)}/GPU-h (the whole book's optimum {format_usd(price)} is over it)"
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
            f"{rec.name} costs {format_usd(per_gpu)}/GPU-h, over the {rec.tier.value} cap {format_usd(cap)}/GPU-h",
            "price_per_gpu_hour",
            str(cap),
            str(per_gpu),
            str(cap),
        )
    note = f"{rec.provider}'s offer price in {offer.region}"
    why = Reason(
        "offer_price",
        f"{rec.provider} sells {rec.instance_type} at a fixed {format_usd(per_gpu)}/GPU-h in {offer.region}",
        "price_per_gpu_hour",
        have=str(per_gpu),
    )
    return Price(per_gpu, note, why)


def _placement_text(rec: JobRecord, margin_s: float) -> str:
    """``12 nodes lack 4 GPUs with 60 GB free, 3 expire within 2h05m``: why no READY node took the job."""
    summary, job = rec.placement, rec.job
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


def _shape_key(job: Job) -> tuple[object, ...]:
    """Jobs with the same key have the same eligible groups and the same cost on each."""
    return (
        job.tier,
        job.gpu_count,
        job.vram_per_gpu_gb,
        job.cpu_cores,
        job.ram_gb,
        job.gpu_models,
        job.cuda_versions,
        job.share_gpu,
    )


class _Round:
    """One autoscaling pass (mutable, private)."""

    def __init__(self, state: ClusterState, config: ControllerConfig, now: datetime) -> None:
        self.state = state
        self.config = config
        self.now = now
        self.unmet: list[UnmetDemandView] = []
        self.policy = config.procurement
        self._headrooms: dict[str, int] = {}
        self._flying: set[str] | None = None

    def demand(self) -> list[tuple[JobRecord, Eligibility]]:
        records = [self.state.jobs[j] for j in self.state.pending_ids]
        jobs = order_pending([r.job for r in records if r.job is not None])
        by_id = {r.spec.job_id: r for r in records}
        queue = [by_id[j.id] for j in jobs]
        flex = [r for r in queue if r.job is not None and r.job.tier is Tier.FLEX]
        if flex:
            verdict = _flex_released(self.config, flex, self.now)
            if verdict.code == FLEX_WAITING:
                for rec in flex:
                    rec.routing, rec.routing_group, rec.reason = verdict, None, verdict
                self.unmet.append(
                    UnmetDemandView(tuple(r.spec.job_id for r in flex), FLEX_WAITING, verdict.message)
                )
                queue = [r for r in queue if r.job is not None and r.job.tier is not Tier.FLEX]
        if not self.config.agent_providers:
            # A job with a command runs only on agent-backed nodes; no provider's bought nodes run an agent,
            # so buying for it would buy capacity it can never use (issue 9).
            commands = [r for r in queue if r.spec.command]
            for rec in commands:
                why = rec.placement.message if rec.placement is not None else "no agent-backed node has room"
                reason = Reason(NEEDS_AGENT_NODE, f"waits for a node with a Scalar agent: {why}")
                rec.routing, rec.routing_group, rec.reason = reason, None, reason
            if commands:
                self.unmet.append(
                    UnmetDemandView(
                        tuple(r.spec.job_id for r in commands), NEEDS_AGENT_NODE, "needs an agent node"
                    )
                )
                queue = [r for r in queue if not r.spec.command]
        queue = queue[: self.config.max_demand_entries]
        gpus: dict[Tier, int] = {}
        cpu_ram: dict[Tier, tuple[float, float]] = {}
        for rec in queue:
            if rec.job is not None:
                t = rec.job.tier
                gpus[t] = gpus.get(t, 0) + rec.job.gpu_count
                cpu, ram = cpu_ram.get(t, (0.0, 0.0))
                cpu_ram[t] = (cpu + rec.job.cpu_cores, ram + rec.job.ram_gb)
        # Procurement ranks the groups for this demand first: its exclusions decide eligibility.
        update_priorities(self.state, self.config, gpus, cpu_ram)
        groups = list(self.state.groups.values())
        cache: dict[tuple[object, ...], Eligibility] = {}
        out: list[tuple[JobRecord, Eligibility]] = []
        alike: dict[tuple[object, ...], int] = {}
        for rec in queue:
            if rec.job is not None:
                alike[_shape_key(rec.job)] = alike.get(_shape_key(rec.job), 0) + 1
        for rec in queue:
            job = rec.job
            assert job is not None
            key = _shape_key(job)
            where = cache.get(key)
            if rec.spec.command:  # a command runs only where an agent runs (scalar.engine.agents)
                allowed = agent_views(self.state, self.config, eligibility(job, groups, self.config))
                where = self.cheapest_hosts(job, allowed, alike[key])
            elif where is None:
                where = self.cheapest_hosts(job, eligibility(job, groups, self.config), alike[key])
                cache[key] = where
            if not where.views:
                why = where.summary() or "no scale group exists yet (no offers observed)"
                reason = Reason(
                    NO_ELIGIBLE_GROUP, f"no scale group can serve {need_text(job)} ({job.tier.value}): {why}"
                )
                rec.routing, rec.routing_group, rec.reason = reason, None, reason
                self.unmet.append(UnmetDemandView((job.id,), NO_ELIGIBLE_GROUP, reason.message))
                continue
            out.append((rec, where))
        return out

    def cheapest_hosts(self, job: Job, where: Eligibility, alike: int) -> Eligibility:
        """Narrow a job's groups to those hosting it within procurement's cost band of the cheapest group
        that can take it now (available, with node headroom or capacity on its way): a job is not bought a
        node that costs it clearly more than another shape would. ``alike`` jobs of its shape are waiting:
        the cost is that of the nodes holding them all, shared out. A FAST job keeps the seed's size rule
        when the preferred provider can host it now (Prime's pods start in minutes, VMs in up to ten): its
        band is drawn among that provider's groups. The seed's ranking decides within the band."""
        if len(where.views) < 2:
            return where
        priced: dict[str, Decimal] = {}
        for view in where.views:
            rec = self.state.groups[base_of(view)[0]]
            if rec.offer is None or availability_of(rec, self.now)[0] is not Availability.AVAILABLE:
                continue
            if self._headroom(rec) <= 0 and not self._in_flight(rec.name):
                continue
            cost = hosting_cost_per_hour(
                rec.offer,
                gpu_count=job.gpu_count,
                cpu_cores=job.cpu_cores,
                ram_gb=job.ram_gb,
                vram_per_gpu_gb=job.vram_per_gpu_gb,
                share_gpu=job.share_gpu,
                jobs=alike,
            )
            if cost is not None:
                priced[view] = cost
        costs = priced
        preferred = self.policy.preferred_provider(job.gpu_count)
        if job.tier is Tier.FAST:
            mine = {v: c for v, c in priced.items() if self.state.groups[base_of(v)[0]].provider == preferred}
            costs = mine or priced
        band = set(cost_band(costs, self.policy.host_cost_tolerance))
        if not band or len(band) == len(where.views):
            return where
        cheapest = min(costs.values())
        limit = cheapest * self.policy.host_cost_tolerance
        dropped: list[tuple[str, Reason]] = []
        for view in where.views:
            if view not in priced or view in band:
                continue
            if view in costs:
                why = Reason(
                    "costlier_host",
                    f"{view} would host it at {format_usd(priced[view])}/h, over "
                    f"{self.policy.host_cost_tolerance:g} x the cheapest host's {format_usd(cheapest)}/h",
                    "cost_per_hour",
                    str(cheapest),
                    str(priced[view]),
                    str(limit),
                )
            else:
                why = Reason(
                    "fast_keeps_preferred_provider",
                    f"a FAST job of {job.gpu_count} GPUs goes to {preferred} when it can host it now "
                    f"(seed 000's size rule); {view} would cost {format_usd(priced[view])}/h",
                    "provider",
                    preferred,
                    self.state.groups[base_of(view)[0]].provider,
                )
            dropped.append((view, why))
        views = tuple(v for v in where.views if v in band or v not in priced)
        return Eligibility(views, where.gang, where.passed_over + tuple(dropped))

    def _headroom(self, rec: GroupRecord) -> int:
        found = self._headrooms.get(rec.name)
        if found is None:
            found = self._headrooms[rec.name] = node_headroom(self.state, rec)
        return found

    def _in_flight(self, group: str) -> bool:
        if self._flying is None:
            self._flying = {
                self.state.slices[sid].group
                for sid in self.state.live_slice_ids
                if self.state.slices[sid].state is not NodeState.READY
            }
        return group in self._flying

    def run(self) -> None:
        demand = self.demand()
        if not demand and not any(g.min_slices > 0 for g in self.state.groups.values()):
            # Nothing to route: no unplaced demand and no group to keep at a minimum size, so routing could
            # launch nothing. ``last_routing`` stays the last decision that had something to route.
            self.state.unmet = tuple(self.unmet)
            return
        gang_sizes: dict[str, set[int]] = {}
        for _, where in demand:
            for view in where.views:
                base, k = base_of(view)
                if k is not None:
                    gang_sizes.setdefault(base, set()).add(k)
        groups = routing_groups(self.state, self.now, gang_sizes)
        entries = [demand_entry(rec.job, where) for rec, where in demand if rec.job is not None]
        try:
            decision = route_demand(groups, entries, self.now, memo=self.config.routing_memo)
        except DomainError as err:  # never expected: inputs are built here; never let it stop the loop
            reason = Reason("routing_failed", f"routing refused its input: {err.message}")
            self.state.note("autoscaler", "autoscaler", reason)
            self._unmet([rec for rec, _ in demand], reason)
            self.state.unmet = tuple(self.unmet)
            return
        self.state.last_routing = decision
        self.state.last_routing_at = self.now
        jobs_by_entry = {i: rec for i, (rec, _) in enumerate(demand)}
        new_demand: dict[str, list[JobRecord]] = {}
        for d in decision.entry_decisions:
            rec = jobs_by_entry[d.entry_index]
            rec.routing = Reason(
                d.reason.code, d.explanation, d.reason.resource, d.reason.need, d.reason.have, d.reason.limit
            )
            rec.routing_group = d.group
            if d.group is None:
                self.unmet.append(UnmetDemandView((rec.spec.job_id,), d.reason.code, d.explanation))
                rec.reason = Reason(d.reason.code, f"cannot buy capacity for it now: {d.reason.message}")
            elif d.reason.code == RoutedCode.IN_FLIGHT_CAPACITY.value:
                key = self._open_order(d.group)
                if key is not None:
                    rec.order_key = key
                    self.state.orders[key].serves[rec.spec.job_id] = None
                rec.reason = Reason(
                    "waiting_for_capacity",
                    f"waiting for capacity already on its way in {base_of(d.group)[0]} (purchase {rec.order_key})",
                )
            else:
                new_demand.setdefault(d.group, []).append(rec)
        self.buy(decision, new_demand)
        self.state.unmet = tuple(self.unmet)

    def _open_order(self, view: str) -> str | None:
        """The latest purchase whose slices of this group (or gang view) are still on their way."""
        group, gang = base_of(view)
        for sid in reversed(list(self.state.live_slice_ids)):
            sl = self.state.slices[sid]
            if (
                sl.group == group
                and sl.gang_size == gang
                and sl.state is not NodeState.READY
                and sl.order_key
            ):
                return sl.order_key
        return None

    def buy(self, decision: RoutingDecision, new_demand: dict[str, list[JobRecord]]) -> None:
        headroom: dict[str, int] = {}
        for pending in decision.pending_groups:
            launches = pending.slices_to_launch
            if launches <= 0:
                continue
            base, gang = base_of(pending.name)
            rec = self.state.groups[base]
            if base not in headroom:
                headroom[base] = node_headroom(self.state, rec)
            unit = gang if gang is not None else rec.slice_size
            launches = min(launches, headroom[base] // unit)
            jobs = new_demand.get(pending.name, [])
            if launches <= 0:
                self._unmet(jobs, Reason("at_max_slices", f"{base} has no node headroom left this round"))
                continue
            nodes = launches * unit
            offer = rec.offer
            assert offer is not None
            gpus_per_node = int(offer.gpu_count)
            price = _limit_price(self.state, rec, nodes * gpus_per_node, self.config.cap_for(rec.tier))
            if isinstance(price, Reason):
                self._unmet(jobs, price)
                continue
            headroom[base] -= nodes
            self._place_order(rec, gang, launches, unit, price, jobs, pending.launch_reason)

    def _unmet(self, jobs: list[JobRecord], reason: Reason) -> None:
        for rec in jobs:
            rec.routing = reason
            rec.reason = Reason(reason.code, f"cannot buy capacity for it now: {reason.message}")
        if jobs:
            self.unmet.append(
                UnmetDemandView(tuple(r.spec.job_id for r in jobs), reason.code, reason.message)
            )

    def _place_order(
        self,
        rec: GroupRecord,
        gang: int | None,
        launches: int,
        unit: int,
        price: Price,
        jobs: list[JobRecord],
        launch_reason: Reason | None,
    ) -> None:
        offer = rec.offer
        assert offer is not None
        nodes = launches * unit
        contract = (rec.config.contract_length_s if rec.config else None) or self.config.contract_length_s
        allowance = self.config.safety_margin_s + self.config.request_timeout_s + self.config.boot_timeout_s
        longest = max((r.job.expected_duration_sec for r in jobs if r.job is not None), default=0.0)
        duration = max(contract, math.ceil(longest + allowance)) if jobs else contract
        if self.config.budgets:  # spend limits (engine/budget.py): a job over one waits, told the numbers
            key = f"act-{self.state.counters.get('act', 0) + 1:06d}"
            per_launch = price.per_gpu_hour * unit * int(offer.gpu_count)
            ids = [r.spec.job_id for r in jobs]
            fit = fit_launch(
                self.state, self.config.budgets, key, per_launch, launches, duration, ids, self.now
            )
            for r in jobs:
                over = fit.refused.get(r.spec.job_id)
                if over is not None:  # keep the numbers (limit, committed, this purchase) on the job's reason
                    self._unmet([r], over)
                    r.reason = replace(over, message=f"cannot buy capacity for it now: {over.message}")
            if not fit.launches:
                return
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
        key = self.state.next_id("act")
        buying = (
            f"buying {nodes}x {rec.instance_type} on {rec.provider} at {format_usd(price.per_gpu_hour)}/GPU-h "
            f"({price.note}) for {duration / 86400:g} days"
        )
        if jobs:
            first = jobs[0]
            assert first.job is not None
            more = f" (and {len(jobs) - 1} more job{'s' if len(jobs) > 2 else ''})" if len(jobs) > 1 else ""
            head = f"{first.job.tier.value} job {first.job.id} needs {need_text(first.job)}{more}: {_placement_text(first, self.config.safety_margin_s)}"
        else:
            head = launch_reason.message if launch_reason is not None else f"{rec.name} below min_slices"
        reason = Reason("buy_capacity", f"{head}; {buying}", "nodes", nodes, 0, str(price.per_gpu_hour))
        job_ids = tuple(r.spec.job_id for r in jobs)
        order = OrderRecord(key, rec.name, request, self.now, job_ids, reason, gang_size=gang)
        order.serves = dict.fromkeys(job_ids)
        self.state.orders[key] = order
        self.state.move_order(order, OrderStatus.PLACED, reason)
        self.state.note("order", key, price.reason)
        for _ in range(launches):
            sl = SliceRecord(self.state.next_id("slice"), rec.name, key, unit, gang, self.now)
            self.state.add_slice(sl, NodeState.REQUESTING, Reason("requested", f"requested in order {key}"))
            order.slice_ids.append(sl.id)
        for r in jobs:
            r.order_key = key
            r.reason = Reason(
                "waiting_for_capacity",
                f"waiting for {nodes}x {rec.instance_type} bought on {rec.provider} at "
                f"{format_usd(price.per_gpu_hour)}/GPU-h (purchase {key})",
            )
        action = BuyCapacity(action_id=key, reason=reason, group=rec.name, request=request, for_jobs=job_ids)
        self.state.emit(action, (key, rec.name, *job_ids))


def autoscale(state: ClusterState, config: ControllerConfig, now: datetime) -> None:
    """Route unplaced demand and buy what routing launches; every purchase emits a ``BuyCapacity``."""
    state.unmet = ()
    if not state.groups:
        if state.pending_ids:
            round_ = _Round(state, config, now)
            round_.demand()  # records why nothing can be bought yet
            state.unmet = tuple(round_.unmet)
        return
    _Round(state, config, now).run()
