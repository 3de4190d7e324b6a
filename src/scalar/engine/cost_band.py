"""The cost band: which of a job's eligible groups host it within procurement's tolerance of the cheapest.

``HostCosts.cheapest`` prices hosting a job on each group that can take it now: its share of the nodes
holding it (``hosting_cost_per_hour``) per unit of work, with the rework spot interruptions are expected to
cost it (``domain.contracts.expected_job_cost``: a FLEX job's duration scales with the model's throughput,
a block paid whole adds the idle time it commits to that the forecast will not fill,
``contract_sizing.block_commitment``, so short bursts go to hourly sellers and sustained demand to blocks;
a long job that does not checkpoint loses its work at every interruption; the published hazards are
calibrated by the preemptions seen on the spot nodes held, ``interruption_calibration``, and a job whose
interrupted run outlived its estimate is twice that run long, ``known_work_s``). A FLEX job is kept among the
hosts where that rework stays within ``flex_max_rework`` of its work, when any is; a FAST job among its
preferred provider's and those that bring it back in time. The band is those within
``host_cost_tolerance`` of the cheapest (``cost_band``); the others are passed over with their reason.
Node headroom and in-flight slices are looked up once per pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from scalar.domain.contracts import (
    Forecast,
    JobCost,
    expected_boot_s,
    expected_downtime_s,
    expected_job_cost,
    hazard_per_hour,
    interruption_calibration,
    known_work_s,
)
from scalar.domain.market import NodeState
from scalar.domain.money import usd_fixed_plain
from scalar.domain.offers import Offer
from scalar.domain.packing_model import Job
from scalar.domain.procurement import ProcurementPolicy, cost_band, hosting_cost_per_hour
from scalar.domain.reasons import Reason
from scalar.domain.release import BLOCK_SELLERS
from scalar.domain.routing_model import Availability
from scalar.domain.tier import Tier
from scalar.engine.config import ControllerConfig
from scalar.engine.contract_sizing import alternative_price, block_commitment, forecast_for
from scalar.engine.groups import Eligibility, availability_of, base_of, node_headroom
from scalar.engine.reserve import spared_groups
from scalar.engine.state import ClusterState, GroupRecord


def published_hazard(offer: Offer, policy: ProcurementPolicy) -> float:
    """Interruptions per hour ``offer``'s published rate stands for (``contracts.hazard_per_hour``)."""
    return hazard_per_hour(
        offer,
        period_hours=policy.interruption_period_hours,
        unpublished_rate=policy.unpublished_interruption_rate,
    )


@dataclass(frozen=True, slots=True)
class SpotRisk:
    """What the spot capacity held so far says of the published interruption rates: ``seen`` preemptions
    over ``node_hours`` where the published hazards predicted ``expected``; the cost band prices every spot
    hazard at ``factor`` x the published one. ``boots``: per seller, the boots seen and the mean time to
    READY the cost band expects (``contracts.expected_boot_s``)."""

    seen: int
    expected: float
    node_hours: float
    factor: float
    boots: tuple[tuple[str, int, float], ...]


def spot_risk(state: ClusterState, policy: ProcurementPolicy) -> SpotRisk:
    """The calibration of the published interruption rates by the preemptions seen on every spot group's
    nodes (``contracts.interruption_calibration``), and the boot times learnt per seller."""
    seen = 0
    expected = 0.0
    node_hours = 0.0
    for name, (n, hours) in state.spot_exposure().items():
        group = state.groups.get(name)
        if group is None or group.offer is None:
            continue
        seen += n
        node_hours += hours
        expected += published_hazard(group.offer, policy) * hours
    boots = tuple(
        (provider, n, expected_boot_s(provider, n, total_s))
        for provider, (n, total_s) in sorted(state.boot_seen.items())
    )
    factor = interruption_calibration(seen, expected, policy.interruption_prior)
    return SpotRisk(seen, expected, node_hours, factor, boots)


class HostCosts:
    """What hosting a job costs on each group, for the cost band (node headroom and in-flight slices
    looked up once per pass)."""

    def __init__(
        self,
        state: ClusterState,
        policy: ProcurementPolicy,
        now: datetime,
        config: ControllerConfig | None = None,
    ) -> None:
        self.state = state
        self.policy = policy
        self.now = now
        self.config = config  # for a block seller's commitment (its book, the forecast, the market's clock)
        self._headrooms: dict[str, int] = {}
        self._flying: set[str] | None = None
        self._calibration: float | None = None
        self._boots: dict[str, float] = {}
        self._spared: set[str] | None = None
        # per block-seller group: its steady arrivals and the hourly alternative's price, once a pass
        self._forecasts: dict[str, tuple[Forecast, tuple[Decimal | None]]] = {}

    def cheapest(
        self,
        job: Job,
        where: Eligibility,
        alike: int,
        checkpoint_s: float | None = None,
        restarted: bool = False,
        longest_run_s: float = 0.0,
        down_s: float = 0.0,
        ran_s: float = 0.0,
    ) -> Eligibility:
        """Narrow a job's groups to those hosting it within procurement's cost band of the cheapest group
        that can take it now (available, with node headroom or capacity on its way): a job is not bought a
        node that costs it clearly more than another shape would. ``alike`` jobs of its shape are waiting:
        the cost is that of the nodes holding them all, shared out. A FAST job keeps the seed's size rule
        when the preferred provider can host it now (Prime's pods start in minutes, VMs in up to ten): its
        band is drawn among that provider's groups, except for a short service on its first run (``restarted``
        false; fewer than ``short_service_interruptions`` expected on the host, so it waits for one boot
        only) that the preferred provider hosts at more than ``fast_preference_limit`` x the cheapest other
        host: such hosts join its band. The seed's ranking decides within the band.
        ``checkpoint_s``: how often the job checkpoints (``None``: never), which bounds its rework;
        ``longest_run_s``: the most work one of its interrupted runs did, below which its duration is not
        priced (``domain.contracts.known_work_s``). A restarted FAST job that has waited ``down_s`` in all
        and run ``ran_s`` goes where it is expected back within what is left of ``fast_restart_wait_s``
        (``_back_soon``). A FLEX job's band is drawn among the hosts where its expected rework is within
        ``flex_max_rework`` when any is (the others: ``flex_rework``)."""
        if len(where.views) < 2:
            return where
        priced: dict[str, Decimal] = {}
        detail: dict[str, JobCost] = {}
        waits: dict[str, float] = {}
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
                expected = expected_job_cost(
                    cost,
                    rec.offer,
                    job.tier,
                    expected_s=known_work_s(job.expected_duration_sec, longest_run_s),
                    checkpoint_s=checkpoint_s,
                    period_hours=self.policy.interruption_period_hours,
                    unpublished_rate=self.policy.unpublished_interruption_rate,
                    hazard=self._hazard(rec),
                )
                if self.config is not None and rec.provider in BLOCK_SELLERS:
                    nodes = (
                        float(cost * alike / rec.offer.price_per_hour) if rec.offer.price_per_hour else 1.0
                    )
                    commitment = block_commitment(
                        self.state, self.config, rec, job, alike, nodes, self.now, *self._block_inputs(rec)
                    )
                    if commitment is not None:
                        expected = expected.with_commitment(commitment)
                detail[view] = expected
                priced[view] = expected.per_work_hour
        costs = priced
        tolerance = float(self.policy.host_cost_tolerance)
        budget = self.policy.fast_max_wait_s
        slow: set[str] = set()
        heavy: set[str] = set()
        if job.tier is Tier.FLEX and math.isfinite(self.policy.flex_max_rework):
            within = {v: c for v, c in priced.items() if detail[v].rework <= self.policy.flex_max_rework}
            if within:
                heavy = {v for v in priced if v not in within}
                costs = within
        target = f"{budget:g} s FAST wait target"
        preferred = self.policy.preferred_provider(job.gpu_count)
        if job.tier is Tier.FAST:
            mine = {v: c for v, c in priced.items() if self.state.groups[base_of(v)[0]].provider == preferred}
            # Seed 000's rule sends 8+ GPUs to blocks for sustained demand: a block the forecast leaves mostly
            # idle is not preferred (its commitment over the tolerance), and the job is priced everywhere.
            mine = {v: c for v, c in mine.items() if self._commitment_factor(detail[v]) <= tolerance}
            costs = mine or priced
            if mine and not restarted:
                costs = {**mine, **self._short_service_hosts(mine, priced, detail)}
            if math.isfinite(self.policy.fast_max_wait_s):
                waits = {v: self._downtime(v, detail[v], detail[v].run_hours) for v in priced}
                costs = self._within_wait(costs, priced, waits, budget)
                slow = {v for v in priced if v not in costs and waits[v] > budget}
            if restarted and priced and math.isfinite(self.policy.fast_restart_wait_s):
                left_h = max(0.0, job.expected_duration_sec - ran_s) / 3600.0
                waits = {v: self._downtime(v, detail[v], left_h) for v in priced}
                budget = max(0.0, self.policy.fast_restart_wait_s - down_s)
                target = (
                    f"{budget:.0f} s left of the {self.policy.fast_restart_wait_s:g} s a restarted FAST "
                    f"service may wait (it has waited {down_s:.0f} s)"
                )
                costs = self._back_soon(costs, priced, waits, budget)
                budget = max(budget, min(waits[v] for v in costs))  # none back in time: the soonest kept
                slow = {v for v in priced if v not in costs and waits[v] > budget}
        band = set(cost_band(costs, self.policy.host_cost_tolerance))
        if not band or len(band) == len(where.views):
            return where
        cheapest = min(costs.values())
        limit = cheapest * self.policy.host_cost_tolerance
        dropped: list[tuple[str, Reason]] = []
        for view in where.views:
            if view not in priced or view in band:
                continue
            if view in heavy:
                why = Reason(
                    "flex_rework",
                    f"{view} would host it at {detail[view].describe()}, over the {self.policy.flex_max_rework:.0%} "
                    f"of its work a FLEX job may be expected to redo when another host keeps it within",
                    "rework",
                    self.policy.flex_max_rework,
                    round(detail[view].rework, 3),
                )
            elif view in slow:
                why = Reason(
                    "fast_wait",
                    f"{view} would keep a FAST job waiting {waits[view]:.0f} s (a boot of "
                    f"{self._boot_s(self.state.groups[base_of(view)[0]].provider):.0f} s first when bought, "
                    f"then after each interruption expected), over the {target}",
                    "expected_wait_s",
                    round(budget, 1),
                    round(waits[view], 1),
                )
            elif view in costs:
                why = Reason(
                    "costlier_host",
                    f"{view} would host it at {detail[view].describe()}, over "
                    f"{self.policy.host_cost_tolerance:g} x the cheapest host's {usd_fixed_plain(cheapest, 4)}/work-h",
                    "cost_per_work_hour",
                    str(cheapest),
                    str(priced[view]),
                    str(limit),
                )
            else:
                why = Reason(
                    "fast_keeps_preferred_provider",
                    f"a FAST job of {job.gpu_count} GPUs goes to {preferred} when it can host it now "
                    f"(seed 000's size rule) unless it is a short first run hosted for over "
                    f"{self.policy.fast_preference_limit} x less elsewhere; {view} would cost "
                    f"{detail[view].describe()}",
                    "provider",
                    preferred,
                    self.state.groups[base_of(view)[0]].provider,
                )
            dropped.append((view, why))
        views = tuple(v for v in where.views if v in band or v not in priced)
        return Eligibility(views, where.gang, where.passed_over + tuple(dropped))

    @staticmethod
    def _commitment_factor(cost: JobCost) -> float:
        return 1.0 if cost.commitment is None else cost.commitment.factor

    @staticmethod
    def _within_wait(
        costs: dict[str, Decimal], priced: dict[str, Decimal], waits: dict[str, float], budget: float
    ) -> dict[str, Decimal]:
        """A FAST job's hosts narrowed to those whose expected downtime is within ``budget``: among
        ``costs`` (the preferred provider's) if any is, else among every priced host; unchanged if none is
        (the job still runs, as soon as it can)."""
        within = {v: c for v, c in costs.items() if waits[v] <= budget}
        if within:
            return within
        return {v: c for v, c in priced.items() if waits[v] <= budget} or costs

    @classmethod
    def _back_soon(
        cls, costs: dict[str, Decimal], priced: dict[str, Decimal], waits: dict[str, float], budget: float
    ) -> dict[str, Decimal]:
        """A restarted FAST job's hosts: those expected to bring it back within ``budget`` (``_within_wait``),
        else, when none can, those that bring it back soonest."""
        if any(w <= budget for w in waits.values()):
            return cls._within_wait(costs, priced, waits, budget)
        soonest = min(waits.values())
        return {v: c for v, c in priced.items() if waits[v] <= soonest}

    def _downtime(self, view: str, cost: JobCost, hours: float) -> float:
        """A FAST job's expected time without a node on ``view``'s group over the next ``hours`` of its run
        (all of it; the rest of it, for a restart): a new node's boot first (a job routed to procurement
        waits for one), then one per interruption expected (``contracts.expected_downtime_s``)."""
        rec = self.state.groups[base_of(view)[0]]
        if self._spared is None:
            self._spared = spared_groups(self.state, self.policy.fast_spare_per_services, self.now)
        if rec.name in self._spared:  # its interruptions restart on a spare: the boot to its first node only
            return expected_downtime_s(cost.hazard, 0.0, self._boot_s(rec.provider), first_boot=True)
        return expected_downtime_s(cost.hazard, hours, self._boot_s(rec.provider), first_boot=True)

    def _boot_s(self, provider: str) -> float:
        found = self._boots.get(provider)
        if found is None:
            n, total_s = self.state.boot_seen.get(provider, (0, 0.0))
            found = self._boots[provider] = expected_boot_s(provider, n, total_s)
        return found

    def _short_service_hosts(
        self, mine: dict[str, Decimal], priced: dict[str, Decimal], detail: dict[str, JobCost]
    ) -> dict[str, Decimal]:
        """The other providers' hosts a FAST job on its first run may leave the preferred provider for: those
        it is expected to leave before ``short_service_interruptions`` interruptions (so one boot is all it
        waits), when the preferred provider's cheapest host costs over ``fast_preference_limit`` x theirs.
        A long service stays where a restart after each interruption is quickest."""
        factor = self.policy.fast_preference_limit
        if factor is None:
            return {}
        short = {
            v: c
            for v, c in priced.items()
            if v not in mine
            and detail[v].hazard * detail[v].run_hours < self.policy.short_service_interruptions
        }
        if not short or min(mine.values()) <= factor * min(short.values()):
            return {}
        return short

    def _block_inputs(self, rec: GroupRecord) -> tuple[Forecast, tuple[Decimal | None]]:
        """A block-seller group's steady arrivals and the hourly alternative's price, once a pass."""
        found = self._forecasts.get(rec.name)
        if found is None:
            assert self.config is not None
            arrivals = forecast_for(self.state, self.config, rec, [], self.now)
            found = self._forecasts[rec.name] = (arrivals, (alternative_price(self.state, rec),))
        return found

    def _hazard(self, rec: GroupRecord) -> float | None:
        """The group's interruptions per hour: its offer's published hazard times the calibration the
        preemptions seen on the spot nodes held give (``contracts.interruption_calibration``); ``None`` for
        on-demand capacity."""
        offer = rec.offer
        if offer is None or not offer.spot:
            return None
        if self._calibration is None:
            self._calibration = spot_risk(self.state, self.policy).factor
        return published_hazard(offer, self.policy) * self._calibration

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
