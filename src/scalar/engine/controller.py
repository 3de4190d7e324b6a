"""The controller: cluster state + ``step(now, events) -> actions``, deterministic.

Same config and the same sequence of ``(now, events)`` give the same actions and the same state: nothing
here reads a clock, does I/O or draws a random number, and every id it invents comes from a counter.
A restart rebuilds the state by replaying the persisted steps through a fresh controller.

One step:

1. accrue the cost of the time since the last step (state between steps is constant);
2. apply the events in order (each transition records the event's ``stimulus_id``);
3. end expired contracts, time out requests and boots, release blocks with no live node;
4. schedule pending jobs onto READY nodes (``StartWork``);
5. route what is still unplaced and buy for it (``BuyCapacity``);
6. offer the remaining time of idle SFCompute blocks the forecast will not use back to the seller
   (``SellCapacity``, engine/resale.py; its answer is a ``SaleUpdated`` event);
7. release idle blocks (``ReleaseBlock``).

Bad input never raises out of ``step``: an invalid job is REJECTED with its reasons, a stale or unknown
report is ignored and written into the story. Only a naive ``now`` (no time zone) raises.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from datetime import datetime
from itertools import chain

from scalar.domain.errors import DomainError
from scalar.domain.market import CAUSE_PREEMPTED, NodeState
from scalar.domain.offers import Offer
from scalar.domain.packing_scalar import job_shape
from scalar.domain.reasons import Reason
from scalar.engine import costs as cost_accounting
from scalar.engine import queries
from scalar.engine.actions import Action
from scalar.engine.agents import (
    end_removed_hosts,
    hold_for_agent,
    on_agent_registered,
    on_assignment_reported,
    on_host_registered,
    on_host_remove_requested,
    requeue_lost,
)
from scalar.engine.autoscaler import autoscale
from scalar.engine.budget import budgets_text
from scalar.engine.config import ControllerConfig
from scalar.engine.contract_sizing import FORECAST_WINDOW
from scalar.engine.events import (
    AgentRegistered,
    AssignmentReported,
    BudgetsChanged,
    Event,
    HostRegistered,
    HostRemoveRequested,
    JobCancelRequested,
    JobSpec,
    JobStarted,
    JobSubmitted,
    MarketObserved,
    NodeReported,
    OrderUpdated,
    SaleUpdated,
    Tick,
)
from scalar.engine.groups import refresh_groups
from scalar.engine.housekeeping import accrue, expire_blocks, release_dead_blocks, release_idle, timeouts
from scalar.engine.lifecycle import JobState, is_legal
from scalar.engine.purchases import on_order_updated
from scalar.engine.resale import offer_resales, on_sale_updated
from scalar.engine.scheduler import need_text, schedule
from scalar.engine.state import ClusterState, JobRecord, StoryEntry
from scalar.engine.transitions import finish, lose_node, preempt, refresh_slice
from scalar.engine.validation import job_from_spec, validate_job_spec


class Controller:
    """Holds the cluster state; ``step`` is the only way it changes."""

    def __init__(self, config: ControllerConfig | None = None) -> None:
        self.config = config if config is not None else ControllerConfig()
        self.state = ClusterState()

    # ---- the step ------------------------------------------------------------------------------------

    def step(self, now: datetime, events: Sequence[Event] = ()) -> list[Action]:
        if now.tzinfo is None or now.utcoffset() is None:
            raise ValueError(f"now {now.isoformat()} has no time zone; pass a UTC-aware datetime")
        state = self.state
        if state.now is not None and now < state.now:
            now = state.now  # time never runs backwards inside the controller
        accrue(state, now)
        state.now = now
        if state.observed_since is None:
            state.observed_since = now
        state.steps += 1
        state.outbox = []
        for event in events:
            state.cause = event.stimulus_id
            self._apply(event)
        state.cause = f"step-{state.steps:06d}"
        expire_blocks(state, now)
        timeouts(state, self.config, now)
        release_dead_blocks(state, now)
        end_removed_hosts(state)
        schedule(state, self.config, now)
        autoscale(state, self.config, now)
        offer_resales(state, now, self.config)
        release_idle(state, self.config, now)
        actions, state.outbox = state.outbox, []
        return actions

    def _apply(self, event: Event) -> None:
        if isinstance(event, JobSubmitted):
            self._submitted(event.spec)
        elif isinstance(event, JobCancelRequested):
            self._cancel(event.job_id)
        elif isinstance(event, MarketObserved):
            self._market(event)
        elif isinstance(event, OrderUpdated):
            on_order_updated(self.state, self.config, event.action_id, event.order)
        elif isinstance(event, NodeReported):
            self._node_reported(event)
        elif isinstance(event, JobStarted):
            self._started(event.job_id, event.node_id)
        elif isinstance(event, Tick):
            pass
        elif isinstance(event, HostRegistered):
            on_host_registered(self.state, event)
        elif isinstance(event, HostRemoveRequested):
            on_host_remove_requested(self.state, self.config, event)
        elif isinstance(event, AgentRegistered):
            on_agent_registered(self.state, event)
        elif isinstance(event, AssignmentReported):
            on_assignment_reported(self.state, event)
        elif isinstance(event, SaleUpdated):
            on_sale_updated(self.state, event)
        elif isinstance(event, BudgetsChanged):  # spend limits are part of the log: a replay decides the same
            self.config = dataclasses.replace(self.config, budgets=event.limits)
            self.state.note("budgets", "budgets", Reason("budgets_changed", budgets_text(event.limits)))
        else:  # pragma: no cover - the Event union is closed
            raise TypeError(f"unknown event {type(event).__name__}")

    # ---- event handlers ------------------------------------------------------------------------------

    def _submitted(self, spec: JobSpec) -> None:
        state = self.state
        job_id = str(spec.job_id)
        if job_id in state.jobs:
            state.note(
                "job", job_id, Reason("duplicate_submission", f"job {job_id} was already submitted; ignored")
            )
            return
        problems = validate_job_spec(spec, self.config, self.offers())
        job = None
        if not problems:
            try:
                job = job_from_spec(spec, state.at)
            except DomainError as err:
                problems = [Reason("invalid_spec", err.message)]
        rec = JobRecord(spec, job, spec.submitted_at or state.at, validation=tuple(problems))
        state.jobs[job_id] = rec
        if job is None:
            message = "; ".join(r.message for r in problems)
            state.move_job(rec, JobState.REJECTED, Reason("invalid_spec", f"job {job_id} refused: {message}"))
            return
        state.arrivals.setdefault(job.tier, deque()).append(state.at)  # the arrival forecast (housekeeping)
        state.arrived_jobs.append((state.at, job))  # the demand forecast of contract sizing
        forget_before = state.at - FORECAST_WINDOW
        while state.arrived_jobs and state.arrived_jobs[0][0] <= forget_before:
            state.arrived_jobs.popleft()
        state.shapes.observe(job_shape(job))  # the packer's online prior: jobs seen so far, never later ones
        state.move_job(
            rec,
            JobState.PENDING,
            Reason(
                "submitted",
                f"{job.tier.value} job {job_id} submitted: needs {need_text(job)}, {job.cpu_cores:g} CPU, "
                f"{job.ram_gb:g} GB RAM for {job.expected_duration_sec:g} s, priority {job.priority}",
            ),
        )

    def _cancel(self, job_id: str) -> None:
        state = self.state
        rec = state.jobs.get(job_id)
        if rec is None or rec.state is None:
            state.note("job", job_id, Reason("unknown_job", f"cancel for unknown job {job_id}; ignored"))
            return
        if not is_legal("job", rec.state, JobState.CANCELLED):
            state.note(
                "job", job_id, Reason("not_cancellable", f"job {job_id} is {rec.state.value}; cancel ignored")
            )
            return
        finish(
            state, rec, JobState.CANCELLED, Reason("cancelled", f"job {job_id} cancelled by request"), None
        )

    def _market(self, event: MarketObserved) -> None:
        state = self.state
        for provider in event.covered_providers:
            state.offers[provider] = tuple(o for o in event.offers if o.provider == provider)
        for instance_type, book in event.books.items():
            state.books[instance_type] = book
        refresh_groups(state, self.config)

    def _node_reported(self, event: NodeReported) -> None:
        state = self.state
        report = event.event
        node = state.nodes.get(report.node_id)
        if node is None:
            state.note(
                "node",
                report.node_id,
                Reason("unknown_node", f"report for unknown node {report.node_id}; ignored"),
            )
            return
        if report.job_id is not None:
            self._job_report(node.id, report.job_id, report.job_succeeded, report.reason)
        target = report.state
        if target is not None:
            target = hold_for_agent(self.config, node, target)
        if target is None or target is node.state or target is NodeState.REQUESTING:
            return
        if not is_legal("node", node.state, target):
            state.note(
                "node",
                node.id,
                Reason(
                    "stale_report",
                    f"node {node.id} reported {target.value} while {node.state.value}; ignored",
                ),
            )
            return
        why = report.reason or f"reported {target.value}"
        reason = Reason(f"node_{target.value}", f"node {node.id}: {why}")
        if target in (NodeState.FAILED, NodeState.TERMINATED):
            lose_node(state, node, target, reason, interrupted=report.details.get("cause") == CAUSE_PREEMPTED)
        elif target is NodeState.LOST:
            state.move_node(node, target, reason)
            requeue_lost(state, self.config, node, reason)
            refresh_slice(state, node.slice_id)
        else:
            state.move_node(node, target, reason)
            refresh_slice(state, node.slice_id)

    def _job_report(self, node_id: str, job_id: str, succeeded: bool | None, why: str | None) -> None:
        state = self.state
        rec = state.jobs.get(job_id)
        if rec is None or node_id not in rec.parts:
            state.note(
                "job",
                job_id,
                Reason("stale_report", f"node {node_id} reported job {job_id}, which is not on it; ignored"),
            )
            return
        if succeeded is None:
            preempt(
                state,
                rec,
                Reason("preempted", f"node {node_id} preempted job {job_id}: {why or 'no reason given'}"),
                node_id,
            )
        elif succeeded:
            finish(
                state,
                rec,
                JobState.SUCCEEDED,
                Reason("succeeded", f"job {job_id} finished on {node_id}"),
                node_id,
            )
        else:
            finish(
                state,
                rec,
                JobState.FAILED,
                Reason("failed", f"job {job_id} failed on {node_id}: {why or 'no reason given'}"),
                node_id,
            )

    def _started(self, job_id: str, node_id: str) -> None:
        state = self.state
        rec = state.jobs.get(job_id)
        if rec is not None and rec.state is JobState.RUNNING and node_id in rec.parts:
            return  # another node of a gang confirming
        if rec is None or rec.state is not JobState.SCHEDULED or node_id not in rec.parts:
            now_in = "unknown" if rec is None or rec.state is None else rec.state.value
            state.note(
                "job",
                job_id,
                Reason("stale_report", f"start of job {job_id} on {node_id} while {now_in}; ignored"),
            )
            return
        state.move_job(rec, JobState.RUNNING, Reason("running", f"job {job_id} runs on {node_id}"))
        rec.started_at = state.at

    # ---- helpers for callers -------------------------------------------------------------------------

    def offers(self) -> tuple[Offer, ...]:
        return tuple(chain.from_iterable(self.state.offers[p] for p in sorted(self.state.offers)))

    def validate(self, spec: JobSpec) -> list[Reason]:
        """``validate_job_spec`` against the offers this controller knows: what the API calls first."""
        return validate_job_spec(spec, self.config, self.offers())

    # ---- queries -------------------------------------------------------------------------------------

    def jobs(self) -> tuple[queries.JobView, ...]:
        return tuple(queries.job_view(r) for r in self.state.jobs.values())

    def job(self, job_id: str) -> queries.JobView | None:
        rec = self.state.jobs.get(job_id)
        return queries.job_view(rec) if rec is not None else None

    def nodes(self) -> tuple[queries.NodeView, ...]:
        return tuple(queries.node_view(r) for r in self.state.nodes.values())

    def blocks(self) -> tuple[queries.BlockView, ...]:
        return tuple(queries.block_view(r, self.state) for r in self.state.blocks.values())

    def orders(self) -> tuple[queries.OrderView, ...]:
        return tuple(queries.order_view(r) for r in self.state.orders.values())

    def scale_groups(self) -> tuple[queries.GroupView, ...]:
        return queries.group_views(self.state)

    def explain(self, job_id: str) -> queries.JobExplanation | None:
        return queries.explain(self.state, job_id, indexed=self.config.pending_index)

    def autoscaler_status(self) -> queries.AutoscalerStatus:
        return queries.autoscaler_status(self.state, self.config.procurement)

    def story(self, key: str) -> tuple[StoryEntry, ...]:
        return queries.story(self.state, key)

    def costs(self, tenant: str | None = None) -> cost_accounting.CostReport:
        """Spend; ``by_tenant`` splits it by the GPU-hours tenants' jobs held (only ``tenant``'s row if given)."""
        return cost_accounting.costs(self.state, tenant)

    @property
    def now(self) -> datetime | None:
        return self.state.now
