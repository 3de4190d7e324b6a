"""FLEX: capped price, batched demand. A FLEX purchase is never above the FLEX cap."""

from __future__ import annotations

from decimal import Decimal

from scalar.domain.tier import Tier
from scalar.engine import Controller, ControllerConfig, JobState, TierConfig
from tests.engine.builders import (
    asks,
    at,
    buys,
    filled,
    market,
    prime_offer,
    ready,
    sf_offer,
    spec,
    starts,
    submit,
    tick,
)


def flex_config(cap: str, **kwargs: object) -> ControllerConfig:
    tiers = {Tier.FAST: TierConfig(None), Tier.FLEX: TierConfig(Decimal(cap))}
    return ControllerConfig(tiers=tiers, **kwargs)  # type: ignore[arg-type]


def test_flex_buys_a_node_worth_at_once_at_the_best_level_within_its_cap() -> None:
    # The whole book's optimum for 8 GPUs is $2.20 (level 2), over the $2.15 cap. The asks within the cap
    # ($2.00 x4, $2.10 x4) still cover 8 GPUs: their optimum, $2.10, is the limit.
    c = Controller(flex_config("2.15"))
    [buy] = c.step(at(0), [market(sf_offer("2.00")), *submit(spec("f", 8, tier="FLEX"))])
    assert (buy.group, buy.request.tier) == ("sfcompute/8xH100/FLEX", Tier.FLEX)
    assert buy.request.limit_price_per_gpu_hour == Decimal("2.10")
    assert "within the FLEX cap $2.15/GPU-h (the whole book's optimum $2.20 is over it)" in buy.reason.message


def test_flex_never_buys_above_its_cap_and_waits_for_cheaper_asks() -> None:
    c = Controller(flex_config("2.05"))
    actions = c.step(at(0), [market(sf_offer("2.00")), *submit(spec("f", 8, tier="FLEX"))])
    assert actions == []
    job = c.job("f")
    assert job is not None and job.reason is not None
    assert job.reason.code == "over_tier_cap"
    assert "asks within the cap hold 4 of 8 GPUs" in job.reason.message
    [unmet] = c.autoscaler_status().unmet
    assert (unmet.job_ids, unmet.code) == (("f",), "over_tier_cap")
    # Hours later, still nothing above the cap.
    assert c.step(at(7200), [tick()]) == []
    # The asks drop: it buys, within the cap.
    cheaper = asks(("2.00", 4), ("2.04", 8))
    [buy] = c.step(at(7300), [market(sf_offer("2.00"), book=cheaper)])
    assert buy.request.limit_price_per_gpu_hour is not None
    assert buy.request.limit_price_per_gpu_hour <= Decimal("2.05")


def test_fixed_price_offer_over_the_flex_cap_is_never_bought() -> None:
    c = Controller(flex_config("2.00"))
    assert (
        c.step(at(0), [market(prime_offer("2.50", gpus=8), book=None), *submit(spec("f", 8, tier="FLEX"))])
        == []
    )
    job = c.job("f")
    assert job is not None and job.reason is not None and job.reason.code == "no_eligible_group"
    assert "over_tier_cap" in job.reason.message
    # The same offer at $1.90 is bought at $1.90.
    [buy] = c.step(at(60), [market(prime_offer("1.90", gpus=8), book=None)])
    assert buy.request.limit_price_per_gpu_hour == Decimal("1.90")


def test_small_flex_demand_waits_for_the_batch_window_then_buys() -> None:
    c = Controller(flex_config("10", flex_batch_wait_s=900, flex_batch_gpus=8))
    assert c.step(at(0), [market(sf_offer()), *submit(spec("f1", 2, tier="FLEX"))]) == []
    job = c.job("f1")
    assert job is not None and job.reason is not None and job.reason.code == "flex_waiting"
    assert "2 of 8 GPUs" in job.reason.message
    assert c.step(at(600), submit(spec("f2", 2, tier="FLEX"))) == []
    assert c.step(at(899), [tick()]) == []
    # 900 s after f1 began waiting: all waiting FLEX demand goes out together, in one purchase.
    [buy] = c.step(at(900), [tick()])
    assert (buy.request.node_count, buy.for_jobs) == (1, ("f1", "f2"))


def test_flex_batch_is_released_as_soon_as_it_needs_a_node_worth_of_gpus() -> None:
    c = Controller(flex_config("10", flex_batch_wait_s=3600, flex_batch_gpus=8))
    assert c.step(at(0), [market(sf_offer()), *submit(spec("f1", 4, tier="FLEX"))]) == []
    [buy] = c.step(at(5), submit(spec("f2", 4, tier="FLEX")))
    assert buy.for_jobs == ("f1", "f2")


def test_fast_demand_buys_now_while_flex_waits() -> None:
    c = Controller(flex_config("10"))
    actions = c.step(at(0), [market(sf_offer()), *submit(spec("slow", 2, tier="FLEX"), spec("fast", 2))])
    assert [b.for_jobs for b in buys(actions)] == [("fast",)]


def test_flex_jobs_run_only_on_flex_nodes_and_are_placed_as_capacity_frees() -> None:
    c = Controller(flex_config("10", flex_batch_gpus=8))
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("f1", 8, tier="FLEX"))])
    c.step(at(30), [filled(buy, at(30))])
    assert [s.job_id for s in starts(c.step(at(60), ready("blk-1-n0", when=at(60))))] == ["f1"]
    # A FAST job never lands on the FLEX node, even with its GPUs free later.
    actions = c.step(at(70), submit(spec("fast", 2)))
    assert starts(actions) == [] and [b.group for b in buys(actions)] == ["sfcompute/8xH100/FAST"]
    assert c.job("fast").state is JobState.PENDING
