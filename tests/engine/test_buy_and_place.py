"""A FAST job from nothing to finished, Dask style: events in, actions out, asserted exactly."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from scalar.domain.market import CapacityRequest
from scalar.domain.orderbook import calculate_optimal_price
from scalar.domain.tier import Tier
from scalar.engine import BuyCapacity, Controller, JobState, StartWork, WorkPlacement
from scalar.engine.config import ControllerConfig
from tests.engine.builders import (
    BOOK,
    at,
    buys,
    filled,
    job_done,
    market,
    prime_offer,
    ready,
    sf_offer,
    spec,
    started,
    starts,
    submit,
    tick,
)

WEEK_S = 7 * 86_400


def test_fast_job_buys_once_at_the_books_optimal_price_then_runs_and_frees_its_gpus() -> None:
    c = Controller()

    # 1. A FAST job and an empty cluster: exactly one purchase, at the orderbook's optimal price.
    actions = c.step(at(0), [market(sf_offer("2.00")), *submit(spec("j-1", 4, vram=60))])
    assert len(actions) == 1
    buy = actions[0]
    assert isinstance(buy, BuyCapacity)
    optimal, index = calculate_optimal_price(BOOK, 8)
    assert (optimal, index) == (Decimal("2.20"), 2)  # not the cheapest covering level ($2.10)
    assert buy == BuyCapacity(
        action_id="act-000001",
        reason=buy.reason,
        group="sfcompute/8xH100/FAST",
        request=CapacityRequest(
            provider="sfcompute",
            instance_type="8xH100",
            node_count=1,
            # Sized to the demand (engine/contract_sizing.py): the 1-hour job and its allowances (45 min)
            # need 2 whole hours; a longer block would only add idle hours at the same rate.
            duration_s=2 * 3600,
            limit_price_per_gpu_hour=Decimal("2.20"),
            tier=Tier.FAST,
            gpu_model="H100",
            gpus_per_node=8,
            spot=False,
            region="us-west",
        ),
        for_jobs=("j-1",),
    )
    assert buy.reason.code == "buy_capacity"
    assert "FAST job j-1 needs 4x60 GB GPUs" in buy.reason.message
    assert (
        "buying 1x 8xH100 on sfcompute at $2.20/GPU-h (optimal level 2 of the 8xH100 book)"
        in buy.reason.message
    )

    # 2. The same demand a tick later buys nothing: the slice in flight covers it.
    assert c.step(at(10), [tick()]) == []
    assert c.step(at(20), [market(sf_offer("2.00"))]) == []
    [group] = [g for g in c.scale_groups() if g.name == "sfcompute/8xH100/FAST"]
    assert group.slices.requesting == 1

    # 3. Filled -> the node boots; nothing to start yet.
    assert c.step(at(30), [filled(buy, at(30))]) == []
    assert [(n.node_id, n.state.value) for n in c.nodes()] == [("blk-1-n0", "booting")]

    # 4. READY -> the job starts on GPUs 0-3 of that node.
    actions = c.step(at(60), ready("blk-1-n0", when=at(60)))
    assert actions == [
        StartWork(
            action_id="act-000002",
            reason=actions[0].reason,
            job_id="j-1",
            placements=(WorkPlacement("blk-1-n0", (0, 1, 2, 3)),),
            expected_duration_s=3600,
        )
    ]
    assert c.job("j-1").state is JobState.SCHEDULED
    assert c.step(at(70), [started("j-1", "blk-1-n0")]) == []
    assert c.job("j-1").state is JobState.RUNNING
    assert c.nodes()[0].gpus_free == 4

    # 5. The job finishes: its GPUs, CPU and RAM are free again.
    assert c.step(at(3670), [job_done("blk-1-n0", "j-1", at(3670))]) == []
    assert c.job("j-1").state is JobState.SUCCEEDED
    node = c.nodes()[0]
    assert (node.gpus_free, node.cpu_used, node.ram_used_gb, node.jobs) == (8, 0.0, 0.0, ())

    # 6. A second job packs onto the same node, no purchase.
    # (The block was sized to 2 hours: a 10-minute job fits what is left of it.)
    actions = c.step(at(3680), submit(spec("j-2", 2, vram=40, duration=600)))
    assert buys(actions) == []
    assert [(s.job_id, s.placements) for s in starts(actions)] == [
        ("j-2", (WorkPlacement("blk-1-n0", (0, 1)),))
    ]


def test_second_job_packs_next_to_the_first_on_the_node_bought_for_it() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("a", 4))])
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(60), ready("blk-1-n0", when=at(60)))
    actions = c.step(at(90), submit(spec("b", 4)))
    assert [(s.job_id, s.placements) for s in starts(actions)] == [
        ("b", (WorkPlacement("blk-1-n0", (4, 5, 6, 7)),))
    ]
    # A third 4-GPU job no longer fits: it buys one more node, exactly one.
    actions = c.step(at(120), submit(spec("c", 4)))
    assert [(b.request.node_count, b.for_jobs) for b in buys(actions)] == [(1, ("c",))]


def test_two_jobs_arriving_together_share_one_purchase() -> None:
    c = Controller()
    actions = c.step(at(0), [market(sf_offer()), *submit(spec("a", 4), spec("b", 3))])
    assert [(b.request.node_count, b.for_jobs) for b in buys(actions)] == [(1, ("a", "b"))]


def test_procurement_chooses_prime_below_8_gpus_and_sfcompute_from_8() -> None:
    offers = [sf_offer("2.00"), prime_offer("2.50", gpus=2)]
    small = Controller()
    [buy] = small.step(at(0), [market(*offers), *submit(spec("s", 2))])
    assert (buy.group, buy.request.limit_price_per_gpu_hour) == ("prime/2xH100/FAST", Decimal("2.50"))
    assert "prime's offer price" in buy.reason.message

    large = Controller()
    [buy] = large.step(at(0), [market(*offers), *submit(spec("l", 8))])
    assert (buy.group, buy.request.limit_price_per_gpu_hour) == ("sfcompute/8xH100/FAST", Decimal("2.20"))


def test_high_priority_job_is_placed_first_when_capacity_is_scarce() -> None:
    c = Controller(ControllerConfig())
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("low", 8, priority=0))])
    # A later, higher-priority job takes the node bought for the first one.
    c.step(at(10), submit(spec("high", 8, priority=5)))
    c.step(at(30), [filled(buy, at(30))])
    actions = c.step(at(60), ready("blk-1-n0", when=at(60)))
    assert [s.job_id for s in starts(actions)] == ["high"]
    assert c.job("low").state is JobState.PENDING


def test_a_long_job_buys_a_contract_long_enough_to_finish() -> None:
    c = Controller()
    ten_days = 10 * 86_400
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("long", 8, duration=ten_days))])
    cfg = ControllerConfig()
    needed = ten_days + cfg.safety_margin_s + cfg.request_timeout_s + cfg.boot_timeout_s
    assert buy.request.duration_s == math.ceil(needed / 3600) * 3600  # a block is sold in whole hours
    c.step(at(30), [filled(buy, at(30))])
    [start] = starts(c.step(at(90), ready("blk-1-n0", when=at(90))))
    assert start.job_id == "long"


def test_no_job_starts_on_a_node_that_ends_before_it_would_finish() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("a", 2, duration=600))])
    short = replace(buy, request=replace(buy.request, duration_s=3600))  # the seller grants one hour only
    c.step(at(30), [filled(short, at(30))])
    assert [s.job_id for s in starts(c.step(at(60), ready("blk-1-n0", when=at(60))))] == ["a"]
    # At +300 s the contract has 3330 s left: a 3100 s job + 300 s safety margin does not fit, 3000 s would.
    actions = c.step(at(300), submit(spec("b", 2, duration=3100)))
    assert starts(actions) == []
    why = c.explain("b")
    assert why is not None and why.placement is not None
    assert [(r.code, r.count) for r in why.placement.rejections] == [("expires_too_soon", 1)]
    assert buys(actions)  # so it buys capacity that lasts
    assert c.nodes()[0].end_time - at(30) == timedelta(hours=1)
    assert [s.job_id for s in starts(c.step(at(310), submit(spec("c", 2, duration=3000))))] == ["c"]
