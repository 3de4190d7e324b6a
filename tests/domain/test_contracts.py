"""The economics of a purchase: $ per work unit, spot rework, and contracts sized to the forecast."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.contracts import (
    HOURLY,
    Forecast,
    choose_contract,
    expected_job_cost,
    hazard_per_hour,
    rework_fraction,
    steady_rate,
    work_rate,
)
from scalar.domain.errors import InvalidSpecError
from scalar.domain.gpus import relative_throughput
from scalar.domain.offers import Offer
from scalar.domain.tier import Tier


def offer(model: str, price: str, *, spot: bool = False, rate: float | None = None, gpus: int = 1) -> Offer:
    return Offer(
        provider="aws",
        instance_type=f"{model}-{gpus}",
        region="us-east-1",
        price_per_hour=Decimal(price),
        gpu_model=model,
        gpu_count=gpus,
        gpu_memory_gb=80,
        vcpu=16,
        memory_gb=128,
        spot=spot,
        interruption_rate=rate,
    )


def test_flex_work_is_priced_per_work_unit_and_fast_per_gpu_hour() -> None:
    h100, t4 = offer("H100", "2.00"), offer("T4", "0.30")
    assert work_rate("H100", Tier.FLEX) == relative_throughput("H100") > 1
    assert work_rate("H100", Tier.FAST) == 1.0
    assert work_rate("NOT-A-GPU", Tier.FLEX) == 1.0
    flex_h100 = expected_job_cost(Decimal("2.00"), h100, Tier.FLEX, expected_s=3600, checkpoint_s=None)
    flex_t4 = expected_job_cost(Decimal("0.30"), t4, Tier.FLEX, expected_s=3600, checkpoint_s=None)
    # Per GPU-hour the T4 is cheaper; per unit of batch work the H100 is (it does several T4-hours per hour).
    assert flex_h100.per_work_hour < flex_t4.per_work_hour
    fast_h100 = expected_job_cost(Decimal("2.00"), h100, Tier.FAST, expected_s=3600, checkpoint_s=None)
    assert fast_h100.per_work_hour == Decimal("2.00")


def test_hazard_reads_the_rate_over_its_period() -> None:
    assert hazard_per_hour(offer("A100", "1", rate=0.1)) == 0.0  # on-demand is never interrupted
    monthly = hazard_per_hour(offer("A100", "1", spot=True, rate=0.1))
    hourly = hazard_per_hour(offer("A100", "1", spot=True, rate=0.1), period_hours=1)
    assert hourly == pytest.approx(-math.log(0.9))
    assert monthly == pytest.approx(hourly / 730)
    assert hazard_per_hour(offer("A100", "1", spot=True), period_hours=1, unpublished_rate=0.2) == (
        pytest.approx(-math.log(0.8))
    )


def test_a_long_uncheckpointed_job_loses_to_on_demand_and_checkpoints_win_it_back() -> None:
    spot, od = offer("A100", "0.40", spot=True, rate=0.1), offer("A100", "1.20")
    long_job = 20 * 3600.0
    on_spot = expected_job_cost(
        Decimal("0.40"), spot, Tier.FLEX, expected_s=long_job, checkpoint_s=None, period_hours=1
    )
    on_demand = expected_job_cost(
        Decimal("1.20"), od, Tier.FLEX, expected_s=long_job, checkpoint_s=None, period_hours=1
    )
    assert on_spot.per_work_hour > on_demand.per_work_hour  # 2.4x the work redone
    saved = expected_job_cost(
        Decimal("0.40"), spot, Tier.FLEX, expected_s=long_job, checkpoint_s=1800, period_hours=1
    )
    assert saved.per_work_hour < on_demand.per_work_hour
    assert 0 < saved.rework < 0.03
    # A short job barely notices the hazard; a FAST service never pays rework.
    short = expected_job_cost(
        Decimal("0.40"), spot, Tier.FLEX, expected_s=600, checkpoint_s=None, period_hours=1
    )
    assert short.rework < 0.01
    fast = expected_job_cost(
        Decimal("0.40"), spot, Tier.FAST, expected_s=long_job, checkpoint_s=None, period_hours=1
    )
    assert fast.rework == 0.0


@given(
    hazard=st.floats(0.0, 5.0),
    hours=st.floats(0.0, 500.0),
    shorter=st.floats(0.01, 50.0),
    longer=st.floats(0.01, 50.0),
)
def test_rework_grows_with_the_hazard_and_the_segment(
    hazard: float, hours: float, shorter: float, longer: float
) -> None:
    a, b = sorted((shorter, longer))
    r = rework_fraction(hazard, hours, None)
    assert r >= 0.0
    # Checkpointing more often never costs more rework; a higher hazard never less.
    assert rework_fraction(hazard, hours, a) <= rework_fraction(hazard, hours, b) + 1e-12
    assert rework_fraction(hazard, hours, b) <= r + 1e-12
    assert rework_fraction(hazard * 2, hours, None) >= r - 1e-12


def test_bursty_demand_buys_short_sustained_demand_buys_the_length_it_fills() -> None:
    price = Decimal("2.00")
    burst = Forecast(queued=((8, 0.5),), rate_gpu_hours_per_hour=0.0, horizon_hours=6)
    pick = choose_contract(gpus=8, price_per_gpu_hour=price, lengths_hours=(1, 24, 168), forecast=burst)
    assert pick.chosen.hours == 1 and pick.chosen.utilisation(8) == pytest.approx(0.5)
    # 8 GPUs busy for as far as the forecast sees, with dearer hourly capacity as the alternative: a day.
    steady = Forecast(queued=((8, 1.0),), rate_gpu_hours_per_hour=8.0, horizon_hours=24)
    pick = choose_contract(
        gpus=8,
        price_per_gpu_hour=price,
        lengths_hours=(1, 24, 168),
        forecast=steady,
        alternative_per_gpu_hour=Decimal("3.00"),
    )
    assert pick.chosen.hours == 24
    assert {a.hours for a in pick.alternatives} == {1, 168}
    assert "beat" in pick.text(8) and "utilisation" in pick.text(8)


def test_a_contract_shorter_than_the_longest_job_is_not_offered() -> None:
    f = Forecast(queued=((8, 30.0),))
    assert (
        choose_contract(
            gpus=8, price_per_gpu_hour=Decimal(1), lengths_hours=(1, 24, 168), forecast=f
        ).chosen.hours
        == 168
    )


forecasts = st.builds(
    Forecast,
    queued=st.lists(st.tuples(st.integers(1, 16), st.floats(0.0, 100.0)), max_size=5).map(tuple),
    rate_gpu_hours_per_hour=st.floats(0.0, 32.0),
    horizon_hours=st.floats(0.0, 48.0),
)


@given(
    forecast=forecasts,
    gpus=st.integers(1, 32),
    price=st.decimals("0.1", "10", places=2),
    alt=st.decimals("0.1", "10", places=2),
    lengths=st.lists(st.sampled_from([1.0, 2.0, 6.0, 24.0, 168.0, 720.0]), min_size=1, max_size=6),
)
def test_never_a_longer_contract_when_a_shorter_one_at_the_same_rate_covers_the_forecast(
    forecast: Forecast, gpus: int, price: Decimal, alt: Decimal, lengths: list[float]
) -> None:
    pick = choose_contract(
        gpus=gpus,
        price_per_gpu_hour=price,
        lengths_hours=lengths,
        forecast=forecast,
        alternative_per_gpu_hour=alt,
    )
    total = forecast.total()
    offered = [o for o in (pick.chosen, *pick.alternatives)]
    covering = [o.hours for o in offered if o.hours != HOURLY and o.covered_gpu_hours >= total - 1e-9]
    if covering:
        assert pick.chosen.hours <= min(covering)
    # The choice is the cheapest expected total, and covers no more than it holds.
    assert all(pick.chosen.expected_total <= o.expected_total for o in offered)
    assert pick.chosen.covered_gpu_hours <= gpus * pick.chosen.hours + 1e-9


def test_bad_forecasts_and_lengths_are_refused_with_the_field() -> None:
    with pytest.raises(InvalidSpecError, match="rate"):
        Forecast(queued=(), rate_gpu_hours_per_hour=-1)
    with pytest.raises(InvalidSpecError, match="gpus"):
        choose_contract(gpus=0, price_per_gpu_hour=Decimal(1), lengths_hours=(1,), forecast=Forecast(()))
    with pytest.raises(InvalidSpecError, match="lengths_hours"):
        choose_contract(gpus=1, price_per_gpu_hour=Decimal(1), lengths_hours=(), forecast=Forecast(()))


def test_steady_rate_is_the_quietest_hour() -> None:
    assert steady_rate([8.0, 3.0, 12.0]) == 3.0
    assert steady_rate([]) == 0.0
