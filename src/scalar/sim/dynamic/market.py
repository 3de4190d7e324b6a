"""One run's seller: the built-in market on its own temporary SQLite file, in virtual time.

Every policy of a run gets a fresh market with the same seed, so they face the same prices, books, boot
delays and spot interruptions (a node's future is drawn from the seed and its id, and ids come from the
buyer's idempotency keys). The session records every grant, release and node stop in the run's
:class:`~scalar.sim.dynamic.ledger.Ledger`, and can tell the loop when the market's next move is due
(a node milestone or a job timer), so the loop steps exactly then instead of polling.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select

from scalar.domain.market import CAUSE_PREEMPTED, CapacityRequest, NodeEvent, NodeState, Order, OrderState
from scalar.domain.offers import SFCOMPUTE, Offer
from scalar.providers.base import NodeReleaser, ProviderError
from scalar.providers.builtin import schema
from scalar.providers.builtin.clock import US_PER_HOUR, from_us, to_us
from scalar.providers.builtin.lifecycle import JOB_KILLED
from scalar.providers.sim import BOOK_SHAPES, BuiltinMarket, MarketConfig
from scalar.sim.dynamic.ledger import Ledger, Occupancy
from scalar.sim.dynamic.progress import MOVED, PREEMPTED, WorkTracker

HOUR_US = US_PER_HOUR
# The market's published interruption bands are read as hourly probabilities (docs/simulator-dynamic.md,
# "Preemptions"): read per month, as the AWS Spot Advisor states them, no node is interrupted in a week.
INTERRUPTION_PERIOD_HOURS = 1.0
_NEXT_NODE_MOVE = select(func.min(schema.nodes.c.next_us))
_NEXT_WORK_END = select(func.min(schema.work.c.finish_us)).where(schema.work.c.ended_us.is_(None))
_FIXED_OFFERS: dict[tuple[int, int, tuple[str, ...] | None], tuple[Offer, ...]] = {}


def killed(event: NodeEvent) -> bool:
    """A job end the market reports because the node stopped under the job (preempted, released, ended):
    ``job_succeeded`` is ``None`` (a preemption, for the controller) or ``False``, and the details say
    ``outcome: killed``."""
    if event.job_id is None or event.job_succeeded:
        return False
    return event.job_succeeded is False or event.details.get("outcome") == JOB_KILLED


def market_hour(now: datetime) -> int:
    return to_us(now) // HOUR_US


def cheapest_per_shape(offers: Sequence[Offer]) -> tuple[Offer, ...]:
    """One offer per (provider, instance type, spot): the cheapest (then the smallest key), in input order."""
    best: dict[tuple[str, str, bool], Offer] = {}
    for o in offers:
        shape = (o.provider, o.instance_type, o.spot)
        seen = best.get(shape)
        if seen is None or (o.price_per_hour, o.key) < (seen.price_per_hour, seen.key):
            best[shape] = o
    return tuple(best.values())


class MarketSession:
    """A fresh built-in market (seed ``seed``, time scale 1) for one policy's run."""

    def __init__(
        self,
        seed: int,
        models: Sequence[str] | None = None,
        *,
        preemption_scale: float = 1.0,
        tracker: WorkTracker | None = None,
    ) -> None:
        self._dir = tempfile.mkdtemp(prefix="scalar-sim-b-")
        path = Path(self._dir) / "market.db"
        config = MarketConfig(
            seed=seed, interruption_period_hours=INTERRUPTION_PERIOD_HOURS, preemption_scale=preemption_scale
        )
        self.market = BuiltinMarket(f"sqlite:///{path}", config)
        self.tracker = tracker
        self.preemptions = 0
        self.providers = self.market.providers()
        self.models = None if models is None else {m.upper() for m in models}
        self._models_key = None if self.models is None else tuple(sorted(self.models))
        self.ledger = Ledger()
        self.cursor = 0
        self._offers_hour: int | None = None
        self._offers: tuple[Offer, ...] = ()
        self.buys = 0
        self.rejected = 0
        self._next: datetime | None = None
        self._dirty = True  # something was written since the next move was last read
        self.occupancy = Occupancy()

    def close(self) -> None:
        self.market.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> MarketSession:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- prices -----------------------------------------------------------------------------------------
    def offers(self, now: datetime, *, fresh: bool = False) -> tuple[Offer, ...]:
        """Offers of the models the workload may use (all when none were given), per market hour: the
        cheapest region of each shape (provider, instance type, spot), which is all a buyer uses.

        Fixed-price offers are a pure function of the seed and the hour, so they are shared by every
        session of the process; orderbook offers are read live (our own purchases move the book)."""
        hour = market_hour(now)
        if fresh or hour != self._offers_hour:
            key = (self.market.seed, hour, self._models_key)
            fixed = _FIXED_OFFERS.get(key)
            if fixed is None:
                fixed = tuple(
                    o
                    for p in self.providers
                    if p != SFCOMPUTE
                    for o in self.market.list_offers(now, provider=p, gpu_models=self.models)
                )
                if len(_FIXED_OFFERS) > 5000:
                    _FIXED_OFFERS.clear()
                _FIXED_OFFERS[key] = fixed
            books: tuple[Offer, ...] = ()
            if SFCOMPUTE in self.providers and self.book_types():
                books = self._filtered(self.market.list_offers(now, provider=SFCOMPUTE))
            self._offers = cheapest_per_shape((*books, *fixed))
            self._offers_hour = hour
        return self._offers

    def _filtered(self, offers: Iterable[Offer]) -> tuple[Offer, ...]:
        if self.models is None:
            return tuple(offers)
        return tuple(o for o in offers if o.gpu_model and o.gpu_model.upper() in self.models)

    def book_types(self) -> tuple[str, ...]:
        """Orderbook instance types whose model the workload may use."""
        return tuple(
            t for t, s in BOOK_SHAPES.items() if self.models is None or s.gpu_model.upper() in self.models
        )

    # -- orders and work --------------------------------------------------------------------------------
    def buy(self, request: CapacityRequest, key: str, now: datetime) -> Order:
        self._dirty = True
        order = self.providers[request.provider].buy(request, key, now)
        self.buys += 1
        if order.state is OrderState.FILLED and order.block is not None:
            self.ledger.bought(order.block, now)
        elif order.state is OrderState.REJECTED:
            self.rejected += 1
        return order

    def release(self, provider: str, block_id: str, now: datetime) -> None:
        self._dirty = True
        self.providers[provider].release(block_id, now)
        self.ledger.released(block_id, now)
        bill = self.ledger.blocks.get(block_id)
        if bill is not None:
            for node_id in bill.grant.node_ids:
                self.occupancy.node_stopped(node_id, now)

    def release_nodes(self, provider: str, block_id: str, node_ids: Sequence[str], now: datetime) -> None:
        """Stop some nodes of a block billed per node while it runs; the bill stops for them now."""
        self._dirty = True
        seller = self.providers[provider]
        if not isinstance(seller, NodeReleaser):
            raise ProviderError(provider, "does not stop single nodes of a block", retryable=False)
        seller.release_nodes(block_id, node_ids, now)
        bill = self.ledger.blocks.get(block_id)
        for node_id in node_ids:
            if bill is not None:
                bill.stopped.setdefault(node_id, now)
            self.occupancy.node_stopped(node_id, now)

    def start_work(
        self, node_id: str, job_id: str, duration_s: int, now: datetime, gpus: Sequence[int] = ()
    ) -> None:
        """Start a job's timer on a node; ``gpus`` are the GPU indices it holds (for idle accounting).

        With a work tracker, the timer is the job's true run time on the node's model (work left divided
        by the model's speed), whatever ``duration_s`` the policy believes."""
        self._dirty = True
        if self.tracker is not None:
            bill = self.ledger.blocks[self.ledger.node_block[node_id]]
            true_s = self.tracker.start(job_id, bill.grant.gpu_model or "", now)
            if true_s is not None:
                duration_s = true_s
        self.providers[self.ledger.provider_of(node_id)].start_work(node_id, job_id, duration_s, now)
        self.occupancy.started(node_id, job_id, gpus, now)

    def stop_work(self, node_id: str, job_id: str, now: datetime) -> None:
        self._dirty = True
        self.providers[self.ledger.provider_of(node_id)].stop_work(node_id, job_id, now)
        self.occupancy.ended(node_id, job_id, now)
        if self.tracker is not None:
            self.tracker.stopped(job_id, now, MOVED)

    # -- what happened, and when the next thing will -----------------------------------------------------
    def events(self, now: datetime) -> list[NodeEvent]:
        """The market's events up to ``now`` (asks the market only when something can have happened)."""
        if not self._dirty and (self._next is None or now < self._next):
            return []
        self._dirty = True
        out: list[NodeEvent] = []
        while True:
            page, cursor = self.market.events_since(self.cursor, now)
            self.cursor = cursor
            out.extend(page)
            if not page or len(page) < 10_000:
                break
        self.ledger.observe(out)
        for e in out:
            if e.job_id is not None and (e.job_succeeded is not None or killed(e)):
                self.occupancy.ended(e.node_id, e.job_id, e.at)
                if self.tracker is not None:
                    if e.job_succeeded:
                        self.tracker.finished(e.job_id)
                    else:
                        self.tracker.stopped(e.job_id, e.at, PREEMPTED)
            if e.state in (NodeState.FAILED, NodeState.TERMINATED):
                self.occupancy.node_stopped(e.node_id, e.at)
                if e.details.get("cause") == CAUSE_PREEMPTED:
                    self.preemptions += 1
        return out

    def next_move(self) -> datetime | None:
        """When the market's next node milestone or job timer is due (``None``: nothing scheduled)."""
        if self._dirty:
            self._next = self._read_next_move()
            self._dirty = False
        return self._next

    def _read_next_move(self) -> datetime | None:
        with self.market.engine.connect() as conn:
            node_us = conn.execute(_NEXT_NODE_MOVE).scalar()
            work_us = conn.execute(_NEXT_WORK_END).scalar()
        times = [int(t) for t in (node_us, work_us) if t is not None]
        return from_us(min(times)) if times else None
