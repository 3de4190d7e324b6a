"""Scalar in the loop: the engine's own ``Controller`` decides, this driver carries its actions to the market.

This is what the runtime does, in virtual time and one process: at each moment it tells the controller
what happened (``MarketObserved`` once per market hour and after its own orderbook purchases,
``JobSubmitted`` for arrivals, ``NodeReported`` for the market's events, ``Tick`` otherwise), executes the
actions it answers with (``BuyCapacity`` -> ``buy``, ``StartWork`` -> ``start_work`` on every node of the
placement, ``StopWork`` -> ``stop_work``, ``ReleaseBlock`` -> ``release``,
``ReleaseNodes`` -> ``release_nodes``) and feeds the sellers' answers
back at the same instant (``OrderUpdated``, ``JobStarted``) until the controller has nothing more to do.
No decision is made here.

One translation, as a runtime must make it: the market reports a job killed by its node's end
(preemption, contract end, release) as a job end with ``job_succeeded = False``; for the controller that
is a preemption (the job did nothing wrong and must run again), so it is reported without an outcome.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from scalar.domain.market import NodeEvent, NodeState, Order, OrderState
from scalar.domain.offers import SFCOMPUTE
from scalar.engine import (
    BuyCapacity,
    Controller,
    ControllerConfig,
    Event,
    JobSpec,
    JobStarted,
    JobSubmitted,
    MarketBook,
    MarketObserved,
    NodeReported,
    OrderUpdated,
    ReleaseBlock,
    ReleaseNodes,
    SaleUpdated,
    SellCapacity,
    StartWork,
    StopWork,
    Tick,
)
from scalar.engine.lifecycle import JobState
from scalar.providers.base import ProviderError
from scalar.sim.dynamic.market import MarketSession, market_hour
from scalar.sim.dynamic.workload import DynamicJob

KILLED = "killed"


def job_spec(job: DynamicJob, at: datetime, checkpoint_s: float | None = None) -> JobSpec:
    return JobSpec(
        job_id=job.job_id,
        tier=job.tier.value,
        gpu_count=job.gpu_count,
        vram_per_gpu_gb=job.vram_per_gpu_gb,
        cpu_cores=job.cpu_cores,
        ram_gb=job.ram_gb,
        expected_duration_sec=max(1.0, job.expected_s),
        name=job.job_id,
        gpu_models=job.models,
        share_gpu=job.share_gpu,
        submitted_at=at,
        checkpoint_interval_s=checkpoint_s,
    )


def as_preemption(event: NodeEvent) -> NodeEvent:
    """A job killed because its node stopped is a preemption for the controller, not a failure."""
    if event.job_id is not None and event.job_succeeded is False:
        return NodeEvent(
            node_id=event.node_id,
            block_id=event.block_id,
            at=event.at,
            state=event.state,
            job_id=event.job_id,
            job_succeeded=None,
            reason=event.reason,
            details=event.details,
        )
    return event


class EngineDriver:
    """Runs one ``Controller`` against a market session (the ``scalar`` and ``on-demand`` policies)."""

    def __init__(
        self, config: ControllerConfig, session: MarketSession, checkpoint_s: float | None = None
    ) -> None:
        self.controller = Controller(config)
        self.checkpoint_s = checkpoint_s  # the workload's: told to the engine with every job
        self.session = session
        self._seq = 0
        self._hour: int | None = None
        self._stale_book = False
        self.live_jobs = 0
        self.submitted = 0
        self.refused: set[str] = set()
        self.provider_errors = 0
        self.live: dict[str, None] = {}  # nodes bought and not yet stopped

    def _sid(self, kind: str) -> str:
        self._seq += 1
        return f"sim-{kind}-{self._seq:07d}"

    def _observe(self, now: datetime) -> MarketObserved:
        offers = self.session.offers(now, fresh=self._stale_book)
        books: dict[str, MarketBook] = {}
        for instance_type in self.session.book_types():
            book = self.session.market.orderbook(instance_type, now)
            if book is not None:
                books[instance_type] = MarketBook(book.asks, book.bids)
        self._stale_book = False
        self._hour = market_hour(now)
        return MarketObserved(self._sid("market"), offers, now, books, tuple(self.session.providers))

    def step(self, now: datetime, arrivals: list[DynamicJob], events: list[NodeEvent]) -> None:
        feed: list[Event] = []
        if self._hour != market_hour(now) or self._stale_book:
            feed.append(self._observe(now))
        for job in arrivals:
            feed.append(JobSubmitted(self._sid("submit"), job_spec(job, now, self.checkpoint_s)))
            self.submitted += 1
        for e in events:
            feed.append(NodeReported(self._sid("node"), as_preemption(e)))
            if e.state in (NodeState.FAILED, NodeState.TERMINATED):
                self.live.pop(e.node_id, None)
        if not feed:
            feed.append(Tick(self._sid("tick")))
        rounds = 0
        while feed:
            actions = self.controller.step(now, feed)
            feed = []
            for action in actions:
                feed.extend(self._execute(action, now))
            rounds += 1
            if rounds > 50:  # pragma: no cover - the controller converges in a few rounds
                raise RuntimeError("the controller keeps asking for more at one instant")
        if arrivals:
            for job in arrivals:
                view = self.controller.job(job.job_id)
                if view is not None and view.state is JobState.REJECTED:
                    self.refused.add(job.job_id)

    def _execute(self, action: object, now: datetime) -> list[Event]:
        s = self.session
        if isinstance(action, BuyCapacity):
            try:
                order = s.buy(action.request, action.action_id, now)
            except ProviderError as err:
                self.provider_errors += 1
                order = Order(
                    action.action_id, action.action_id, OrderState.REJECTED, action.request, None, str(err)
                )
            if action.request.provider == SFCOMPUTE:
                self._stale_book = True
            if order.state is OrderState.FILLED and order.block is not None:
                for node_id in order.block.node_ids:
                    self.live[node_id] = None
            return [OrderUpdated(self._sid("order"), action.action_id, order)]
        if isinstance(action, StartWork):
            started: list[Event] = []
            for p in action.placements:
                try:
                    s.start_work(p.node_id, action.job_id, action.expected_duration_s, now, p.gpu_indices)
                except ProviderError as err:  # the node is gone: for the controller, a preemption
                    self.provider_errors += 1
                    block = s.ledger.node_block.get(p.node_id, "")
                    gone = NodeEvent(p.node_id, block, now, job_id=action.job_id, reason=str(err))
                    started.append(NodeReported(self._sid("node"), gone))
                    continue
                started.append(JobStarted(self._sid("started"), action.job_id, p.node_id))
            return started
        if isinstance(action, StopWork):
            try:
                s.stop_work(action.node_id, action.job_id, now)
            except ProviderError:
                self.provider_errors += 1
            return []
        if isinstance(action, ReleaseBlock):
            s.release(action.provider, action.block_id, now)
            bill = s.ledger.blocks.get(action.block_id)
            for node_id in bill.grant.node_ids if bill is not None else ():
                self.live.pop(node_id, None)
            return []
        if isinstance(action, ReleaseNodes):
            s.release_nodes(action.provider, action.block_id, action.node_ids, now)
            for node_id in action.node_ids:
                self.live.pop(node_id, None)
            return []
        if isinstance(action, SellCapacity):  # the simulator's bill has no resale: the offer is declined
            return [
                SaleUpdated(self._sid("sale"), action.action_id, None, "the simulator takes no sell orders")
            ]
        raise TypeError(f"unknown action {type(action).__name__}")  # pragma: no cover

    def wake(self, now: datetime, tick_s: float) -> datetime | None:
        """A tick every ``tick_s`` while jobs wait; else when the first idle node is due for release or a
        reservation lapses (boots, job ends and contract ends are market moves: they wake the loop)."""
        state = self.controller.state
        if state.pending_ids:
            return now + timedelta(seconds=tick_s)
        times: list[datetime] = []
        idle = timedelta(seconds=self.controller.config.idle_release_s)
        for node_id in self.live:
            rec = state.nodes.get(node_id)
            if (
                rec is not None
                and rec.state is NodeState.READY
                and not rec.jobs
                and rec.idle_since is not None
            ):
                times.append(rec.idle_since + idle)
        if state.next_schedule_at is not None:
            times.append(state.next_schedule_at)
        later = [t for t in times if t > now]
        return min(later) if later else (now + timedelta(seconds=tick_s) if times else None)

    def given_up(self) -> set[str]:
        return self.refused
