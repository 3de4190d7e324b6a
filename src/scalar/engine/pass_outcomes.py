"""What one autoscaling pass decided, kept as values until the pass ends.

Each step of the pass (engine/autoscaler.py) records what it decides about a pending job here
(``Outcomes.decide``); a field a step leaves ``KEEP`` is another step's to set, and a later step's decision
wins. Procurement's ranking of the groups is a ``Ranking``, the purchases a ``PurchasePlan`` of
``PlannedOrder`` values (the order, its slices, its story and its ``BuyCapacity``). ``autoscaler._apply``
writes the purchases, the jobs' records, the unmet demand and the routing decision in one place at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from scalar.domain.consolidation import ConsolidationDecision
from scalar.domain.market import CapacityRequest, NodeState
from scalar.domain.reasons import Reason
from scalar.engine.actions import BuyCapacity
from scalar.engine.lifecycle import OrderStatus
from scalar.engine.state import ClusterState, JobRecord, OrderRecord, SliceRecord, UnmetDemandView


class _Keep:
    """A ``JobOutcome`` field the step leaves as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = _Keep()


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What one step decided about a pending job; fields left ``KEEP`` are another step's to set."""

    routing: Reason | _Keep | None = KEEP
    routing_group: str | _Keep | None = KEEP
    reason: Reason | _Keep = KEEP
    order_key: str | _Keep = KEEP  # the purchase it waits for

    def apply_to(self, rec: JobRecord) -> None:
        """Write the decided fields to the job's record."""
        if not isinstance(self.routing, _Keep):
            rec.routing = self.routing
        if not isinstance(self.routing_group, _Keep):
            rec.routing_group = self.routing_group
        if not isinstance(self.reason, _Keep):
            rec.reason = self.reason
        if not isinstance(self.order_key, _Keep):
            rec.order_key = self.order_key

    def then(self, later: JobOutcome) -> JobOutcome:
        """This outcome with ``later``'s decided fields on top."""
        return JobOutcome(
            self.routing if isinstance(later.routing, _Keep) else later.routing,
            self.routing_group if isinstance(later.routing_group, _Keep) else later.routing_group,
            self.reason if isinstance(later.reason, _Keep) else later.reason,
            self.order_key if isinstance(later.order_key, _Keep) else later.order_key,
        )


def held(reason: Reason) -> JobOutcome:
    """Not routed this pass: the reason is both its routing and its one line."""
    return JobOutcome(routing=reason, routing_group=None, reason=reason)


def cannot_buy(reason: Reason) -> JobOutcome:
    return JobOutcome(
        routing=reason, reason=Reason(reason.code, f"cannot buy capacity for it now: {reason.message}")
    )


@dataclass(slots=True)
class Outcomes:
    """What the pass decided so far: per job (in decision order), the unmet demand, orders to serve, and
    consolidation's decisions (``None``: consolidation did not run, as on a skipped pass)."""

    jobs: dict[str, JobOutcome] = field(default_factory=dict)
    unmet: list[UnmetDemandView] = field(default_factory=list)
    serves: list[tuple[str, str]] = field(default_factory=list)  # (order key, job id)
    consolidations: tuple[ConsolidationDecision, ...] | None = None  # contracts emptied or kept

    def decide(self, job_id: str, outcome: JobOutcome) -> None:
        self.jobs[job_id] = self.jobs.get(job_id, JobOutcome()).then(outcome)

    def unmet_jobs(self, jobs: list[JobRecord], reason: Reason) -> None:
        for rec in jobs:
            self.decide(rec.spec.job_id, cannot_buy(reason))
        if jobs:
            self.unmet.append(
                UnmetDemandView(tuple(r.spec.job_id for r in jobs), reason.code, reason.message)
            )


@dataclass(frozen=True, slots=True)
class GroupRank:
    """Procurement's verdict on one group: its routing priority (1 = first; ``None``: not ranked), the
    ranking's reasons, and why it is excluded (``None``: it may serve jobs)."""

    priority: int | None
    reasons: tuple[Reason, ...]
    excluded: Reason | None


UNRANKED: Final = GroupRank(None, (), None)  # a group with no offer


@dataclass(frozen=True, slots=True)
class Ranking:
    """Procurement's ranking of every group for this pass's demand (``autoscaler.ranking_step``), and
    ``key``: the offers and demand it was ranked from (the same key, the same ranks)."""

    key: tuple[object, ...]
    groups: Mapping[str, GroupRank]

    def apply_to(self, state: ClusterState) -> None:
        """Write the ranks to the group records (eligibility, routing and contract sizing read them there)."""
        state.priorities_key = self.key
        for name, rank in self.groups.items():
            rec = state.groups[name]
            rec.priority = rank.priority
            rec.rank_reasons = rank.reasons
            rec.excluded = rank.excluded


@dataclass(frozen=True, slots=True)
class PlannedOrder:
    """One purchase the pass decided: order ``key`` (the next action id when the pass's purchases are
    recorded, in order) for ``group``, placed with ``reason``; ``price_reason`` (why that limit price) told in
    its story; ``slices`` slices of ``unit`` nodes (a gang's size, or the group's slice size) REQUESTING."""

    key: str
    group: str
    request: CapacityRequest
    for_jobs: tuple[str, ...]
    reason: Reason
    price_reason: Reason
    gang_size: int | None
    slices: int
    unit: int

    def record(self, now: datetime) -> OrderRecord:
        """The order's record, not yet placed; its capacity is held for the jobs it is for."""
        order = OrderRecord(
            self.key, self.group, self.request, now, self.for_jobs, self.reason, gang_size=self.gang_size
        )
        order.serves = dict.fromkeys(self.for_jobs)
        return order

    def action(self) -> BuyCapacity:
        return BuyCapacity(
            action_id=self.key,
            reason=self.reason,
            group=self.group,
            request=self.request,
            for_jobs=self.for_jobs,
        )


@dataclass(frozen=True, slots=True)
class PurchasePlan:
    """The purchase step's answer (``buying.purchase_step``): the orders to place, in order."""

    orders: tuple[PlannedOrder, ...] = ()

    def apply_to(self, state: ClusterState, now: datetime) -> None:
        """Record each order (PLACED, its price's why in its story), its slices (REQUESTING) and its
        ``BuyCapacity``, one order after the other."""
        for planned in self.orders:
            key = state.next_id("act")
            assert key == planned.key, f"purchase {planned.key} planned, {key} recorded"
            order = planned.record(now)
            state.orders[key] = order
            state.move_order(order, OrderStatus.PLACED, planned.reason)
            state.note("order", key, planned.price_reason)
            for _ in range(planned.slices):
                sl = SliceRecord(
                    state.next_id("slice"), planned.group, key, planned.unit, planned.gang_size, now
                )
                state.add_slice(sl, NodeState.REQUESTING, Reason("requested", f"requested in order {key}"))
                order.slice_ids.append(sl.id)
            state.emit(planned.action(), (key, planned.group, *planned.for_jobs))
