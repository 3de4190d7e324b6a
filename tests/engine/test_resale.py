"""Selling back SFCompute capacity the forecast will not use (engine/resale.py): the decision with its
numbers, the sale's accounting (sold nodes are never placed on past the cut, proceeds credited to the
buyer, the cost identity with sold-back hours), and the ask mirror of the orderbook algorithm."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.market import Order, OrderState, SaleFill
from scalar.domain.orderbook import BookOrder, optimal_ask
from scalar.engine import Controller, ControllerConfig, SaleUpdated, SellCapacity
from scalar.engine.events import MarketBook, MarketObserved, OrderUpdated
from scalar.engine.housekeeping import accrue
from scalar.engine.resale import record_sale, resale_step
from tests.engine.builders import (
    BOOK,
    T0,
    at,
    grant,
    job_done,
    ready,
    sf_offer,
    sid,
    spec,
    starts,
    submit,
    tick,
)
from tests.engine.test_costs import assert_report_adds_up

BIDS = (
    BookOrder(Decimal("1.90"), 8, Decimal(24)),
    BookOrder(Decimal("1.80"), 8, Decimal(24)),
    BookOrder(Decimal("1.50"), 32, Decimal(24)),
)
HOUR = 3600


def _controller_with_idle_block(hours: int = 10, nodes: int = 2) -> Controller:
    """A 2-node SFCompute block of ``hours`` that ran one short job and is idle at 20 min."""
    c = Controller(ControllerConfig(idle_release_s=10**6))
    observed = MarketObserved(sid("m"), (sf_offer(),), T0, {"8xH100": MarketBook(BOOK, BIDS)}, ("sfcompute",))
    [buy] = c.step(at(0), [observed, *submit(spec("j", 8 * nodes, duration=600))])
    block = replace(grant(buy, at(30)), end_time=at(30) + timedelta(hours=hours))
    order = Order(f"ord-{buy.action_id}", buy.action_id, OrderState.FILLED, buy.request, block)
    c.step(at(30), [OrderUpdated(sid("o"), buy.action_id, order)])
    actions = c.step(at(60), ready(*block.node_ids, when=at(60)))
    for s in starts(actions):
        for p in s.placements:
            c.step(at(700), [job_done(p.node_id, s.job_id, at(700))])
    c.step(at(1200), [tick()])
    return c


def test_an_idle_block_offers_the_hours_the_forecast_will_not_use_at_the_mirrored_ask() -> None:
    c = _controller_with_idle_block()
    now = at(1200)
    [sale] = resale_step(c.state, now)
    block = c.state.blocks[sale.block_id]
    remaining_h = (block.block.end_time - now).total_seconds() / HOUR
    assert sale.provider == "sfcompute" and set(sale.node_ids) == set(block.node_ids)
    assert sale.hours == int(remaining_h - sale.kept_hours) >= 1
    assert sale.cut == block.block.end_time - timedelta(hours=sale.hours) >= now
    ask = optimal_ask(BIDS, 16)
    assert sale.price_per_gpu_hour == ask.price_per_gpu_hour
    assert sale.expected_proceeds == sale.price_per_gpu_hour * 16 * sale.hours
    msg = sale.reason.message
    assert f"offering the last {sale.hours} h" in msg and "expected proceeds" in msg and "forecast" in msg
    # A sale in flight is not offered twice; a busy block is not offered at all.
    assert resale_step(c.state, now, frozenset({sale.block_id})) == ()


def test_queued_demand_keeps_hours_back_and_a_busy_block_is_not_sold() -> None:
    c = _controller_with_idle_block(hours=10)
    now = at(1200)
    [idle] = resale_step(c.state, now)
    # Work that would run on the block: it is placed at once (the block is no longer idle).
    actions = c.step(now, submit(spec("long", 8, duration=4 * HOUR)))
    assert starts(actions)
    assert resale_step(c.state, now) == ()
    assert idle.kept_hours >= 0


def test_a_partial_fill_moves_the_sold_nodes_end_credits_the_proceeds_and_the_costs_add_up() -> None:
    c = _controller_with_idle_block(hours=10)
    now = at(1200)
    [sale] = resale_step(c.state, now)
    block = c.state.blocks[sale.block_id]
    sold, kept = sale.node_ids[1], sale.node_ids[0]
    fill = SaleFill(
        "k", "sfcompute", sale.block_id, 2, (sold,), 8, sale.hours, sale.cut, sale.price_per_gpu_hour
    )
    credited = record_sale(c.state, fill)
    assert credited == fill.proceeds == sale.price_per_gpu_hour * 8 * sale.hours
    assert block.sold_back_revenue == credited
    assert block.sold_back_gpu_s == 8 * sale.hours * HOUR
    assert record_sale(c.state, fill) == 0  # the same fill again is never counted twice
    assert c.state.nodes[sold].node.block.end_time == sale.cut
    assert c.state.nodes[kept].node.block.end_time == block.block.end_time

    # After the cut nothing is placed on the sold node; the unsold one still takes work.
    after = sale.cut + timedelta(minutes=1)
    actions = c.step(after, submit(spec("later", 8, duration=600)))
    [start] = starts(actions)
    assert [p.node_id for p in start.placements] == [kept]
    c.step(after + timedelta(minutes=10), [job_done(kept, "later", after + timedelta(minutes=10))])
    c.step(block.block.end_time + timedelta(minutes=1), [tick()])

    report = c.costs()
    assert_report_adds_up(report)
    [line] = [b.line for b in report.by_block if b.block_id == sale.block_id]
    contract_h = Decimal(16) * Decimal((block.block.end_time - block.block.start_time).total_seconds()) / HOUR
    # committed GPU-hours = paid (held: delivered + idle) + sold back, for a block held to its end
    assert line.paid_gpu_hours + line.sold_back_gpu_hours == contract_h
    assert line.sold_back_revenue == credited
    # its cost is what was committed less the resale proceeds
    assert line.net_cost == line.committed - line.sold_back_revenue
    assert line.delivered_gpu_hours > 0


def test_a_sale_of_another_providers_block_or_a_foreign_node_is_refused() -> None:
    c = _controller_with_idle_block()
    [sale] = resale_step(c.state, at(1200))
    bad = [
        SaleFill("k", "runpod", sale.block_id, 1, sale.node_ids[:1], 8, 1, sale.cut, Decimal(1)),
        SaleFill("k", "sfcompute", "nope", 1, sale.node_ids[:1], 8, 1, sale.cut, Decimal(1)),
        SaleFill("k", "sfcompute", sale.block_id, 1, ("other-n0",), 8, 1, sale.cut, Decimal(1)),
    ]
    for fill in bad:
        try:
            record_sale(c.state, fill)
        except ValueError:
            continue
        raise AssertionError(f"{fill} was accepted")
    assert c.state.blocks[sale.block_id].sold_back_gpu_s == 0


@given(
    bids=st.lists(
        st.tuples(st.decimals(Decimal("0.10"), Decimal(9), places=2), st.integers(1, 64)),
        min_size=1,
        max_size=12,
    ),
    gpus=st.integers(1, 128),
)
def test_the_mirrored_ask_is_a_bid_price_and_covers_the_offer_when_the_book_can(
    bids: list[tuple[Decimal, int]], gpus: int
) -> None:
    book = [BookOrder(p, q, Decimal(1)) for p, q in bids]
    ask = optimal_ask(book, gpus)
    assert ask.price_per_gpu_hour in {p for p, _ in bids}
    covering = sum(q for p, q in bids if ask.price_per_gpu_hour is not None and p >= ask.price_per_gpu_hour)
    total = sum(q for _, q in bids)
    assert ask.insufficient_liquidity == (total < gpus)
    if total >= gpus:
        assert covering >= gpus  # the bids at or above the ask take all of it
    else:
        assert ask.price_per_gpu_hour == max(p for p, _ in bids)


def test_accrual_stops_at_a_sold_nodes_cut() -> None:
    c = _controller_with_idle_block(hours=4)
    now = at(1200)
    [sale] = resale_step(c.state, now)
    block = c.state.blocks[sale.block_id]
    record_sale(
        c.state,
        SaleFill("k", "sfcompute", sale.block_id, 2, sale.node_ids, 8, sale.hours, sale.cut, Decimal(1)),
    )
    paid_before = block.paid_gpu_s
    later = sale.cut + timedelta(minutes=5)
    accrue(c.state, later)
    assert block.paid_gpu_s - paid_before == 16 * Decimal((sale.cut - c.state.now).total_seconds())  # type: ignore[operator]


def test_an_answer_is_recorded_only_within_the_offer_it_answers() -> None:
    """The controller offers, the seller answers: an answer to no offer, or naming another block, other
    nodes or another cut, moves nothing and credits nothing."""
    c = _controller_with_idle_block()
    [offer] = c.state.sales.values()  # the controller offered the idle block's time in its last step
    assert isinstance(offer, SellCapacity) and offer in c.state.recent_actions
    block = c.state.blocks[offer.block_id]

    def answer(action_id: str, **changes: object) -> SaleUpdated:
        base = SaleFill(
            "k",
            "sfcompute",
            offer.block_id,
            len(offer.node_ids),
            offer.node_ids[:1],
            8,
            offer.hours,
            offer.cut,
            offer.price_per_gpu_hour,
        )
        return SaleUpdated(sid("s"), action_id, replace(base, **changes))  # type: ignore[arg-type]

    c.step(at(1310), [answer("act-999999")])  # no such offer
    assert block.sold_back_gpu_s == 0 and offer.action_id in c.state.sales
    c.step(at(1320), [answer(offer.action_id, cut=offer.cut - timedelta(hours=1))])  # more than offered
    assert block.sold_back_gpu_s == 0 and offer.action_id not in c.state.sales
    codes = [e.reason.code for e in c.state.story if e.kind == "sale"]
    assert codes == ["unknown_sale", "sale_mismatch"]
    # Offered again an hour later; this time the answer fits the offer and is credited once.
    later = c.state.resale_offered_at[offer.block_id] + timedelta(hours=1)
    [again] = [a for a in c.step(later, [tick()]) if isinstance(a, SellCapacity)]
    fill = SaleFill(
        "k2",
        "sfcompute",
        again.block_id,
        len(again.node_ids),
        again.node_ids[:1],
        8,
        again.hours,
        again.cut,
        again.price_per_gpu_hour,
    )
    c.step(later, [SaleUpdated(sid("s"), again.action_id, fill)])
    c.step(later, [SaleUpdated(sid("s"), again.action_id, fill)])  # a duplicate answer: no offer left
    assert block.sold_back_revenue == fill.proceeds
    assert [e.reason.code for e in c.state.story if e.kind == "sale"][-2:] == [
        "capacity_sold",
        "unknown_sale",
    ]
