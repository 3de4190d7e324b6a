"""A block paid whole is priced with the idle time it commits to: short bursts go to hourly sellers,
sustained demand to blocks (issue 16 item 2; engine/contract_sizing.block_commitment, the cost band)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.contracts import Commitment, work_rate
from scalar.domain.offers import PRIME, SFCOMPUTE
from scalar.domain.tier import Tier
from scalar.engine import Controller, ControllerConfig
from scalar.engine.contract_sizing import block_commitment, forecast_for, observed_hours
from scalar.engine.snapshot import market_snapshot, restore, snapshot
from tests.engine.builders import at, buys, market, prime_offer, sf_offer, spec, submit

CONFIG = ControllerConfig(flex_batch_wait_s=0)
OFFERS = (sf_offer("2.00"), prime_offer("2.10", gpus=8))


def _buy(tier: str, duration_s: float, config: ControllerConfig = CONFIG) -> tuple[str, str]:
    c = Controller(config)
    [buy] = buys(c.step(at(0), [market(*OFFERS), *submit(spec("j", 8, tier=tier, duration=duration_s))]))
    return buy.request.provider, buy.reason.message


@pytest.mark.parametrize("tier", ["FLEX", "FAST"])
def test_a_two_minute_job_goes_to_the_hourly_seller_not_a_one_hour_block(tier: str) -> None:
    provider, why = _buy(tier, 120)
    assert provider == PRIME
    # The block it passed over is named with what its commitment would have cost the job.
    assert "8xH100" in why and "block paid whole" in why and "its share while it runs" in why


@pytest.mark.parametrize("tier", ["FLEX", "FAST"])
def test_a_job_that_fills_its_block_still_goes_to_sfcompute(tier: str) -> None:
    # 100 A100-hours of FLEX work run about 32 h on an H100, a FAST service its 100 h: either fills its
    # block but for the purchase's allowances, so seed 000's rule (8+ GPUs: SFCompute) decides.
    provider, why = _buy(tier, 100 * 3600)
    assert provider == SFCOMPUTE, why
    assert "contract: expected $" in why


def test_a_block_left_idle_by_its_allowances_loses_to_an_hourly_seller_that_is_cheaper_with_them() -> None:
    # 30 A100-hours are 9.5 h on an H100: an 11-hour block is 86% used, so $2.00 on it costs $2.32 a
    # used GPU-hour, more than Prime's $2.10 billed only while held.
    provider, why = _buy("FLEX", 30 * 3600)
    assert provider == PRIME
    assert "a 11 h block paid whole, 86% of it used by the forecast: x1.16" in why


def test_the_commitment_of_a_lone_job_is_the_block_over_its_run() -> None:
    c = Controller(CONFIG)
    c.step(at(0), [market(*OFFERS)])
    group = next(g for g in c.state.groups.values() if g.provider == SFCOMPUTE and g.tier.value == "FLEX")
    c.step(at(1), submit(spec("short", 8, tier="FLEX", duration=600)))
    rec = c.state.jobs["short"]
    assert rec.job is not None
    found = block_commitment(c.state, c.config, group, rec.job, 1, 1.0, at(1))
    assert found is not None
    run_h = 600 / 3600 / work_rate("H100", Tier.FLEX)  # FLEX work is A100 time: shorter on an H100
    assert found.hours >= 1 and found.density == 1.0
    assert found.factor == pytest.approx(found.hours / run_h, rel=0.05)


def test_steady_arrivals_count_only_the_hours_the_controller_watched() -> None:
    c = Controller(CONFIG)
    c.step(at(0), [market(sf_offer("2.00"))])
    for i in range(18):  # an 8-GPU, 10-minute FAST job every 10 minutes for three hours
        c.step(at(600 * i), submit(spec(f"a{i}", 8, tier="FAST", duration=600)))
    group = next(g for g in c.state.groups.values() if g.provider == SFCOMPUTE and g.tier.value == "FAST")
    assert observed_hours(c.state, at(600 * 18)) == 3
    # 8 GPUs x 1/6 h x 5 or 6 arrivals an hour: the quietest of the three watched hours, not 0.
    assert forecast_for(c.state, c.config, group, [], at(600 * 18)).rate_gpu_hours_per_hour == pytest.approx(
        8 * 600 / 3600 * 5
    )
    # In its first hour nothing is steady yet.
    fresh = Controller(CONFIG)
    fresh.step(at(0), [market(sf_offer("2.00")), *submit(spec("b", 8, tier="FAST", duration=600))])
    assert observed_hours(fresh.state, at(1800)) == 0
    g2 = next(g for g in fresh.state.groups.values() if g.provider == SFCOMPUTE and g.tier.value == "FAST")
    assert forecast_for(fresh.state, fresh.config, g2, [], at(1800)).rate_gpu_hours_per_hour == 0.0


def test_sustained_short_jobs_fill_a_block_and_stop_paying_its_idle() -> None:
    c = Controller(CONFIG)
    c.step(at(0), [market(*OFFERS)])
    for i in range(24):  # an 8-GPU, 30-minute job every 5 minutes for two hours: a block's worth
        c.step(at(300 * i), submit(spec(f"s{i}", 8, tier="FLEX", duration=1800)))
    group = next(g for g in c.state.groups.values() if g.provider == SFCOMPUTE and g.tier.value == "FLEX")
    job = c.state.jobs["s0"].job
    assert job is not None
    lone = Controller(CONFIG)
    lone.step(at(0), [market(*OFFERS), *submit(spec("s0", 8, tier="FLEX", duration=1800))])
    lone_group = lone.state.groups[group.name]
    now = at(300 * 24)
    busy = block_commitment(c.state, c.config, group, job, 1, 1.0, now)
    alone = block_commitment(lone.state, lone.config, lone_group, job, 1, 1.0, now)
    assert busy is not None and alone is not None
    assert busy.factor < alone.factor
    assert busy.factor <= float(c.config.procurement.host_cost_tolerance)


def test_the_watched_hours_survive_a_snapshot() -> None:
    c = Controller(CONFIG)
    c.step(at(0), [market(*OFFERS), *submit(spec("j", 8, tier="FAST", duration=600))])
    c.step(at(7200), [])
    again = restore(snapshot(c.state), market_snapshot(c.state))
    assert again.observed_since == c.state.observed_since == at(0)
    assert observed_hours(again, at(7200) + timedelta(seconds=1)) == 2


@settings(max_examples=200, deadline=None)
@given(
    hours=st.floats(1, 720),
    utilisation=st.floats(0, 1),
    density=st.floats(0.01, 1),
    more=st.floats(0, 1),
)
def test_a_commitment_never_makes_a_job_cheaper_and_costs_less_the_more_it_is_used(
    hours: float, utilisation: float, density: float, more: float
) -> None:
    low = Commitment(hours, utilisation, density)
    high = Commitment(hours, min(1.0, utilisation + more), density)
    assert low.factor >= 1.0 and high.factor >= 1.0
    assert high.factor <= low.factor
