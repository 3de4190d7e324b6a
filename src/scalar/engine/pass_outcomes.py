"""What one autoscaling pass decided about each pending job, kept as values until the pass ends.

Each step of the pass (engine/autoscaler.py) records its decisions here (``Outcomes.decide``); a field a
step leaves ``KEEP`` is another step's to set, and a later step's decision wins. ``autoscaler._apply``
writes them to the jobs' records in one place at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from scalar.domain.consolidation import ConsolidationDecision
from scalar.domain.reasons import Reason
from scalar.engine.state import JobRecord, UnmetDemandView


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
    """What the pass decided so far: per job (in decision order), the unmet demand, orders to serve."""

    jobs: dict[str, JobOutcome] = field(default_factory=dict)
    unmet: list[UnmetDemandView] = field(default_factory=list)
    serves: list[tuple[str, str]] = field(default_factory=list)  # (order key, job id)
    consolidations: tuple[ConsolidationDecision, ...] = ()  # contracts emptied or kept (consolidation)

    def decide(self, job_id: str, outcome: JobOutcome) -> None:
        self.jobs[job_id] = self.jobs.get(job_id, JobOutcome()).then(outcome)

    def unmet_jobs(self, jobs: list[JobRecord], reason: Reason) -> None:
        for rec in jobs:
            self.decide(rec.spec.job_id, cannot_buy(reason))
        if jobs:
            self.unmet.append(
                UnmetDemandView(tuple(r.spec.job_id for r in jobs), reason.code, reason.message)
            )
