"""What the leader hears from the sellers each tick: node events (by cursor) and prices (MarketObserved).

**Node events.** Each event source (the built-in market as a whole, or one injected provider) is polled with
``events_since(cursor, now)``. The new cursor is written (``runtime_state`` row ``feed:<source>``) in the same
transaction as the events it produced, so a crash never loses or repeats one. Stimulus ids are
``node:<source>:<old cursor>-<new cursor>:<i>``: unique, because cursor ranges never overlap.

An event about a node the controller does not know yet is *parked*, not delivered: the seller reports a
node's boot as soon as it sells it, which can be before the runtime has recorded the purchase (the executor
bought, then crashed or simply had not committed yet). Delivered then, the controller would ignore it and
the node would never become READY in its eyes. Parked events (kept in the same ``runtime_state`` row, so
they survive a crash) are delivered, in order, once their node is known; later events of a node with parked
events wait behind them. After ``park_ttl_s`` they are delivered anyway (the controller notes and ignores
them).

**Prices.** Every ``price_interval_s`` the offers of every provider and the books of the instance types that
have one are collected. Only what the controller can use is kept: for each offer shape (provider x
instance type x spot) the cheapest whole-GPU offer that a configured scale group matches, the very offer
the engine would pick as the group's current one. A ``MarketObserved`` is stepped only when that changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from scalar.domain.market import NodeEvent
from scalar.domain.offers import Offer
from scalar.engine import Controller, ControllerConfig, MarketBook, MarketObserved, NodeReported
from scalar.engine.codec import event_from_dict, event_to_dict
from scalar.engine.groups import usable_offer
from scalar.providers.base import Provider, ProviderError
from scalar.store import NewEvent, Tx

log = logging.getLogger(__name__)

FEED_PREFIX = "feed:"
Poll = Callable[[int, datetime], tuple[Sequence[NodeEvent], int]]


@dataclass(frozen=True)
class Source:
    """A stream of node events: ``poll(cursor, now) -> (events, new cursor)``."""

    name: str
    poll: Poll


@dataclass
class SourceState:
    cursor: int = 0
    parked: list[dict[str, Any]] = field(default_factory=list)  # {stimulus_id, payload, parked_at}

    def to_json(self) -> dict[str, Any]:
        return {"cursor": self.cursor, "parked": self.parked}


@dataclass
class FeedBatch:
    """What one poll produced: the events to append, and each changed source's state to write with them."""

    events: list[NewEvent]
    states: dict[str, SourceState]


def _node_of(payload: Mapping[str, Any]) -> str:
    return str(payload["event"]["node_id"])


class NodeFeed:
    def __init__(self, sources: Sequence[Source], park_ttl_s: float) -> None:
        self.sources = tuple(sources)
        self.park_ttl_s = park_ttl_s
        self.states: dict[str, SourceState] = {s.name: SourceState() for s in self.sources}

    def load(self, tx: Tx) -> None:
        """Read every source's cursor and parked events (after a rebuild)."""
        stored = tx.states_with_prefix(FEED_PREFIX)
        for source in self.sources:
            raw = stored.get(FEED_PREFIX + source.name) or {}
            self.states[source.name] = SourceState(int(raw.get("cursor", 0)), list(raw.get("parked", [])))

    def poll(self, now: datetime, known: Callable[[str], bool]) -> FeedBatch:
        """Poll every source (provider calls: outside any transaction). A source that fails is skipped this
        time (its cursor stays)."""
        events: list[NewEvent] = []
        changed: dict[str, SourceState] = {}
        for source in self.sources:
            old = self.states[source.name]
            try:
                got, cursor = source.poll(old.cursor, now)
            except ProviderError as err:
                log.warning("polling %s for node events failed: %s", source.name, err)
                got, cursor = [], old.cursor
            fresh = [
                {
                    "stimulus_id": f"node:{source.name}:{old.cursor}-{cursor}:{i}",
                    "payload": event_to_dict(NodeReported("-", e)),
                    "parked_at": now.isoformat(),
                }
                for i, e in enumerate(got)
            ]
            if not fresh and not old.parked:
                continue
            deliver, park = self._sort(old.parked + fresh, now, known)
            if cursor != old.cursor or park != old.parked:
                changed[source.name] = SourceState(cursor, park)
            for item in deliver:
                payload = dict(item["payload"], stimulus_id=item["stimulus_id"])
                events.append(NewEvent(item["stimulus_id"], "NodeReported", payload, now))
        return FeedBatch(events, changed)

    def _sort(
        self, items: list[dict[str, Any]], now: datetime, known: Callable[[str], bool]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        deliver: list[dict[str, Any]] = []
        park: list[dict[str, Any]] = []
        waiting: set[str] = set()
        for item in items:
            node = _node_of(item["payload"])
            age = (now - datetime.fromisoformat(item["parked_at"])).total_seconds()
            if node in waiting or (not known(node) and age < self.park_ttl_s):
                waiting.add(node)
                park.append(item)
            else:
                deliver.append(item)
        return deliver, park

    def persist(self, tx: Tx, batch: FeedBatch, now: datetime) -> None:
        for name, state in batch.states.items():
            tx.put_state(FEED_PREFIX + name, state.to_json(), at=now)

    def committed(self, batch: FeedBatch) -> None:
        self.states.update(batch.states)


# ---- prices ------------------------------------------------------------------------------------------


def _matches(offer: Offer, config: ControllerConfig) -> bool:
    return any(
        g.matches(offer.provider, offer.instance_type, offer.gpu_model, offer.region, offer.spot)
        for g in config.scale_groups
    )


def reduce_offers(offers: Sequence[Offer], config: ControllerConfig) -> tuple[Offer, ...]:
    """Per shape (provider x instance type x spot) the cheapest usable offer a scale group matches, as the
    engine picks a group's offer; ``observed_at`` dropped (the event carries the time)."""
    best: dict[tuple[str, str, bool], Offer] = {}
    for offer in offers:
        if not usable_offer(offer) or not _matches(offer, config):
            continue
        shape = (offer.provider, offer.instance_type, offer.spot)
        seen = best.get(shape)
        if seen is None or (offer.price_per_hour, offer.key) < (seen.price_per_hour, seen.key):
            best[shape] = offer
    return tuple(replace(best[s], observed_at=None) for s in sorted(best))


class PriceCollector:
    """Collects offers and books into a ``MarketObserved``; remembers which instance types have no book."""

    def __init__(self, providers: Mapping[str, Provider], config: ControllerConfig) -> None:
        self.providers = providers
        self.config = config
        self._no_book: set[tuple[str, str]] = set()

    def collect(self, now: datetime) -> tuple[tuple[Offer, ...], dict[str, MarketBook], tuple[str, ...]]:
        offers: list[Offer] = []
        books: dict[str, MarketBook] = {}
        covered: list[str] = []
        for name in sorted(self.providers):
            provider = self.providers[name]
            try:
                listed = list(provider.list_offers(now))
            except ProviderError as err:
                log.warning("collecting offers from %s failed: %s", name, err)
                continue
            covered.append(name)
            kept = reduce_offers(listed, self.config)
            offers.extend(kept)
            for instance_type in sorted({o.instance_type for o in kept}):
                if (name, instance_type) in self._no_book:
                    continue
                try:
                    book = provider.orderbook(instance_type, now)
                except ProviderError as err:
                    if not err.retryable:
                        self._no_book.add((name, instance_type))
                    continue
                if book is None:
                    self._no_book.add((name, instance_type))
                    continue
                books[instance_type] = MarketBook(tuple(book.asks), tuple(book.bids), provider=name)
        return tuple(offers), books, tuple(covered)

    def observe(self, now: datetime, controller: Controller, stimulus_id: str) -> MarketObserved | None:
        """A ``MarketObserved`` if what the controller would see differs from what it has, else ``None``."""
        offers, books, covered = self.collect(now)
        if not covered:
            return None
        state = controller.state
        same = all(
            tuple(o for o in offers if o.provider == p) == state.offers.get(p, ()) for p in covered
        ) and all(state.books.get(k) == b for k, b in books.items())
        if same:
            return None
        return MarketObserved(stimulus_id, offers, now, books, covered)


def decode_events(payloads: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [event_from_dict(p) for p in payloads]
