"""The autoscaling pass, a pipeline of steps: demand -> ranking -> eligibility -> cost band -> routing ->
purchases -> consolidation.

Each step reads the state and returns what it decided as values (as Ray's autoscaler v2 scheduler returns
``to_launch``/``infeasible``): the demand to route and the jobs held back, procurement's ranking
(``Ranking``), each job's eligible groups, the routing decision (``Routed``), the purchases
(``PurchasePlan``), consolidation's moves. What the pass decided about each pending job (``JobOutcome``:
its routing reason and group, its one-line reason, the purchase it waits for) is kept in the pass's
``Outcomes`` (engine/pass_outcomes.py). The state is written in one place at the end (``_apply``): the
routing entries kept for the next pass, the purchases (orders, slices, their stories, ``BuyCapacity``),
the jobs' records, the orders they now wait for, the routing decision, the unmet demand, the moves. The one
write before it is the ranking's: eligibility, routing and contract sizing read a group's priority and
exclusion from its record, so ``Ranking.apply_to`` runs as soon as it is decided.

1. Demand (``demand_step``): every PENDING job left after scheduling, in queue order, one entry each (a
   gang is one coscheduled entry). FAST demand is routed at once. FLEX demand is held back until the oldest
   waiting FLEX job has waited ``flex_batch_wait_s`` or the waiting FLEX jobs need ``flex_batch_gpus``
   GPUs (a node's worth); then all of it is routed together.
2. Ranking (``ranking_step``): procurement ranks each tier's groups from their live offers
   (``rank_offers`` + ``priorities_for_groups``); it is the one owner of provider choice, routing takes
   its order as is. The need counts the CPU cores and RAM the tier's jobs ask for as well as their GPUs.
3. Eligibility (``eligibility_step``): the groups that may serve each job (engine/groups.py).
4. Cost band (``cost_band_step``): each job's eligible groups narrowed to its cost band (``cheapest_hosts``:
   within procurement's ``host_cost_tolerance`` of the cheapest group that can host it now, per unit of
   work with the expected rework of spot interruptions (``domain.contracts.expected_job_cost``); a FAST job
   draws its band among the seed's preferred provider's groups when that provider can host it).
5. Routing (``routing_step``): ``route_demand`` over every group (and gang views). In-flight slices
   (REQUESTING, BOOTING, INITIALIZING) are pending capacity, so demand already bought for is never bought
   twice.
6. Purchases (``purchase_step``, engine/buying.py): each launch becomes one planned order, a
   ``BuyCapacity`` at a limit price. Budgets may hold part of it back.
7. Consolidation (``consolidation_step``, engine/consolidate.py): restartable FLEX jobs leave an expensive,
   underused contract when the saving over the rest of it exceeds the restart cost
   (``domain.consolidation.plan_moves``); the moves are carried out in ``_apply`` with the rest.

The procurement policy is the config's (``ControllerConfig.procurement``), the same for ranking and bands.
The fast paths are parameters next to their references: ``ControllerConfig.pending_index`` (the demand read
from the pending index, or every pending job sorted) and ``ControllerConfig.routing_memo``. A pass skipped
by ``AutoscaleGate`` renews the held FLEX jobs' wait (``_flex_wait_step``) through the same ``_apply``.
After the pass the controller runs its last stages, resale (``resale.offer_resales``) and idle release
(``housekeeping.release_idle``), which write their own actions (docs/decisions/engine.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scalar.domain.contracts import known_work_s, time_held_s
from scalar.domain.errors import DomainError
from scalar.domain.market import NodeState
from scalar.domain.packing_model import Job, order_pending
from scalar.domain.procurement import (
    CapacityNeed,
    ScaleGroupShape,
    priorities_for_groups,
    rank_offers,
)
from scalar.domain.reasons import Reason
from scalar.domain.release import BLOCK_SELLERS
from scalar.domain.routing import route_demand
from scalar.domain.routing_model import DemandEntry, RoutedCode, RoutingDecision
from scalar.domain.tier import Tier
from scalar.engine.agents import NEEDS_AGENT_NODE, agent_views
from scalar.engine.buying import NO_PRICE, purchase_step
from scalar.engine.config import ControllerConfig
from scalar.engine.consolidate import apply_moves, consolidation_step
from scalar.engine.cost_band import HostCosts
from scalar.engine.groups import (
    Eligibility,
    base_of,
    demand_entry,
    eligibility,
    routing_groups,
)
from scalar.engine.pass_outcomes import (
    UNRANKED,
    GroupRank,
    JobOutcome,
    Outcomes,
    PurchasePlan,
    Ranking,
    held,
)
from scalar.engine.reserve import Reserve, restart_reserves
from scalar.engine.scheduler import need_text
from scalar.engine.state import (
    ClusterState,
    JobRecord,
    UnmetDemandView,
)

FLEX_WAITING = "flex_waiting"
NO_ELIGIBLE_GROUP = "no_eligible_group"
__all__ = ["FLEX_WAITING", "NO_ELIGIBLE_GROUP", "NO_PRICE", "autoscale", "ranking_step"]


def ranking_step(
    state: ClusterState,
    config: ControllerConfig,
    demand_gpus: Mapping[Tier, int],
    demand_cpu_ram: Mapping[Tier, tuple[float, float]] | None = None,
) -> Ranking | None:
    """Procurement ranks each tier's groups; the ranks become routing priorities (1 = first).

    The need is the tier's GPUs and the CPU cores and RAM its jobs ask for (a shape covers it with as many
    nodes as the scarcest of the three takes). The ranking depends only on the groups' offers, that demand
    and the config, so it is kept while none of them changed: ``None``, the ranks on the groups stand (the
    same ranks, without ranking hundreds of offers every step)."""
    cpu_ram = demand_cpu_ram or {}
    key = (
        state.offers_version,
        tuple(max(1, demand_gpus.get(t, 0)) for t in Tier),
        tuple(cpu_ram.get(t, (0.0, 0.0)) for t in Tier),
    )
    if key == state.priorities_key:
        return None
    policy = config.procurement
    ranks: dict[str, GroupRank] = {}
    for tier in Tier:
        recs = [r for r in state.groups.values() if r.tier is tier]
        offered = [r for r in recs if r.offer is not None]
        for r in recs:
            if r.offer is None:
                ranks[r.name] = UNRANKED
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
            ranks[r.name] = GroupRank(
                priorities.get(r.name), ro.reasons, None if ro.included else ro.reasons[0]
            )
    return Ranking(key, ranks)


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


def waited_and_ran_s(rec: JobRecord, now: datetime) -> tuple[float, float]:
    """A job's seconds without a node since its submission and with one (its placements' union)."""
    origin = rec.submitted_at
    spans = [
        ((p.since - origin).total_seconds(), ((p.until or now) - origin).total_seconds()) for p in rec.history
    ]
    ran = time_held_s(spans)
    return max(0.0, (now - origin).total_seconds() - ran), ran


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


@dataclass(frozen=True, slots=True)
class Demand:
    """The demand step's answer: the jobs to route (queue order) and each tier's need."""

    queue: tuple[JobRecord, ...]
    gpus: dict[Tier, int]
    cpu_ram: dict[Tier, tuple[float, float]]


def demand_step(state: ClusterState, config: ControllerConfig, now: datetime, out: Outcomes) -> Demand:
    """The pending jobs to route this pass; FLEX jobs still batching and command jobs with no agent
    provider are held back (told why in ``out``). Only the first ``max_demand_entries`` of the queue are
    routed: the queue is read from the pending index (engine/pending_index.py), merged per shape, and only
    as far as those entries (all of the FLEX and command jobs, when they are held back)."""
    if not config.pending_index:
        return _demand_step_full(state, config, now, out)
    index = state.pending_index
    jobs = state.jobs
    shapes = list(index.queues)
    flex_shapes = [s for s in shapes if s[0] is Tier.FLEX]
    if flex_shapes:
        flex = [jobs[j] for j in index.ordered(flex_shapes)]
        verdict = _flex_released(config, flex, now)
        if verdict.code == FLEX_WAITING:
            for rec in flex:
                out.decide(rec.spec.job_id, held(verdict))
            out.unmet.append(
                UnmetDemandView(tuple(r.spec.job_id for r in flex), FLEX_WAITING, verdict.message)
            )
            shapes = [s for s in shapes if s[0] is not Tier.FLEX]
    if not config.agent_providers:
        command_shapes = [s for s in shapes if s[8]]
        if command_shapes:
            _hold_commands(state, [jobs[j] for j in index.ordered(command_shapes)], out)
            shapes = [s for s in shapes if not s[8]]
    queue = [jobs[j] for j in itertools.islice(index.ordered(shapes), config.max_demand_entries)]
    return _demand(queue)


def _hold_commands(state: ClusterState, commands: list[JobRecord], out: Outcomes) -> None:
    """A job with a command runs only on agent-backed nodes; no provider's bought nodes run an agent, so
    buying for it would buy capacity it can never use."""
    for rec in commands:
        placement = state.placement_of(rec)
        why = placement.message if placement is not None else "no agent-backed node has room"
        out.decide(
            rec.spec.job_id,
            held(Reason(NEEDS_AGENT_NODE, f"waits for a node with a Scalar agent: {why}")),
        )
    if commands:
        out.unmet.append(
            UnmetDemandView(tuple(r.spec.job_id for r in commands), NEEDS_AGENT_NODE, "needs an agent node")
        )


def _demand(queue: list[JobRecord]) -> Demand:
    gpus: dict[Tier, int] = {}
    cpu_ram: dict[Tier, tuple[float, float]] = {}
    for rec in queue:
        if rec.job is not None:
            t = rec.job.tier
            gpus[t] = gpus.get(t, 0) + rec.job.gpu_count
            cpu, ram = cpu_ram.get(t, (0.0, 0.0))
            cpu_ram[t] = (cpu + rec.job.cpu_cores, ram + rec.job.ram_gb)
    return Demand(tuple(queue), gpus, cpu_ram)


def _demand_step_full(state: ClusterState, config: ControllerConfig, now: datetime, out: Outcomes) -> Demand:
    """The reference demand step: every pending job sorted into queue order."""
    records = [state.jobs[j] for j in state.pending_ids]
    jobs = order_pending([r.job for r in records if r.job is not None])
    by_id = {r.spec.job_id: r for r in records}
    queue = [by_id[j.id] for j in jobs]
    flex = [r for r in queue if r.job is not None and r.job.tier is Tier.FLEX]
    if flex:
        verdict = _flex_released(config, flex, now)
        if verdict.code == FLEX_WAITING:
            for rec in flex:
                out.decide(rec.spec.job_id, held(verdict))
            out.unmet.append(
                UnmetDemandView(tuple(r.spec.job_id for r in flex), FLEX_WAITING, verdict.message)
            )
            queue = [r for r in queue if r.job is not None and r.job.tier is not Tier.FLEX]
    if not config.agent_providers:
        _hold_commands(state, [r for r in queue if r.spec.command], out)
        queue = [r for r in queue if not r.spec.command]
    return _demand(queue[: config.max_demand_entries])


def eligibility_step(
    state: ClusterState, config: ControllerConfig, queue: tuple[JobRecord, ...]
) -> list[tuple[JobRecord, Eligibility]]:
    """Each job's eligible groups (after procurement's ranking: its exclusions decide eligibility); a job
    with a command only where an agent runs (engine/agents.py). Jobs of one shape share the answer."""
    groups = list(state.groups.values())
    cache: dict[tuple[object, ...], Eligibility] = {}
    out: list[tuple[JobRecord, Eligibility]] = []
    for rec in queue:
        job = rec.job
        assert job is not None
        if rec.spec.command:
            out.append((rec, agent_views(state, config, eligibility(job, groups, config))))
            continue
        key = _shape_key(job)
        where = cache.get(key)
        if where is None:
            where = cache[key] = eligibility(job, groups, config)
        out.append((rec, where))
    return out


def cost_band_step(
    state: ClusterState,
    config: ControllerConfig,
    now: datetime,
    eligible: list[tuple[JobRecord, Eligibility]],
    out: Outcomes,
) -> list[tuple[JobRecord, Eligibility]]:
    """Each job's groups narrowed to its cost band; a job with no group left is unmet (told why)."""
    policy = config.procurement
    # A block seller's commitment depends on the job's length (contract_sizing.block_commitment).
    blocks = any(g.provider in BLOCK_SELLERS for g in state.groups.values())
    alike: dict[tuple[object, ...], int] = {}
    for rec, _ in eligible:
        if rec.job is not None:
            alike[_shape_key(rec.job)] = alike.get(_shape_key(rec.job), 0) + 1
    hosts = HostCosts(state, policy, now, config)
    cache: dict[object, Eligibility] = {}
    routed: list[tuple[JobRecord, Eligibility]] = []
    for rec, where in eligible:
        job = rec.job
        assert job is not None
        key = _shape_key(job)
        checkpoint = rec.spec.checkpoint_interval_s
        # A FAST service back from an interruption restarts where a node is READY soonest (cost_band.py).
        restarted = job.tier is Tier.FAST and rec.preemptions > 0
        ran = rec.longest_run_s
        if restarted:
            # Its wait so far and the run it has had decide where it is back soon enough (never cached).
            down_s, ran_s = waited_and_ran_s(rec, now)
            where = hosts.cheapest(job, where, alike[key], checkpoint, restarted, ran, down_s, ran_s)
        elif rec.spec.command:
            where = hosts.cheapest(job, where, alike[key], checkpoint, restarted, ran)
        else:
            # A FLEX job's interruption risk depends on its length and checkpoints (domain/contracts.py); a
            # FAST job's band on its length and restarts only where short services may leave (cost_band.py).
            by_length = job.tier is Tier.FLEX or blocks or policy.fast_preference_limit is not None
            length = known_work_s(job.expected_duration_sec, ran)
            cost_key = (key, length, checkpoint, restarted) if by_length else key
            found = cache.get(cost_key)
            if found is None:
                found = cache[cost_key] = hosts.cheapest(job, where, alike[key], checkpoint, restarted, ran)
            where = found
        if not where.views:
            why = where.summary() or "no scale group exists yet (no offers observed)"
            reason = Reason(
                NO_ELIGIBLE_GROUP, f"no scale group can serve {need_text(job)} ({job.tier.value}): {why}"
            )
            out.decide(job.id, held(reason))
            out.unmet.append(UnmetDemandView((job.id,), NO_ELIGIBLE_GROUP, reason.message))
            continue
        routed.append((rec, where))
    return routed


RoutingEntries = Mapping[str, tuple[tuple[str, ...], int | None, DemandEntry]]


@dataclass(frozen=True, slots=True)
class Routed:
    """The routing step's answer: the decision (``None``: routing refused its input, ``refused`` says why),
    the jobs routed to groups that need new capacity, and the routing entries to keep for the next pass
    (``ClusterState.demand_entries``)."""

    decision: RoutingDecision | None
    new_demand: Mapping[str, list[JobRecord]]
    entries: RoutingEntries
    refused: Reason | None = None


def routing_step(
    state: ClusterState,
    config: ControllerConfig,
    now: datetime,
    demand: list[tuple[JobRecord, Eligibility]],
    out: Outcomes,
    reserves: Mapping[str, Reserve] | None = None,
) -> Routed:
    """``route_demand`` over every group; each job is told where it goes (or why nowhere). No decision when
    routing refused its input (never expected: the inputs are built here). ``reserves``: the spot groups'
    restart reserves (engine/reserve.py), floors under their ``min_slices``."""
    reserves = reserves or {}
    gang_sizes: dict[str, set[int]] = {}
    for _, where in demand:
        for view in where.views:
            base, k = base_of(view)
            if k is not None:
                gang_sizes.setdefault(base, set()).add(k)
    groups = routing_groups(state, now, gang_sizes, {g: r.floor for g, r in reserves.items()})
    entries, kept = _entries(state, demand, config.routing_memo)
    try:
        decision = route_demand(groups, entries, now, memo=config.routing_memo)
    except DomainError as err:
        reason = Reason("routing_failed", f"routing refused its input: {err.message}")
        out.unmet_jobs([rec for rec, _ in demand], reason)
        return Routed(None, {}, kept, reason)
    new_demand: dict[str, list[JobRecord]] = {}
    cannot: dict[int, Reason] = {}
    for d in decision.entry_decisions:
        rec = demand[d.entry_index][0]
        job_id = rec.spec.job_id
        routing = Reason(
            d.reason.code, d.explanation, d.reason.resource, d.reason.need, d.reason.have, d.reason.limit
        )
        if d.group is None:
            out.unmet.append(UnmetDemandView((job_id,), d.reason.code, d.explanation))
            why = cannot.get(id(d.reason))  # entries of one shape share their unmet reason
            if why is None:
                why = cannot[id(d.reason)] = Reason(
                    d.reason.code, f"cannot buy capacity for it now: {d.reason.message}"
                )
            out.decide(job_id, JobOutcome(routing=routing, routing_group=None, reason=why))
            continue
        out.decide(job_id, JobOutcome(routing=routing, routing_group=d.group))
        if d.reason.code == RoutedCode.IN_FLIGHT_CAPACITY.value:
            key = _open_order(state, d.group)
            waits_for = rec.order_key
            if key is not None:
                out.decide(job_id, JobOutcome(order_key=key))
                out.serves.append((key, job_id))
                waits_for = key
            out.decide(
                job_id,
                JobOutcome(
                    reason=Reason(
                        "waiting_for_capacity",
                        f"waiting for capacity already on its way in {base_of(d.group)[0]} (purchase {waits_for})",
                    )
                ),
            )
        else:
            new_demand.setdefault(d.group, []).append(rec)
    return Routed(decision, new_demand, kept)


def _entries(
    state: ClusterState, demand: list[tuple[JobRecord, Eligibility]], reuse: bool
) -> tuple[list[DemandEntry], RoutingEntries]:
    """Each job's routing entry, kept from the last pass while its eligible views are the same (an entry is
    a function of the job, which never changes, and of its views and gang size); built afresh when not
    ``reuse`` (the reference path, ``routing_memo = False``). Also the entries to keep for the next pass."""
    last = state.demand_entries if reuse else {}
    kept: dict[str, tuple[tuple[str, ...], int | None, DemandEntry]] = {}
    entries: list[DemandEntry] = []
    for rec, where in demand:
        job = rec.job
        if job is None:
            continue
        hit = last.get(job.id)
        if hit is None or hit[0] != where.views or hit[1] != where.gang:
            hit = (where.views, where.gang, demand_entry(job, where))
        kept[job.id] = hit
        entries.append(hit[2])
    return entries, kept


def _open_order(state: ClusterState, view: str) -> str | None:
    """The latest purchase whose slices of this group (or gang view) are still on their way."""
    group, gang = base_of(view)
    for sid in reversed(list(state.live_slice_ids)):
        sl = state.slices[sid]
        if sl.group == group and sl.gang_size == gang and sl.state is not NodeState.READY and sl.order_key:
            return sl.order_key
    return None


def _apply(
    state: ClusterState,
    out: Outcomes,
    now: datetime,
    routed: Routed | None = None,
    purchases: PurchasePlan | None = None,
) -> None:
    """The one place a pass writes what it decided (the ranking aside: ``Ranking.apply_to``), in this
    order: the routing entries kept for the next pass and routing's refusal (a story note), the purchases
    (``PurchasePlan.apply_to``: orders, slices, their stories, ``BuyCapacity``), each job's outcome, the
    orders they now wait for, the routing decision, the unmet demand and consolidation's moves. A skipped
    pass applies only its jobs' outcomes and the unmet demand."""
    if routed is not None:
        state.demand_entries = dict(routed.entries)
        if routed.refused is not None:
            state.note("autoscaler", "autoscaler", routed.refused)
    if purchases is not None:
        purchases.apply_to(state, now)
    for job_id, outcome in out.jobs.items():
        outcome.apply_to(state.jobs[job_id])
    for key, job_id in out.serves:
        state.orders[key].serves[job_id] = None
    if routed is not None and routed.decision is not None:
        state.last_routing = routed.decision
        state.last_routing_at = now
    state.unmet = tuple(out.unmet)
    if out.consolidations is not None:
        apply_moves(state, out.consolidations, now)


# The change-detection gate at the pass entry: a pass whose inputs did not change since the last one would
# decide the same again (route the same queue to the same groups, buy nothing), so it is skipped.
REROUTE_EVERY_S = 30.0  # a full pass at least this often anyway (budgets' spend windows, cost accrual)
PRICE_MOVE = 0.01  # a group's price moving by less than 1% since the last pass is not a change


@dataclass(frozen=True, slots=True)
class AutoscaleGate:
    """What the last full pass saw, when it changed nothing itself: the story's length (every job, node,
    slice and order move, every action and note appends to the story), the groups' offers bucketed by ``PRICE_MOVE``, the pending count;
    and when it must run again regardless (``due``: the FLEX batch wait of the oldest held job, a group's
    backoff expiry, ``REROUTE_EVERY_S``)."""

    story: int
    pending: int
    prices: tuple[tuple[object, ...], ...]
    due: datetime


def _price_digest(state: ClusterState) -> tuple[tuple[object, ...], ...]:
    out: list[tuple[object, ...]] = []
    for name, rec in state.groups.items():
        offer = rec.offer
        if offer is None:
            out.append((name,))
            continue
        price = float(offer.price_per_hour)
        bucket = math.floor(math.log(price) / math.log1p(PRICE_MOVE)) if price > 0 else None
        out.append((name, offer.region, offer.availability_zone, offer.spot, bucket))
    return tuple(out)


def _next_due(state: ClusterState, config: ControllerConfig, now: datetime) -> datetime:
    due = now + timedelta(seconds=REROUTE_EVERY_S)
    for rec in state.groups.values():
        if rec.backoff_until is not None and now < rec.backoff_until < due:
            due = rec.backoff_until
    if any(u.code == FLEX_WAITING for u in state.unmet):
        flex = [
            state.jobs[j].pending_since
            for j in state.pending_ids
            if (job := state.jobs[j].job) is not None and job.tier is Tier.FLEX
        ]
        oldest = min((t for t in flex if t is not None), default=now)
        due = min(due, max(now, oldest + timedelta(seconds=config.flex_batch_wait_s)))
    return due


def _unchanged(state: ClusterState, now: datetime) -> bool:
    gate = state.autoscale_gate
    return (
        isinstance(gate, AutoscaleGate)
        and now < gate.due
        and gate.story == len(state.story)
        and gate.pending == len(state.pending_ids)
        and gate.prices == _price_digest(state)
    )


def _flex_wait_step(state: ClusterState, config: ControllerConfig, now: datetime) -> Outcomes | None:
    """A skipped pass still tells held FLEX jobs how long they have waited (their reason names it): their
    outcomes and the unmet demand with the held FLEX entry's message renewed (``None``: none is held)."""
    for i, unmet in enumerate(state.unmet):
        if unmet.code != FLEX_WAITING:
            continue
        flex = [state.jobs[j] for j in unmet.job_ids]
        verdict = _flex_released(config, flex, now)
        out = Outcomes(
            unmet=[*state.unmet[:i], replace(unmet, message=verdict.message), *state.unmet[i + 1 :]]
        )
        for rec in flex:
            out.decide(rec.spec.job_id, held(verdict))
        return out
    return None


def autoscale(state: ClusterState, config: ControllerConfig, now: datetime) -> None:
    """Route unplaced demand and buy what routing launches (every purchase emits a ``BuyCapacity``), then
    consolidate: restartable jobs leave expensive, underused contracts (``StopWork`` + ``StartWork``).
    Skipped when nothing it reads changed since the last pass (``AutoscaleGate``): an idle tick costs a
    comparison (consolidation's savings change with time, so the gate's ``REROUTE_EVERY_S`` bounds how
    long a move can wait)."""
    if _unchanged(state, now):
        refreshed = _flex_wait_step(state, config, now)
        if refreshed is not None:
            _apply(state, refreshed, now)
        return
    before = len(state.story)
    _autoscale(state, config, now)
    if len(state.story) != before:  # it bought or noted something: its own output is the next pass's input
        state.autoscale_gate = None
        return
    state.autoscale_gate = AutoscaleGate(
        before, len(state.pending_ids), _price_digest(state), _next_due(state, config, now)
    )


def _autoscale(state: ClusterState, config: ControllerConfig, now: datetime) -> None:
    out = Outcomes()
    routed, purchases = _route_and_buy(state, config, now, out)
    out.consolidations = consolidation_step(state, config, now)
    _apply(state, out, now, routed, purchases)


def _rank(state: ClusterState, config: ControllerConfig, demand: Demand) -> None:
    """Procurement ranks the groups for this demand before eligibility: its exclusions decide eligibility,
    its ranks routing's order, and both are read from the group records (the pass's one early write)."""
    ranking = ranking_step(state, config, demand.gpus, demand.cpu_ram)
    if ranking is not None:
        ranking.apply_to(state)


def _route_and_buy(
    state: ClusterState, config: ControllerConfig, now: datetime, out: Outcomes
) -> tuple[Routed | None, PurchasePlan | None]:
    demand = demand_step(state, config, now, out)
    if not state.groups:
        if state.pending_ids:  # record why nothing can be bought yet
            _rank(state, config, demand)
            cost_band_step(state, config, now, eligibility_step(state, config, demand.queue), out)
        return None, None
    _rank(state, config, demand)
    eligible = eligibility_step(state, config, demand.queue)
    banded = cost_band_step(state, config, now, eligible, out)
    reserves = restart_reserves(state, config.fast_spare_per_services, now)
    short = any(r.deficit > 0 for r in reserves.values())
    if not banded and not short and not any(g.min_slices > 0 for g in state.groups.values()):
        # Nothing to route: no unplaced demand and no group to keep at a minimum size, so routing could
        # launch nothing. ``last_routing`` stays the last decision that had something to route.
        return None, None
    routed = routing_step(state, config, now, banded, out, reserves)
    if routed.decision is None:
        return routed, None
    passed = {rec.spec.job_id: where.passed_over for rec, where in banded}
    spares = {g: r.reason(config.fast_spare_per_services) for g, r in reserves.items() if r.deficit > 0}
    return routed, purchase_step(state, config, now, routed.decision, routed.new_demand, out, passed, spares)
