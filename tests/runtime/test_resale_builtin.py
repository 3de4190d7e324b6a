"""Resale end to end against the built-in market: the controller offers an idle SFCompute block's unused
time, the runtime's executor places the sell order, the market fills part of it against its seeded bids,
and the controller stops using the sold nodes past the cut and credits the proceeds in /costs' report."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from scalar.domain.market import NodeState
from scalar.domain.orderbook import optimal_ask
from scalar.engine import Action, Controller, ControllerConfig, SellCapacity
from scalar.engine.events import Event, MarketBook, MarketObserved, NodeReported
from scalar.providers.sim import BuiltinMarket, MarketConfig
from scalar.runtime.executor import execute, outbox_payload
from tests.engine.builders import T0, cancel, sid, spec, starts, submit
from tests.engine.test_costs import assert_report_adds_up


class Loop:
    """The leader's loop in miniature for one seller: step the controller, execute its actions against the
    market, feed the answers and the market's node events back."""

    def __init__(
        self, market: BuiltinMarket, provider: str = "sfcompute", idle_release_s: float = 10**6
    ) -> None:
        self.market = market
        self.provider = provider
        self.seller = market.provider(provider)
        self.sfc = self.seller
        self.c = Controller(ControllerConfig(idle_release_s=idle_release_s))
        self.cursor = 0
        self.actions: list[Action] = []

    def observed(self, now: object) -> MarketObserved:
        book = self.sfc.orderbook("8xH100", now)  # type: ignore[arg-type]
        assert book is not None
        books = {"8xH100": MarketBook(book.asks, book.bids)}
        return MarketObserved(sid("m"), tuple(self.sfc.list_offers(now)), now, books, ("sfcompute",))  # type: ignore[arg-type]

    def step(self, now: object, events: list[Event]) -> list[Action]:
        node_events, self.cursor = self.seller.events_since(self.cursor, now)  # type: ignore[arg-type]
        feed = [*events, *(NodeReported(sid("n"), e) for e in node_events)]
        actions = self.c.step(now, feed)  # type: ignore[arg-type]
        self.actions.extend(actions)
        answers: list[Event] = []
        for action in actions:
            blocks = {}
            for node_id in getattr(action, "node_ids", ()) or ():
                rec = self.c.state.nodes.get(node_id)
                if rec is not None:
                    blocks[node_id] = rec.block_id
            payload = outbox_payload(action, self.provider, blocks)
            outcome = execute(payload, {self.provider: self.seller}, now)  # type: ignore[arg-type]
            assert not outcome.retry and not outcome.failed, outcome.error
            answers.extend(outcome.events)
        if answers:
            actions += self.step(now, answers)
        return actions


def test_an_idle_block_is_sold_back_in_part_and_the_sold_nodes_are_never_used_again(tmp_path: Path) -> None:
    market = BuiltinMarket(f"sqlite:///{tmp_path / 'm.db'}", MarketConfig(seed=6))
    loop = Loop(market)
    # A 10-hour training job for two nodes buys a block that covers it, then is cancelled after 20 minutes.
    loop.step(T0, [loop.observed(T0), *submit(spec("train", 16, duration=10 * 3600))])
    t = T0
    while not any(starts([a]) for a in loop.actions):
        t += timedelta(minutes=1)
        loop.step(t, [])
        assert t < T0 + timedelta(hours=1), "the job never started"
    blocks = list(loop.c.state.blocks.values())
    nodes = [n for b in blocks for n in b.node_ids]
    assert len(nodes) == 2
    t += timedelta(minutes=20)
    loop.step(t, [cancel("train")])
    t += timedelta(minutes=1)
    actions = loop.step(t, [loop.observed(t)])

    offers = [a for a in actions if isinstance(a, SellCapacity)]
    assert sorted(o.block_id for o in offers) == sorted(b.grant.block_id for b in blocks)
    book = loop.sfc.orderbook("8xH100", t)
    assert book is not None
    sold: list[str] = []
    proceeds = 0
    for offer in offers:
        block = loop.c.state.blocks[offer.block_id]
        assert offer.hours >= 1 and offer.cut >= t
        assert set(offer.node_ids) == set(block.node_ids)
        ask = optimal_ask(loop.c.state.books["8xH100"].bids, 8 * len(offer.node_ids))
        assert offer.price_per_gpu_hour == ask.price_per_gpu_hour
        fill = loop.sfc.get_sale(offer.action_id, t)
        assert fill is not None
        # the engine recorded exactly what the market filled, and credited its proceeds to the block
        assert block.sold_back_revenue == fill.proceeds
        assert block.sold_back_gpu_s == fill.gpus_sold * offer.hours * 3600
        sold.extend(fill.node_ids_sold)
        proceeds += fill.proceeds
    notes = [e for e in loop.c.state.story if e.reason.code == "capacity_sold"]
    assert len(notes) == len(offers)
    assert sold, "the seeded book's bids took none of the offer"
    # Offered once an hour at most: the next step offers nothing.
    assert not [a for a in loop.step(t + timedelta(minutes=1), []) if isinstance(a, SellCapacity)]

    # After the cut, new work never goes to a sold node; the market ended the sold ones.
    after = max(o.cut for o in offers) + timedelta(minutes=1)
    loop.step(after, [*submit(spec("late", 8, duration=600))])
    placed = [p.node_id for s in starts(loop.actions) if s.job_id == "late" for p in s.placements]
    assert not set(placed) & set(sold)
    for node_id in sold:
        assert market.node_state(node_id, after) is NodeState.TERMINATED
    report = loop.c.costs()
    assert_report_adds_up(report)
    assert report.total.sold_back_revenue == proceeds
    # The proceeds are credited to the tenant the blocks were bought for, and only to it.
    credited = {t.tenant: t.sold_back_revenue for t in report.by_tenant if t.sold_back_revenue}
    assert credited == {"default": proceeds}
    assert loop.c.costs("someone-else").by_tenant == ()
    market.close()
