"""Spend limits in the engine: the autoscaler never commits beyond a limit; the job waits with numbers."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.errors import InvalidSpecError
from scalar.domain.tier import Tier
from scalar.engine import Controller, ControllerConfig, TierConfig
from scalar.engine.budget import (
    BudgetLimit,
    Commitment,
    check_purchase,
    commitments,
    limits_from_list,
    period_window,
    rate_at,
    spend_in,
)
from scalar.engine.codec import event_from_dict, event_to_dict
from scalar.engine.config import ConfigError
from scalar.engine.events import BudgetsChanged
from tests.engine.builders import at, buys, market, prime_offer, rejected, sf_offer, spec, submit, tick
from tests.engine.invariants import check_all
from tests.engine.world import World, replay


def limit(
    scope: str = "global", per_hour: str | None = None, per_period: str | None = None, period: str = "day"
) -> BudgetLimit:
    return BudgetLimit(
        scope,
        None if per_hour is None else Decimal(per_hour),
        None if per_period is None else Decimal(per_period),
        period,
    )


def test_a_purchase_over_the_hourly_limit_waits_with_budget_exceeded_and_numbers() -> None:
    # 8 GPUs at $2.50 (Prime's fixed price) = $20/h; the global limit is $15/h.
    c = Controller(ControllerConfig(budgets=(limit(per_hour="15"),)))
    actions = c.step(at(0), [market(prime_offer("2.50", gpus=8), book=None), *submit(spec("a", 8))])
    assert buys(actions) == []
    job = c.job("a")
    assert job is not None and job.reason is not None
    assert job.reason.code == "budget_exceeded"
    assert (job.reason.resource, job.reason.need, job.reason.have, job.reason.limit) == (
        "usd_per_hour",
        "20.00",
        "0.00",
        "15",
    )
    assert "$20.00/h" in job.reason.message and "$15.00/h" in job.reason.message
    [unmet] = c.autoscaler_status().unmet
    assert unmet.code == "budget_exceeded"


def test_limits_are_shared_by_purchases_and_a_raised_limit_lets_the_job_buy() -> None:
    c = Controller(ControllerConfig(budgets=(limit(per_hour="25"),)))
    [first] = buys(c.step(at(0), [market(prime_offer("2.50", gpus=8), book=None), *submit(spec("a", 8))]))
    assert first.request.limit_price_per_gpu_hour == Decimal("2.50")
    # A second 8-GPU job would take the committed rate to $40/h.
    assert buys(c.step(at(10), submit(spec("b", 8)))) == []
    job = c.job("b")
    assert job is not None and job.reason is not None and job.reason.code == "budget_exceeded"
    assert (job.reason.need, job.reason.have) == ("20.00", "20.00")
    # The admin raises the limit (an event in the log, so a replay decides the same): b buys.
    raise_ = BudgetsChanged("budgets-1", (limit(per_hour="40"),))
    assert event_from_dict(event_to_dict(raise_)) == raise_
    [second] = buys(c.step(at(20), [raise_]))
    assert second.for_jobs == ("b",)


def test_a_rejected_purchase_frees_its_commitment() -> None:
    c = Controller(ControllerConfig(budgets=(limit(per_hour="25"),), backoff_s=0))
    [first] = buys(c.step(at(0), [market(prime_offer("2.50", gpus=8), book=None), *submit(spec("a", 8))]))
    [again] = buys(c.step(at(5), [rejected(first)]))
    assert again.for_jobs == ("a",)


def test_daily_limit_counts_every_day_a_contract_reaches() -> None:
    # $20/h for 7 days: $480 a day. A $400/day limit refuses it even though today has only 12 h left.
    c = Controller(ControllerConfig(budgets=(limit(per_period="400"),)))
    assert buys(c.step(at(0), [market(prime_offer("2.50", gpus=8), book=None), *submit(spec("a", 8))])) == []
    job = c.job("a")
    assert job is not None and job.reason is not None
    assert job.reason.code == "budget_exceeded" and job.reason.resource == "usd_per_day"
    assert job.reason.need == "480.00"  # a whole later day, not today's 12 h ($240)
    # A one-day contract is within it: 12 h today ($240) and 12 h tomorrow.
    c2 = Controller(ControllerConfig(budgets=(limit(per_period="400"),), contract_length_s=86_400))
    assert (
        len(buys(c2.step(at(0), [market(prime_offer("2.50", gpus=8), book=None), *submit(spec("a", 8))])))
        == 1
    )


def test_tenant_limits_apply_to_that_tenant_only() -> None:
    ml = replace(spec("ml-job", 8), tenant="ml")
    c = Controller(ControllerConfig(budgets=(limit("ml", per_hour="10"),)))
    assert buys(c.step(at(0), [market(prime_offer("2.50", gpus=8), book=None), *submit(ml)])) == []
    job = c.job("ml-job")
    assert job is not None and job.reason is not None and "tenant ml's" in job.reason.message
    # Another tenant's job is not held by ml's limit, even when routed in one launch with ml's.
    [buy] = buys(c.step(at(10), submit(spec("other", 8))))
    assert buy.for_jobs == ("other",) and buy.request.node_count == 1
    job = c.job("ml-job")
    assert job is not None and job.reason is not None and job.reason.code == "budget_exceeded"


def test_flex_price_cap_holds_under_a_budget() -> None:
    tiers = {Tier.FAST: TierConfig(None), Tier.FLEX: TierConfig(Decimal("2.05"))}
    c = Controller(ControllerConfig(tiers=tiers, budgets=(limit(per_hour="1000"),)))
    assert buys(c.step(at(0), [market(sf_offer("2.00")), *submit(spec("f", 8, tier="FLEX"))])) == []
    job = c.job("f")
    assert job is not None and job.reason is not None and job.reason.code == "over_tier_cap"


def test_check_purchase_arithmetic() -> None:
    now = datetime(2026, 3, 1, 22, 0, tzinfo=UTC)
    assert period_window(now, "day") == (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))
    assert period_window(datetime(2026, 12, 31, tzinfo=UTC), "month")[1] == datetime(2027, 1, 1, tzinfo=UTC)
    old = Commitment("o", Decimal(10), now - timedelta(hours=5), now - timedelta(hours=1))
    live = Commitment("l", Decimal(5), now - timedelta(hours=1), now + timedelta(hours=10))
    assert rate_at([old, live], "global", now) == Decimal(5)
    day = period_window(now, "day")
    assert spend_in([old, live], "global", *day) == Decimal(40) + Decimal(
        15
    )  # 4 h spent + 1 h + 2 h to midnight
    new = Commitment("n", Decimal(1), now, now + timedelta(hours=1))
    assert check_purchase([limit(per_period="56")], [old, live], new, now) is None
    over = check_purchase([limit(per_period="55.5")], [old, live], new, now)
    assert over is not None and over.code == "budget_exceeded"


def test_bad_limits_name_the_field() -> None:
    with pytest.raises(InvalidSpecError, match=r"budgets\[0\].usd_per_hour"):
        limits_from_list([{"usd_per_hour": "-1"}])
    with pytest.raises(InvalidSpecError, match=r"budgets\[0\].period"):
        limits_from_list([{"usd_per_period": 5, "period": "fortnight"}])
    with pytest.raises(InvalidSpecError, match=r"budgets\[1\].scope"):
        limits_from_list([{"scope": "a"}, {"scope": "a"}])
    with pytest.raises(ConfigError, match="budgets"):
        ControllerConfig.from_dict({"budgets": [{"usd_per_hour": "nan"}]})
    assert ControllerConfig.from_dict({"budgets": [{"usd_per_hour": 5}]}).budgets == (limit(per_hour="5"),)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6), per_hour=st.sampled_from(["20", "50", "120"]))
def test_random_workloads_never_commit_beyond_the_hourly_limit(seed: int, per_hour: str) -> None:
    world = World(seed=seed, steps=70, arrival_rate=0.8, fill_rate=0.8, reject_rate=0.05, fail_rate=0.02)
    config = ControllerConfig(
        request_timeout_s=600, backoff_s=300, idle_release_s=900, budgets=(limit(per_hour=per_hour),)
    )
    c = Controller(config)

    def check(c: Controller, w: World, step: int) -> None:
        check_all(c, w.actions, w.submitted)
        assert c.now is not None
        assert rate_at(commitments(c.state, c.now), "global", c.now) <= Decimal(per_hour)

    world.run(c, check)
    # The limits are in the config and the log: a replay decides the same.
    again = Controller(config)
    assert replay(world.log, again) == world.actions


def test_costs_are_attributed_to_tenants_by_gpu_hours_with_idle_apart() -> None:
    from tests.engine.builders import filled, ready, started

    c = Controller(ControllerConfig())
    a, b = (
        replace(spec("a", 4, duration=7200), tenant="ml"),
        replace(spec("b", 2, duration=7200), tenant="web"),
    )
    [buy] = buys(c.step(at(0), [market(prime_offer("2.50", gpus=8), book=None), *submit(a, b)]))
    c.step(at(1), [filled(buy, at(1))])
    node = next(iter(c.state.nodes))
    c.step(at(2), ready(node, when=at(2), block_id=next(iter(c.state.blocks))))
    c.step(at(3), [started("a", node), started("b", node)])
    c.step(at(3603), [tick()])
    report = c.costs()
    by = {t.tenant: t for t in report.by_tenant}
    assert set(by) == {"ml", "web", "(idle)"}
    assert abs(by["ml"].gpu_hours - 4) < Decimal("0.01") and abs(by["web"].gpu_hours - 2) < Decimal("0.01")
    # The node costs $20/h: ml held half of its GPUs for the hour ($10), web a quarter ($5).
    assert abs(by["ml"].cost - Decimal(10)) < Decimal("0.05") and abs(by["web"].cost - Decimal(5)) < Decimal(
        "0.05"
    )
    assert report.idle_cost > Decimal(5)  # the 2 idle GPUs, and the boot minutes, apart
    assert by["(idle)"].cost == report.idle_cost and by["(idle)"].gpu_hours == report.idle_gpu_hours
    assert sum(t.cost for t in report.by_tenant) == report.accrued  # exactly: every dollar once
    assert sum(t.gpu_hours for t in report.by_tenant) == report.paid_gpu_hours
