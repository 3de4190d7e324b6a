"""The leader: the lease, the controller rebuilt by replay, one fenced transaction per step, the executor.

Everything that steps the controller holds ``self.lock`` (one step at a time in the process). The step is
computed outside any write transaction and its result written in one short ``store.write(fence)``::

    with store.read() as tx: items = tx.unconsumed_inbox(...)   # short read; plus the stored stimuli
    actions = controller.step(now, fresh_events)                # no transaction open
    plan = projector.plan(...)                                  # projection rows + decisions
    with store.write(fence) as tx:                              # fence checked first
        appended = tx.append_batch(now, fresh_events)           # must store exactly these (else lost race)
        tx.add_actions(...); plan.apply(tx, ...)                # the outbox, projections, decisions
        tx.mark_inbox_consumed(...)                             # compare-and-set on the inbox cursor
        publication.write(tx, now)                              # the decision state previews run on:
                                                                # its header, the jobs the step changed

If that transaction fails after the in-memory step (fenced, a lost race, a database error), the controller
is ahead of the database: it is dropped and rebuilt by replay before the next step. A ``NotLeaderError`` (another process took the lease)
makes this process step down; it rebuilds when it wins the lease again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from scalar.domain.offers import Offer
from scalar.engine import (
    Action,
    BuyCapacity,
    Controller,
    MarketObserved,
    ReleaseBlock,
    ReleaseNodes,
    SellCapacity,
    StartWork,
    Tick,
)
from scalar.engine.codec import action_from_dict, event_from_dict, event_to_dict
from scalar.engine.events import Event
from scalar.engine.snapshot import market_key, market_snapshot
from scalar.providers.base import Provider
from scalar.runtime import budgets
from scalar.runtime.agent_backend import AGENT_PROVIDER
from scalar.runtime.auth import audit_actions
from scalar.runtime.executor import Outcome, execute, outbox_payload
from scalar.runtime.feed import NodeFeed, PriceCollector, Source
from scalar.runtime.projector import ProjectionPlan, Projector
from scalar.runtime.settings import Settings
from scalar.runtime.snapshot_store import MARKET_SNAPSHOT_KEY, Publication, SnapshotWriter
from scalar.runtime.step_metrics import StepLatency
from scalar.store import (
    IN_FLIGHT,
    ActionNotClaimedError,
    BatchAppend,
    Fence,
    NewAction,
    NewEvent,
    NotLeaderError,
    StaleStepError,
    Store,
    Tx,
)
from scalar.store import Action as StoredAction
from scalar.store.jsoncodec import canonical

log = logging.getLogger(__name__)

INBOX_BATCH = 1000


def new_event(event: Event, now: datetime) -> NewEvent:
    return NewEvent(event.stimulus_id, type(event).__name__, event_to_dict(event), now)


def inbox_event(item_id: int, payload: Mapping[str, Any], now: datetime) -> NewEvent:
    """An inbox row as the event it becomes (stimulus ``inbox:<id>``: consumed once, stored once)."""
    stimulus = f"inbox:{item_id}"
    return NewEvent(stimulus, str(payload["type"]), dict(payload, stimulus_id=stimulus), now)


PUBLISHED_OFFERS = "controller:offers"  # runtime_state key: the leader's offers after its last market step


def encode_offers(offers: tuple[Offer, ...], at: datetime) -> dict[str, Any]:
    return event_to_dict(MarketObserved("published-offers", offers, at))


def decode_offers(value: Mapping[str, Any] | None) -> tuple[Offer, ...]:
    """The offers ``encode_offers`` stored; ``()`` for nothing (or anything unreadable)."""
    if not value:
        return ()
    try:
        event = event_from_dict(value)
    except Exception:  # written by another version: collect our own instead
        return ()
    return event.offers if isinstance(event, MarketObserved) else ()


def subject_of(action: StoredAction) -> str:
    """What an action is about: actions about one job (start, stop) or block run in order, others in parallel."""
    body = action.payload.get("action", {})
    for field in ("job_id", "block_id"):
        if isinstance(body.get(field), str):
            return f"{field}:{body[field]}"
    return action.action_id


class Leader:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        providers: Mapping[str, Provider],
        sources: list[Source],
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.settings = settings
        self.providers = providers
        self.clock = clock
        self.lock = threading.RLock()
        self.controller: Controller | None = None
        self.published_market: tuple[object, ...] | None = None  # market_key of the last market snapshot
        self.snapshots = SnapshotWriter()  # the decision state's rows: what the last step published
        self.fence: Fence | None = None
        self.lease_expires_at: datetime | None = None
        self.reclaim = False
        self.last_price_at: datetime | None = None
        self.last_step_at: datetime | None = None
        self.projector = Projector()
        self.feed = NodeFeed(sources, settings.park_ttl_s)
        self.prices = PriceCollector(providers, settings.controller)
        self.actions_added = threading.Event()
        self._n = 0
        self.steps = 0
        self.step_latency = StepLatency()  # wall time of each tick's step (GET /metrics)
        self._pool: ThreadPoolExecutor | None = None
        self.published_offers: tuple[Offer, ...] = ()  # the controller's offers after its last step

    # ---- the lease -----------------------------------------------------------------------------------

    @property
    def epoch(self) -> int | None:
        return None if self.fence is None else self.fence.epoch

    def acquire(self, now: datetime) -> bool:
        """Acquire or renew the lease; on a new epoch, rebuild by replay. Returns whether we lead."""
        with self.lock:
            s = self.settings
            lease = self.store.try_acquire(s.lease_name, s.holder, now, s.lease_ttl_s)
            if not lease.is_leader:
                if self.fence is not None:
                    log.warning("lost the lease to %s (epoch %d): stepping down", lease.holder, lease.epoch)
                    self.step_down()
                return False
            self.lease_expires_at = lease.expires_at
            if self.controller is None or self.fence is None or lease.epoch != self.fence.epoch:
                self.fence = lease.fence
                self.controller = None
                try:
                    self.rebuild()
                except NotLeaderError:
                    self.step_down()
                    return False
                self.reclaim = True
                self.last_price_at = None
                log.info("leading at epoch %d (%d steps replayed)", lease.epoch, self.steps)
            return True

    def step_down(self) -> None:
        with self.lock:
            self.controller = None
            self.fence = None
            self.lease_expires_at = None

    def rebuild(self) -> None:
        """A fresh controller with every stored batch replayed (their actions dropped: already stored).

        A long log takes a while (about a minute per day of one-second ticks): the lease is renewed every
        ``lease_renew_s`` meanwhile, so a standby does not take over from a leader that is only replaying."""
        controller = Controller(self.settings.controller)
        steps = 0
        renewed = time.monotonic()
        for batch in self.store.read_batches():
            controller.step(batch.at, [event_from_dict(e.payload) for e in batch.events])
            steps += 1
            if time.monotonic() - renewed >= self.settings.lease_renew_s:
                self._renew_during_rebuild()
                renewed = time.monotonic()
        with self.store.read() as tx:
            self.feed.load(tx)
        self.projector.reset(controller)
        self.controller = controller
        self.published_market = None  # a new controller (or leader) publishes its market part again
        self.snapshots.reset()  # and every job's row
        self.steps = steps
        self.publish()

    def _renew_during_rebuild(self) -> None:
        s = self.settings
        lease = self.store.try_acquire(s.lease_name, s.holder, self.clock(), s.lease_ttl_s)
        if not lease.is_leader or self.fence is None or lease.epoch != self.fence.epoch:
            raise NotLeaderError(
                f"lost the lease to {lease.holder} while replaying the log", "rebuild when leading again"
            )
        self.lease_expires_at = lease.expires_at

    # ---- one step ------------------------------------------------------------------------------------

    def _provider_of(self, action: Action) -> tuple[str | None, dict[str, str]]:
        assert self.controller is not None
        state = self.controller.state
        if isinstance(action, BuyCapacity):
            return action.request.provider, {}
        if isinstance(action, (SellCapacity, ReleaseNodes)):
            return action.provider, {}
        if isinstance(action, ReleaseBlock):
            block = state.blocks.get(action.block_id)
            if block is not None and block.fixed:
                return AGENT_PROVIDER, {}  # a user-owned host: its agent is told to drain
            return action.provider, {}
        node_ids = action.node_ids if isinstance(action, StartWork) else (action.node_id,)
        blocks = {n: state.nodes[n].block_id for n in node_ids if n in state.nodes}
        first = state.nodes.get(node_ids[0])
        if first is not None and first.agent:
            return AGENT_PROVIDER, blocks  # its agent runs the work (runtime/agent_backend.py)
        return (first.node.block.provider if first is not None else None), blocks

    def commit(
        self,
        now: datetime,
        events: list[NewEvent],
        *,
        before: Callable[[Tx], None] | None = None,
        after: Callable[[Tx, BatchAppend], None] | None = None,
        market_changed: bool = False,
    ) -> list[Action]:
        """Step the controller with ``events`` (those not stored yet) outside any write transaction, then
        store the batch, its actions, projections and decisions in one short fenced transaction that also
        runs ``before`` (e.g. complete an action) and ``after`` (e.g. mark inbox rows consumed).

        Optimistic: the transaction checks the fence (``NotLeaderError``) and that exactly the stepped events
        are new (``before``/``after`` check their own cursors, e.g. the inbox's compare-and-set); a lost race
        rolls back and the controller, now ahead of the database, is rebuilt by replay (recomputed)."""
        with self.lock:
            controller, fence = self.controller, self.fence
            if controller is None or fence is None:
                raise NotLeaderError("not the leader", "acquire the lease first")
            stepped = False
            actions: list[Action] = []
            plan: ProjectionPlan | None = None
            rows: list[NewAction] = []
            published: tuple[object, ...] | None = None
            publication: Publication | None = None
            market_state: dict[str, Any] | None = None
            try:
                fresh = self._fresh(events)
                if fresh:
                    story_from = len(controller.state.story)
                    stepped = True
                    actions = controller.step(now, [event_from_dict(e.payload) for e in fresh])
                    plan = self.projector.plan(
                        controller, now, story_from=story_from, market_changed=market_changed
                    )
                    # the decision state previews run the controller's code on (runtime/preview.py), built
                    # outside the transaction: the jobs this step changed (runtime/snapshot_store.py); its
                    # large market part only when the market changed it
                    publication = self.snapshots.prepare(controller.state, controller.config.budgets)
                    market = market_key(controller.state)
                    if market != self.published_market:
                        market_state = market_snapshot(controller.state)
                        published = market
                with self.store.write(fence) as tx:
                    if before is not None:
                        before(tx)
                    appended = tx.append_batch(now, fresh)
                    stored = [e.stimulus_id for e in appended.new_events]
                    if stored != [e.stimulus_id for e in fresh]:
                        raise StaleStepError(
                            "another writer stored some of this step's events first",
                            "the step is recomputed from the log",
                        )
                    if plan is not None:
                        refused = budgets.gate(tx, controller.state, actions, now)  # spend limits, in this tx
                        for action in actions:
                            provider, blocks = self._provider_of(action)
                            payload = outbox_payload(action, provider, blocks)
                            if action.action_id in refused:
                                payload[budgets.REFUSED] = refused[action.action_id].to_dict()
                            rows.append(NewAction(action.action_id, type(action).__name__, payload))
                        tx.add_actions(
                            rows, now=now, created_seq=appended.last_seq, batch_id=appended.batch_id
                        )
                        audit_actions(tx, actions, controller.state, now, appended.batch_id)
                        plan.apply(tx, appended.batch_id)
                        if publication is not None:
                            publication.write(tx, now)
                        if market_state is not None:
                            tx.put_state(MARKET_SNAPSHOT_KEY, market_state, at=now)
                    if after is not None:
                        after(tx, appended)
            except NotLeaderError:
                log.warning("fenced: another controller leads now; stepping down")
                self.step_down()
                raise
            except BaseException:
                if stepped:  # the controller is ahead of the database: rebuild before the next step
                    self.controller = None
                self.snapshots.reset()
                raise
            if published is not None:
                self.published_market = published
            if publication is not None:
                self.snapshots.committed(publication)
            if plan is not None:
                plan.committed()
            self.last_step_at = now
            if stepped:
                self.steps += 1
                self.publish()
            if actions:
                self.actions_added.set()
            return actions

    def _fresh(self, events: list[NewEvent]) -> list[NewEvent]:
        """The events not stored yet (first of each stimulus), as a replay will see them (canonical JSON)."""
        if not events:
            return []
        with self.store.read() as tx:
            stored = tx.stored_stimuli([e.stimulus_id for e in events])
        fresh: dict[str, NewEvent] = {}
        for e in events:
            if e.stimulus_id not in stored and e.stimulus_id not in fresh:
                fresh[e.stimulus_id] = NewEvent(e.stimulus_id, e.kind, canonical(e.payload), e.at)
        return list(fresh.values())

    def publish(self) -> None:
        """What other threads read without the lock after each step (a tuple swapped in one assignment)."""
        controller = self.controller
        self.published_offers = () if controller is None else controller.offers()

    def tick(self, now: datetime) -> list[Action]:
        """One leader iteration: market prices when due, node events, the inbox, a Tick; one step.
        Event order in the batch: market, node events, inbox (a job is judged on the latest offers), Tick."""
        with self.lock:
            controller = self.controller
            if controller is None or self.fence is None:
                return []
            self._n += 1
            tag = f"{now.isoformat()}:e{self.fence.epoch}.{self._n}"
            events: list[NewEvent] = []
            price_due = (
                self.last_price_at is None
                or (now - self.last_price_at).total_seconds() >= self.settings.price_interval_s
            )
            market = self.prices.observe(now, controller, f"market:{tag}") if price_due else None
            if market is not None:
                events.append(new_event(market, now))
            feed = self.feed.poll(now, lambda node: node in controller.state.nodes)
            events += feed.events
            tick = new_event(Tick(f"tick:{tag}"), now)
            with self.store.read() as rtx:  # a short read: submissions never wait for this step
                items = rtx.unconsumed_inbox(INBOX_BATCH)
            consumed = [i.id for i in items]
            batch = [*events, *(inbox_event(i.id, i.payload, now) for i in items), tick]

            def after(tx: Tx, appended: BatchAppend) -> None:
                if consumed:  # compare-and-set: a row consumed meanwhile rolls the step back
                    tx.mark_inbox_consumed(consumed, at=now, batch_id=appended.batch_id)
                self.feed.persist(tx, feed, now)
                if market is not None:  # what API replicas validate submissions on
                    offers = controller.offers()
                    tx.put_state(PUBLISHED_OFFERS, encode_offers(offers, now), at=now)

            started = time.monotonic()
            actions = self.commit(now, batch, after=after, market_changed=market is not None)
            self.step_latency.observe(time.monotonic() - started)
            self.feed.committed(feed)
            if price_due:
                self.last_price_at = now
            return actions

    # ---- the executor --------------------------------------------------------------------------------

    def execute_once(self) -> int:
        """Claim the actions due now and execute them; returns how many were claimed."""
        with self.lock:
            fence = self.fence
            if fence is None or self.controller is None:
                return 0
            stale = 0.0 if self.reclaim else self.settings.action_stale_after_s
        now = self.clock()
        try:
            with self.store.write(fence) as tx:
                claimed = tx.claim_actions(
                    worker=self.settings.holder,
                    now=now,
                    limit=self.settings.executor_batch,
                    stale_after_s=stale,
                )
        except NotLeaderError:
            with self.lock:
                if self.fence == fence:
                    self.step_down()
            return 0
        with self.lock:
            if self.fence == fence:
                self.reclaim = False
        lanes: dict[str, list[StoredAction]] = {}
        for action in claimed:
            lanes.setdefault(subject_of(action), []).append(action)
        if len(lanes) <= 1:
            for action in claimed:
                self._run(action, fence)
        else:  # provider calls are slow: different jobs and blocks in parallel, each one's actions in order
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    self.settings.executor_batch, thread_name_prefix="scalar-exec"
                )
            for _ in self._pool.map(lambda lane: self._run_lane(lane, fence), lanes.values()):
                pass
        return len(claimed)

    def _run_lane(self, lane: list[StoredAction], fence: Fence) -> None:
        for action in lane:
            self._run(action, fence)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _run(self, action: StoredAction, fence: Fence) -> None:
        if budgets.REFUSED in action.payload:  # refused by a spend limit when it was stored: never bought
            buy = action_from_dict(action.payload["action"])
            assert isinstance(buy, BuyCapacity)
            refusal = budgets.refused_order(action.payload, buy)
            outcome = Outcome([refusal], failed=True, error=refusal.order.reason)
        else:
            outcome = execute(action.payload, self.providers, self.clock())
        now = self.clock()
        s = self.settings
        try:
            if outcome.retry:
                delay = min(s.retry_backoff_s * 2 ** max(action.attempts - 1, 0), s.retry_backoff_max_s)
                with self.store.write(fence) as tx:
                    tx.release_action(
                        action.action_id,
                        attempt=action.attempts,
                        now=now,
                        error=outcome.error,
                        not_before=now + timedelta(seconds=delay),
                    )
                return
            events = [new_event(e, now) for e in outcome.events]

            def complete(tx: Tx) -> None:
                tx.complete_action(
                    action.action_id,
                    attempt=action.attempts,
                    now=now,
                    result=outcome.result,
                    failed=outcome.failed,
                    error=outcome.error,
                )

            with self.store.read() as rtx:  # still ours? (else stepping with its result would be undone)
                current = rtx.get_action(action.action_id)
            if current is None or current.attempts != action.attempts or current.status != IN_FLIGHT:
                log.info("result of %s dropped: claimed again since", action.action_id)
                return
            with self.lock:
                if self.fence != fence or self.controller is None:
                    return  # leadership changed meanwhile: the next leader executes it again, same key
                self.commit(now, events, before=complete)
        except (NotLeaderError, ActionNotClaimedError) as err:
            log.info("result of %s dropped: %s", action.action_id, err)
