"""Resale end to end against the built-in market: the controller offers an idle SFCompute block's unused
time, the runtime's executor places the sell order, the market fills part of it against its seeded bids,
and the controller stops using the sold nodes past the cut and credits the proceeds in /costs' report."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

from scalar.domain.market import NodeState
from scalar.domain.orderbook import optimal_ask
from scalar.engine import Action, Controller, ControllerConfig, ReleaseBlock, SellCapacity
from scalar.engine.events import Event, MarketBook, MarketObserved, NodeReported
from scalar.providers.sim import BuiltinMarket, MarketConfig
from scalar.runtime.executor import execute, outbox_payload
from tests.engine.builders import T0, cancel, sid, spec, starts, submit
from tests.engine.test_costs import assert_report_adds_up
from tests.providers.conftest_market import sfc_request


class Loop:
    """The leader's loop in miniature for one seller: step the controller, execute its actions against the
    market, feed the answers and the market's node events back."""

    def __init__(
        self, market: BuiltinMarket, provider: str = "sfcompute", idle_release_s: float | None = None
    ) -> None:
        self.market = market
        self.provider = provider
        self.seller = market.provider(provider)
        self.sfc = self.seller
        self.c = Controller(
            ControllerConfig() if idle_release_s is None else ControllerConfig(idle_release_s=idle_release_s)
        )
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


def _other_seller_takes_bids(market: BuiltinMarket, at: datetime, leave_gpus: int, ask: Decimal) -> None:
    """Another buyer of the market sells its own block's time this market hour, so that the bids at or
    above ``ask`` keep only ``leave_gpus`` GPUs for the next seller (sales share the hour's bid depth)."""
    sfc = market.provider("sfcompute")
    book = sfc.orderbook("8xH100", at)
    assert book is not None
    depth = sum(b.quantity_gpus for b in book.bids if b.price_per_gpu_hour >= ask)
    nodes = (depth - leave_gpus) // 8
    assert nodes >= 1
    order = sfc.buy(sfc_request(nodes=nodes, hours=10), "another-buyer", at)
    assert order.block is not None
    cut = order.block.end_time - timedelta(hours=9)
    lowest = min(b.price_per_gpu_hour for b in book.bids)
    fill = sfc.sell(order.block.block_id, order.block.node_ids, cut, lowest, "another-sale", at)  # type: ignore[attr-defined]
    assert len(fill.node_ids_sold) == nodes


def test_an_idle_block_is_sold_back_in_part_and_the_sold_nodes_are_never_used_again(tmp_path: Path) -> None:
    """Under the default config (idle blocks released after 30 min): the offer fills in part, the unsold
    node is kept past the hold and offered again an hour later (not released, its time not dropped), the
    sold nodes take no work past their cut, and every sale is credited to the buyer."""
    market = BuiltinMarket(f"sqlite:///{tmp_path / 'm.db'}", MarketConfig(seed=6))
    loop = Loop(market)
    assert loop.c.config.idle_release_s == 1800
    # A 10-hour training job for two nodes buys a block that covers it, then is cancelled after 20 minutes.
    loop.step(T0, [loop.observed(T0), *submit(spec("train", 16, duration=10 * 3600))])
    t = T0
    while not any(starts([a]) for a in loop.actions):
        t += timedelta(minutes=1)
        loop.step(t, [])
        assert t < T0 + timedelta(hours=1), "the job never started"
    [block] = list(loop.c.state.blocks.values())
    assert len(block.node_ids) == 2
    t += timedelta(minutes=20)
    loop.step(t, [cancel("train")])
    idle_from = t
    t += timedelta(minutes=1)
    # Another seller took most of this hour's bids: only one of the two nodes can sell at the ask.
    bids = loop.c.state.books["8xH100"].bids
    ask = optimal_ask(bids, 16).price_per_gpu_hour
    assert ask is not None
    _other_seller_takes_bids(market, t, leave_gpus=8, ask=ask)
    actions = loop.step(t, [loop.observed(t)])

    [offer] = [a for a in actions if isinstance(a, SellCapacity)]
    assert offer.block_id == block.grant.block_id and set(offer.node_ids) == set(block.node_ids)
    assert offer.price_per_gpu_hour == ask and offer.hours >= 1 and offer.cut >= t
    fill = loop.sfc.get_sale(offer.action_id, t)
    assert fill is not None
    [sold] = fill.node_ids_sold  # a partial fill: one node of two
    [unsold] = [n for n in block.node_ids if n != sold]
    # the engine recorded exactly what the market filled, and credited its proceeds to the block
    assert block.sold_back_revenue == fill.proceeds == ask * 8 * offer.hours
    assert block.sold_back_gpu_s == 8 * offer.hours * 3600
    assert loop.c.state.nodes[sold].node.block.end_time == offer.cut
    # Offered once an hour at most: the next step offers nothing.
    assert not [a for a in loop.step(t + timedelta(minutes=1), []) if isinstance(a, SellCapacity)]

    # Past the 30-minute idle hold the block is not released: it is paid whole, and the unsold node's
    # hours would be dropped for nothing. The market keeps the node up.
    held = idle_from + timedelta(minutes=31)
    assert not [a for a in loop.step(held, []) if isinstance(a, ReleaseBlock)]
    assert block.open and market.node_state(unsold, held) is NodeState.READY
    assert [e.reason.code for e in loop.c.story(block.grant.block_id)].count("kept_for_resale") == 1

    # After the cut, new work never goes to the sold node (the market ended it); the unsold one takes it.
    after = offer.cut + timedelta(minutes=1)
    assert after < t + timedelta(hours=1)
    loop.step(after, [*submit(spec("late", 8, duration=600))])
    placed = [p.node_id for s in starts(loop.actions) if s.job_id == "late" for p in s.placements]
    assert placed == [unsold]
    assert market.node_state(sold, after) is NodeState.TERMINATED
    loop.step(after + timedelta(minutes=12), [])  # the late job is done

    # An hour after the first offer, the unsold node's time is offered again, and sells this time.
    again_at = t + timedelta(hours=1)
    actions = loop.step(again_at, [loop.observed(again_at)])
    [again] = [a for a in actions if isinstance(a, SellCapacity)]
    assert again.node_ids == (unsold,)
    second = loop.sfc.get_sale(again.action_id, again_at)
    assert second is not None and second.node_ids_sold == (unsold,)
    proceeds = fill.proceeds + second.proceeds
    assert block.sold_back_revenue == proceeds
    assert block.sold_back_gpu_s == 8 * (offer.hours + again.hours) * 3600
    notes = [e for e in loop.c.state.story if e.reason.code == "capacity_sold"]
    assert len(notes) == 2

    # Past the second cut the market ends that node too; nothing was placed on either after its cut.
    end = again.cut + timedelta(minutes=1)
    loop.step(end, [*submit(spec("later", 8, duration=600))])
    assert market.node_state(unsold, end) is NodeState.TERMINATED
    assert not [
        p
        for s in starts(loop.actions)
        if s.job_id == "later"
        for p in s.placements
        if p.node_id in block.node_ids
    ]
    report = loop.c.costs()
    assert_report_adds_up(report)
    assert report.total.sold_back_revenue == proceeds
    # The proceeds are credited to the tenant the block was bought for, and only to it.
    credited = {t.tenant: t.sold_back_revenue for t in report.by_tenant if t.sold_back_revenue}
    assert credited == {"default": proceeds}
    assert loop.c.costs("someone-else").by_tenant == ()
    market.close()


def test_releasing_a_block_never_resells_its_time_behind_the_buyers_back(tmp_path: Path) -> None:
    """The built-in market's release ends an SFCompute block's nodes and puts nothing back on the book:
    only a sell order resells a buyer's time, and the buyer is credited what it sells for."""
    market = BuiltinMarket(f"sqlite:///{tmp_path / 'm.db'}", MarketConfig(seed=6))
    sfc = market.provider("sfcompute")
    order = sfc.buy(sfc_request(nodes=2, hours=10), "release-me", T0)
    assert order.block is not None
    at = T0 + timedelta(hours=2, minutes=30)
    before = sfc.orderbook("8xH100", at)
    assert before is not None
    sfc.release(order.block.block_id, at)
    after = sfc.orderbook("8xH100", at)
    assert after is not None and after.asks == before.asks
    for node_id in order.block.node_ids:
        assert market.node_state(node_id, at) is NodeState.TERMINATED
    market.close()
