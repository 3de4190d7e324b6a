"""A sale in flight and the idle release of a block paid whole (engine/resale.py, engine/housekeeping.py).

While a sell order is out, the packer sees each offered node as ending at the sale's cut: work that would
run past it is not placed there (and ``explain`` says why), short work still is, and nothing the fill does
cuts a placed job short. Where the idle release would let a paid-whole block go, its unsold time is sold
back (credited) instead, and the block is released as before only when nothing is left to sell or the
seller refuses sell orders."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from scalar.engine import ControllerConfig, ReleaseBlock, SellCapacity, StartWork
from scalar.engine.actions import Action
from scalar.engine.resale import RESALE_RETRY_S
from tests.engine.builders import at, job_done, spec, starts, submit, tick
from tests.engine.test_resale import answer_offer, controller_with_idle_block, steady_arrivals

HOUR = 3600
DEFAULTS = ControllerConfig()  # idle_release_s = 1800 s: the hold a paid-whole block gets


def _of(actions: list[Action], kind: type) -> list:  # type: ignore[type-arg]
    return [a for a in actions if isinstance(a, kind)]


def test_while_a_sale_is_in_flight_no_job_is_placed_past_its_cut() -> None:
    c = controller_with_idle_block(hours=10)
    [offer] = c.state.sales.values()  # both nodes, from 9 h before the end: the cut is at 3630 s
    assert offer.cut == at(3630)
    block = c.state.blocks[offer.block_id]

    # The bug this prevents: a 5-hour job placed on an offered node, then the fill moves the node's end
    # to 40 minutes later while the job runs. It waits instead, and says why.
    actions = c.step(at(1300), submit(spec("five-hours", 8, duration=5 * HOUR)))
    assert not starts(actions)
    explained = c.explain("five-hours")
    assert explained is not None and explained.placement is not None
    [expiry] = [r for r in explained.placement.rejections if r.code == "expires_too_soon"]
    assert expiry.count == 2
    # the cut, 3630 s, seen at 1300 s: what the node has left for the packer while the offer is out
    assert expiry.example == "blk-1-n0: expires in 38m50s; the job needs 5h00m + 5m safety margin"

    # Work that ends (with its safety margin) before the cut still goes there.
    actions = c.step(at(1310), submit(spec("short", 8, duration=600)))
    [start] = starts(actions)
    assert start.job_id == "short" and start.placements[0].node_id in offer.node_ids

    # The market sells both nodes: their end moves to the cut, and every job placed on them ends before it.
    c.step(at(1320), [answer_offer(offer, offer.node_ids)])
    for node_id in offer.node_ids:
        assert c.state.nodes[node_id].node.block.end_time == offer.cut
    c.step(at(1310 + 600), [job_done(start.placements[0].node_id, "short", at(1910))])
    later = c.step(at(2000), [tick()])
    placed_here = [s for s in _of(c.state.recent_actions, StartWork) if set(s.node_ids) & set(block.node_ids)]
    assert [s.job_id for s in placed_here] == ["j", "short"]  # the fixture's job, done at 700 s, and "short"
    assert not starts(later)
    assert "five-hours" in c.state.pending_ids


def test_an_offer_that_was_not_placed_gives_the_nodes_their_whole_time_back() -> None:
    c = controller_with_idle_block(hours=10)
    [offer] = c.state.sales.values()
    c.step(at(1300), submit(spec("five-hours", 8, duration=5 * HOUR)))
    assert "five-hours" in c.state.pending_ids
    actions = c.step(at(1310), [answer_offer(offer, None)])
    [start] = starts(actions)
    assert start.job_id == "five-hours" and start.placements[0].node_id in offer.node_ids


def test_a_node_that_takes_work_in_the_step_of_the_offer_is_not_offered() -> None:
    c = controller_with_idle_block(hours=10, until_s=700)
    # The job arrives in the step the block would be offered: the packer goes first, the offer leaves its
    # node out.
    actions = c.step(at(1200), submit(spec("long", 8, duration=4 * HOUR)))
    [start] = starts(actions)
    [offer] = _of(actions, SellCapacity)
    busy = start.placements[0].node_id
    assert busy not in offer.node_ids and len(offer.node_ids) == 1
    assert "1 idle of its 2 node(s) with time to sell, 1 busy node(s) not offered" in offer.reason.message


def test_a_partly_sold_block_is_not_released_its_unsold_time_is_offered_again() -> None:
    c = controller_with_idle_block(hours=10, config=DEFAULTS)
    [offer] = c.state.sales.values()
    block = c.state.blocks[offer.block_id]
    sold, unsold = offer.node_ids[1], offer.node_ids[0]
    c.step(at(1210), [answer_offer(offer, (sold,))])
    first = block.sold_back_revenue
    assert first == offer.price_per_gpu_hour * 8 * offer.hours

    # Idle past the 1800 s hold (since 700 s): the block is paid whole, so it is kept, not released.
    actions = c.step(at(2600), [tick()])
    assert not _of(actions, ReleaseBlock) and block.open
    kept = [e.reason for e in c.story(offer.block_id) if e.reason.code == "kept_for_resale"]
    assert len(kept) == 1
    assert "releasing it would drop the 9 h left on 1 unsold node(s) (72 GPU-h)" in kept[0].message
    assert not _of(c.step(at(3000), [tick()]), ReleaseBlock)
    assert len([e for e in c.story(offer.block_id) if e.reason.code == "kept_for_resale"]) == 1  # told once

    # An hour after the first offer, the unsold node's time is offered again, and what sells is credited.
    again_at = at(1200 + RESALE_RETRY_S)
    [again] = _of(c.step(again_at, [tick()]), SellCapacity)
    assert again.node_ids == (unsold,)
    remaining_h = (block.block.end_time - again_at).total_seconds() / HOUR
    assert again.hours == int(remaining_h) == 8
    actions = c.step(again_at, [answer_offer(again, (unsold,))])
    assert block.sold_back_revenue == first + again.price_per_gpu_hour * 8 * again.hours
    assert block.sold_back_gpu_s == 8 * (offer.hours + again.hours) * HOUR
    # Nothing is left to sell: now the idle release lets it go, as for any block.
    assert _of(actions, ReleaseBlock) and not block.open


def test_a_seller_that_refuses_sell_orders_gets_the_block_released_as_before() -> None:
    c = controller_with_idle_block(hours=10, config=DEFAULTS)
    [offer] = c.state.sales.values()
    c.step(at(1210), [answer_offer(offer, None)])
    assert not _of(c.step(at(2400), [tick()]), ReleaseBlock)  # idle 1700 s: within the hold
    [release] = _of(c.step(at(2600), [tick()]), ReleaseBlock)
    block = c.state.blocks[offer.block_id]
    assert release.reason.code == "idle" and not block.open
    # Released early, the block still costs its whole commitment: the hours left are paid at the release,
    # as idle time (before, its spend stopped at the release: /costs showed a fraction of the commitment).
    hours = Decimal((block.block.end_time - block.block.start_time).total_seconds()) / 3600
    gpus = block.block.gpus_per_node * len(block.node_ids)
    assert abs(block.accrued - block.grant.price_per_gpu_hour * gpus * hours) < Decimal("1e-9")
    assert block.paid_gpu_s == gpus * hours * 3600
    assert block.paid_gpu_s >= block.busy_gpu_s


def test_where_the_release_would_drop_hours_the_forecast_kept_they_are_sold_instead() -> None:
    c = controller_with_idle_block(hours=10, config=DEFAULTS, until_s=700)
    # Steady arrivals of 24 GPU-h an hour: the forecast keeps all 9.7 h of the block's 16 GPUs, so the
    # resale step offers nothing.
    steady_arrivals(c, at(1200), gpus=8, per_hour_s=3 * HOUR)
    assert not _of(c.step(at(1200), [tick()]), SellCapacity)
    # But nothing came for the block and it is idle past its hold: the release would drop its time, so
    # every whole hour left is offered instead, and the block is kept while the answer is out.
    actions = c.step(at(2600), [tick()])
    assert not _of(actions, ReleaseBlock)
    [sale] = _of(actions, SellCapacity)
    block = c.state.blocks[sale.block_id]
    assert set(sale.node_ids) == set(block.node_ids)
    assert sale.hours == 9 and sale.cut == block.block.end_time - timedelta(hours=9)
    assert sale.reason.code == "sell_instead_of_release"
    assert "idle for 1900 s (threshold 1800 s)" in sale.reason.message
    assert "offering the 9 h left on 2 unsold node(s) (144 GPU-h)" in sale.reason.message
    actions = c.step(at(2610), [answer_offer(sale, sale.node_ids)])
    assert block.sold_back_revenue == sale.expected_proceeds
    # All of it sold: what is left of the block (to the cut) is released like any idle block.
    assert _of(actions, ReleaseBlock) and not block.open
