"""The cost band: which of a job's eligible groups host it within procurement's tolerance of the cheapest.

``HostCosts.cheapest`` prices hosting a job on each group that can take it now: its share of the nodes
holding it (``hosting_cost_per_hour``) per unit of work, with the rework spot interruptions are expected to
cost it (``domain.contracts.expected_job_cost``: a FLEX job's duration scales with the model's throughput,
a long job that does not checkpoint loses its work at every interruption), and keeps those within
``host_cost_tolerance`` of the cheapest (``cost_band``); the others are passed over with their reason.
Node headroom and in-flight slices are looked up once per pass.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from scalar.domain.contracts import JobCost, expected_job_cost
from scalar.domain.market import NodeState
from scalar.domain.money import usd
from scalar.domain.packing_model import Job
from scalar.domain.procurement import ProcurementPolicy, cost_band, hosting_cost_per_hour
from scalar.domain.reasons import Reason
from scalar.domain.routing_model import Availability
from scalar.domain.tier import Tier
from scalar.engine.groups import Eligibility, availability_of, base_of, node_headroom
from scalar.engine.state import ClusterState, GroupRecord


class HostCosts:
    """What hosting a job costs on each group, for the cost band (node headroom and in-flight slices
    looked up once per pass)."""

    def __init__(self, state: ClusterState, policy: ProcurementPolicy, now: datetime) -> None:
        self.state = state
        self.policy = policy
        self.now = now
        self._headrooms: dict[str, int] = {}
        self._flying: set[str] | None = None

    def cheapest(
        self,
        job: Job,
        where: Eligibility,
        alike: int,
        checkpoint_s: float | None = None,
        restarted: bool = False,
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
        ``checkpoint_s``: how often the job checkpoints (``None``: never), which bounds its rework."""
        if len(where.views) < 2:
            return where
        priced: dict[str, Decimal] = {}
        detail: dict[str, JobCost] = {}
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
                    expected_s=job.expected_duration_sec,
                    checkpoint_s=checkpoint_s,
                    period_hours=self.policy.interruption_period_hours,
                    unpublished_rate=self.policy.unpublished_interruption_rate,
                )
                detail[view] = expected
                priced[view] = expected.per_work_hour
        costs = priced
        preferred = self.policy.preferred_provider(job.gpu_count)
        if job.tier is Tier.FAST:
            mine = {v: c for v, c in priced.items() if self.state.groups[base_of(v)[0]].provider == preferred}
            costs = mine or priced
            if mine and not restarted:
                costs = {**mine, **self._short_service_hosts(mine, priced, detail)}
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
                    f"{view} would host it at {detail[view].describe()}, over "
                    f"{self.policy.host_cost_tolerance:g} x the cheapest host's {usd(cheapest)}/work-h",
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
