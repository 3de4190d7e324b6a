"""Selling back SFCompute capacity the forecast will not use (engine/resale.py): the decision with its
numbers, the sale's accounting (sold nodes are never placed on past the cut, proceeds credited to the
buyer, the cost identity with sold-back hours), and the ask mirror of the orderbook algorithm."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.market import Order, OrderState, SaleFill
from scalar.domain.orderbook import BookOrder, optimal_ask
from scalar.engine import Controller, ControllerConfig, SaleUpdated, SellCapacity
from scalar.engine.events import MarketBook, MarketObserved, OrderUpdated
from scalar.engine.housekeeping import accrue
from scalar.engine.resale import record_sale, resale_plan, resale_step
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


def controller_with_idle_block(
    hours: int = 10, nodes: int = 2, config: ControllerConfig | None = None, until_s: float = 1200
) -> Controller:
    """A 2-node SFCompute block of ``hours`` (from 30 s) that ran one short job (done at 700 s) and is
    idle at ``until_s`` (20 min: the controller offers its time in that step). ``config``: the idle release
    held off unless given."""
    c = Controller(config or ControllerConfig(idle_release_s=10**6))
    observed = MarketObserved(sid("m"), (sf_offer(),), T0, {"8xH100": MarketBook(BOOK, BIDS)}, ("sfcompute",))
    [buy] = c.step(at(0), [observed, *submit(spec("j", 8 * nodes, duration=600))])
    block = replace(grant(buy, at(30)), end_time=at(30) + timedelta(hours=hours))
    order = Order(f"ord-{buy.action_id}", buy.action_id, OrderState.FILLED, buy.request, block)
    c.step(at(30), [OrderUpdated(sid("o"), buy.action_id, order)])
    actions = c.step(at(60), ready(*block.node_ids, when=at(60)))
    for s in starts(actions):
        for p in s.placements:
            c.step(at(700), [job_done(p.node_id, s.job_id, at(700))])
    if until_s > 700:
        c.step(at(until_s), [tick()])
    return c


def test_an_idle_block_offers_the_hours_the_forecast_will_not_use_at_the_mirrored_ask() -> None:
    c = controller_with_idle_block()
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


def steady_arrivals(c: Controller, now: datetime, gpus: int, per_hour_s: float) -> None:
    """One job of ``gpus`` GPUs for ``per_hour_s`` seconds arrived in each of the last six hours (the
    forecast's window), before the fixture's own job: a steady rate of ``gpus x per_hour_s / 3600``
    GPU-hours per hour."""
    job = c.state.arrived_jobs[0][1]
    c.state.observed_since = now - timedelta(hours=6)  # the controller watched those hours (the forecast's)
    for k in range(6):  # oldest first: the deque is in order of arrival
        past = replace(job, id=f"past{k}", gpu_count=gpus, expected_duration_sec=per_hour_s)
        c.state.arrived_jobs.insert(k, (now - timedelta(hours=5 - k, minutes=30), past))


def test_the_forecast_keeps_back_the_hours_its_steady_arrivals_would_use() -> None:
    c = controller_with_idle_block(hours=10)
    now = at(1200)
    [idle] = resale_step(c.state, now)
    assert idle.forecast_gpu_hours == 0 and idle.kept_hours == 0  # one arrival is no steady rate
    remaining_h = (c.state.blocks[idle.block_id].block.end_time - now).total_seconds() / HOUR  # 9.675
    assert idle.hours == 9 == int(remaining_h)

    # 8 GPUs busy every hour of the last six, expected to go on for six more: 48 GPU-h, over the
    # block's 16 GPUs 3 h kept; of the 9.675 h left, the last 6 are offered.
    steady_arrivals(c, now, gpus=8, per_hour_s=HOUR)
    [sale] = resale_step(c.state, now)
    assert sale.forecast_gpu_hours == 48.0
    assert sale.kept_hours == 3.0
    assert sale.hours == 6
    assert sale.cut == c.state.blocks[sale.block_id].block.end_time - timedelta(hours=6)
    assert "forecast 48.0 GPU-h keeps 3.00 h of the 16 idle GPUs: offering the last 6 h (96 GPU-h)" in (
        sale.reason.message
    )
    assert (sale.reason.need, sale.reason.have) == (48.0, 96)


def answer_offer(offer: SellCapacity, sold: tuple[str, ...] | None) -> SaleUpdated:
    """The seller's answer: ``sold`` nodes filled (``None``: the order was not placed)."""
    if sold is None:
        return SaleUpdated(sid("s"), offer.action_id, None, "the seller takes no sell orders")
    fill = SaleFill(
        f"k-{offer.action_id}",
        offer.provider,
        offer.block_id,
        len(offer.node_ids),
        sold,
        8,
        offer.hours,
        offer.cut,
        offer.price_per_gpu_hour,
    )
    return SaleUpdated(sid("s"), offer.action_id, fill)


def test_a_busy_node_is_not_offered_but_its_idle_sibling_is() -> None:
    c = controller_with_idle_block(hours=10)
    [offer] = c.state.sales.values()
    c.step(at(1210), [answer_offer(offer, ())])  # nothing filled: the whole block is usable again
    actions = c.step(at(1220), submit(spec("long", 8, duration=4 * HOUR)))
    [start] = starts(actions)
    busy = start.placements[0].node_id
    now = at(1220 + 60)
    [sale] = resale_step(c.state, now)
    block = c.state.blocks[sale.block_id]
    [free] = [n for n in block.node_ids if n != busy]
    assert sale.node_ids == (free,) and sale.gpus == 8
    assert sale.price_per_gpu_hour == optimal_ask(BIDS, 8).price_per_gpu_hour
    assert "1 idle of its 2 node(s) with time to sell, 1 busy node(s) not offered" in sale.reason.message
    assert "of the 8 idle GPUs" in sale.reason.message
    # Once the busy node's job ends and it has been idle a minute, both are offered.
    c.step(at(2000), [job_done(busy, "long", at(2000))])
    [both] = resale_step(c.state, at(2060))
    assert set(both.node_ids) == set(block.node_ids)


def test_only_pending_work_that_fits_the_idle_nodes_holds_the_sale_back() -> None:
    c = controller_with_idle_block(hours=10)
    [offer] = c.state.sales.values()
    now = at(1230)
    # Pending FAST work the block cannot host (20 h; it has 9.67 h left) does not hold the sale back.
    c.step(now, submit(spec("twenty-hours", 8, duration=20 * HOUR)))
    assert "twenty-hours" in c.state.pending_ids
    [sale] = resale_step(c.state, now)
    assert "1 FAST job(s) pending, none fits these nodes" in sale.reason.message
    # A 5-hour FAST job waits (the offer in flight ends the nodes at its cut for the packer) and would fit
    # them once the offer is answered: while it is pending, the block is not sold.
    c.step(now, submit(spec("five-hours", 8, duration=5 * HOUR)))
    assert "five-hours" in c.state.pending_ids
    sales, [held] = resale_plan(c.state, now)
    assert sales == () and held.block_id == offer.block_id
    assert held.reason.code == "resale_held_for_pending" and held.reason.have == 2
    assert (
        "pending FAST job five-hours (8x60 GB GPUs) fits them (2 FAST job(s) pending)" in held.reason.message
    )
    # Not sold, the nodes have their whole time again: the job is placed, then the other node is offered.
    actions = c.step(at(1240), [answer_offer(offer, ())])
    [start] = starts(actions)
    assert start.job_id == "five-hours"
    [later] = resale_step(c.state, at(1300))
    assert start.placements[0].node_id not in later.node_ids


def test_a_partial_fill_moves_the_sold_nodes_end_credits_the_proceeds_and_the_costs_add_up() -> None:
    c = controller_with_idle_block(hours=10)
    [sale] = c.state.sales.values()  # the controller offered the idle block in its last step
    block = c.state.blocks[sale.block_id]
    sold, kept = sale.node_ids[1], sale.node_ids[0]
    sold_answer = answer_offer(sale, (sold,))
    assert sold_answer.fill is not None
    fill = sold_answer.fill
    c.step(at(1300), [sold_answer])
    credited = block.sold_back_revenue
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
    c = controller_with_idle_block()
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
    c = controller_with_idle_block(hours=4)
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
    c = controller_with_idle_block()
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
