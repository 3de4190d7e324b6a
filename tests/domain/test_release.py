"""How long an idle node is held (domain/release.py): within the configured maximum, never shorter when
more jobs are expected, a block paid whole held for the maximum, a billing unit never split."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.offers import AWS, PRIME, RUNPOD, SFCOMPUTE
from scalar.domain.release import MIN_HOLD_S, billing_unit_s, idle_hold

providers = st.sampled_from([PRIME, RUNPOD, AWS, SFCOMPUTE, "someone-else"])
seconds = st.floats(min_value=0, max_value=7_200, allow_nan=False)
rates = st.floats(min_value=0, max_value=1_000, allow_nan=False)


@given(providers, seconds, rates, seconds)
def test_the_hold_is_within_the_maximum_and_says_why(
    provider: str, restart: float, rate: float, most: float
) -> None:
    hold = idle_hold(provider, restart_s=restart, arrivals_per_hour=rate, max_hold_s=most)
    assert 0 <= hold.hold_s <= most
    assert hold.reason.message and f"{hold.hold_s:g}" in hold.reason.message
    if provider == SFCOMPUTE:
        assert hold.hold_s == most and hold.reason.code == "block_paid_whole"


@given(providers, seconds, rates, rates, seconds)
def test_more_expected_jobs_never_shorten_the_hold(
    provider: str, restart: float, low: float, high: float, most: float
) -> None:
    low, high = sorted((low, high))
    a = idle_hold(provider, restart_s=restart, arrivals_per_hour=low, max_hold_s=most)
    b = idle_hold(provider, restart_s=restart, arrivals_per_hour=high, max_hold_s=most)
    assert b.hold_s >= a.hold_s


@given(st.sampled_from([PRIME, RUNPOD, AWS]), seconds, rates)
def test_an_hourly_node_is_held_a_whole_number_of_billing_units_or_the_break_even(
    provider: str, restart: float, rate: float
) -> None:
    hold = idle_hold(provider, restart_s=restart, arrivals_per_hour=rate, max_hold_s=10_000)
    unit = billing_unit_s(provider)
    assert unit is not None
    short = math.ceil(MIN_HOLD_S / unit) * unit
    if hold.reason.code == "idle_hold_for_arrivals":
        assert hold.hold_s == min(10_000, max(short, 2 * restart)) and rate > 0 and 3600 / rate <= 2 * restart
    else:
        assert hold.hold_s == short


def test_runpod_bills_per_second_and_sfcompute_sells_blocks() -> None:
    assert (billing_unit_s(RUNPOD), billing_unit_s(PRIME), billing_unit_s(SFCOMPUTE)) == (1.0, 60.0, None)


@given(
    st.sampled_from([PRIME, RUNPOD, AWS, "someone-else"]),
    seconds,
    rates,
    st.sampled_from([1.0, 10.0, 60.0, 600.0]),
)
def test_a_faster_market_clock_shortens_the_billing_unit_not_the_break_even(
    provider: str, restart: float, rate: float, scale: float
) -> None:
    # The seller's billing unit and short hold are its own seconds: at ``scale`` of them per engine second
    # they last 1/scale as long; the restart time and the arrival gap are already the engine's.
    fast = idle_hold(
        provider, restart_s=restart, arrivals_per_hour=rate, max_hold_s=10_000, market_scale=scale
    )
    unit = billing_unit_s(provider)
    assert unit is not None
    short = math.ceil(MIN_HOLD_S / unit) * unit / scale
    if rate > 0 and 3600 / rate <= 2 * restart:
        assert fast.hold_s == min(10_000, max(short, 2 * restart))
    else:
        assert fast.hold_s == short
    assert (
        fast.hold_s
        <= idle_hold(provider, restart_s=restart, arrivals_per_hour=rate, max_hold_s=10_000).hold_s
    )


def test_a_pod_nobody_needs_goes_after_one_engine_second_when_the_market_runs_60x() -> None:
    hold = idle_hold(PRIME, restart_s=3, arrivals_per_hour=0, max_hold_s=1800, market_scale=60)
    assert hold.hold_s == 1 and "60 of its seconds per engine second" in hold.reason.message
