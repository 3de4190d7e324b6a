"""Seed 000's orderbook: the price to bid for N GPUs, the seed's worked example and its edge cases."""

from __future__ import annotations

import math
from decimal import Decimal
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.errors import InvalidSpecError
from scalar.domain.money import usd
from scalar.domain.orderbook import (
    LEVELS_BEYOND_MIN_VIABLE,
    BookOrder,
    analyze_orderbook,
    calculate_optimal_price,
    required_gpus_for,
    score_level,
)

WEEK, DAY, MONTH = 168, 24, 720


def order(price: str | int | float | Decimal, qty: int, hours: int = WEEK) -> BookOrder:
    return BookOrder(Decimal(str(price)), qty, Decimal(hours))


# The seed's "Visual Orderbook Representation" (8xH100, 64 GPUs = 8 nodes x 8 GPUs).
SEED_ASKS = [
    order("24.00", 32),
    order("24.50", 64),
    order("25.00", 128),
    order("25.50", 48),
    order("26.00", 96, MONTH),
    order("27.00", 64, MONTH),
]
SEED_BIDS = [order("23.00", 16, DAY), order("22.50", 24), order("22.00", 48), order("21.00", 32, MONTH)]


# ------------------------------------------------------------------------------ the seed's example


def test_seed_worked_example_64_gpus_bids_25_00_at_index_2_with_score_1_492() -> None:
    asks = SEED_ASKS[:4]  # the four asks of the seed's "Example Calculation"

    assert calculate_optimal_price(asks, 64) == (Decimal("25.00"), 2)

    analysis = analyze_orderbook(asks, [], 64)
    assert analysis.min_viable_index == 1
    at_24_50, at_25_00 = analysis.scores[0], analysis.scores[1]
    assert (at_24_50.depth_score, at_24_50.price_score, at_24_50.liquidity_score) == (1.5, 1.0, 1.0)
    assert at_24_50.score == pytest.approx(1.2)
    assert (at_25_00.depth_score, at_25_00.price_score, at_25_00.liquidity_score) == (2.0, 0.98, 1.5)
    assert at_25_00.score == pytest.approx(1.492)
    assert analysis.insufficient_liquidity is False
    assert analysis.reason.code == "optimal_level"
    assert "$25.00/GPU-h" in analysis.reason.message
    assert "1.492" in analysis.reason.message
    assert "$24.50/GPU-h (sorted ask 1), scores 1.200" in analysis.reason.message


def test_seed_visual_book_the_formula_picks_25_00_not_the_tables_24_50() -> None:
    analysis = analyze_orderbook(SEED_ASKS, SEED_BIDS, 64)

    # The seed's ASCII table (and its JSON example) mark $24.50 as optimal; its own formula says $25.00.
    assert analysis.optimal_price_per_gpu_hour == Decimal("25.00")
    assert analysis.optimal_index == 2
    assert analysis.optimal_price_per_gpu_hour != Decimal("24.50")
    assert [lv.cumulative_quantity for lv in analysis.asks] == [32, 96, 224, 272, 368, 432]
    assert analysis.total_ask_liquidity == 432
    assert analysis.total_bid_liquidity == 120
    assert analysis.spread_per_gpu_hour == Decimal("1.00")
    assert [s.index for s in analysis.scores] == [1, 2, 3, 4, 5]
    assert analysis.runner_up is not None and analysis.runner_up.price_per_gpu_hour == Decimal("26.00")
    assert analysis.warnings == ()


def test_seed_visual_book_fill_walks_32_at_24_00_and_32_at_24_50() -> None:
    fill = analyze_orderbook(SEED_ASKS, SEED_BIDS, 64).fill

    assert fill is not None
    assert fill.filled_gpus == 64 and fill.complete
    assert fill.levels_touched == 2
    assert fill.cost_per_hour == Decimal("32") * Decimal("24.00") + Decimal("32") * Decimal("24.50")
    assert fill.vwap_per_gpu_hour == Decimal("24.25")
    assert fill.worst_price_per_gpu_hour == Decimal("24.50")
    assert fill.slippage_per_gpu_hour == Decimal("0.25")
    assert fill.slippage_fraction == Decimal("0.25") / Decimal("24.00")


# ------------------------------------------------------------------------------ the seed's test list


def test_simple_book_with_enough_liquidity_at_the_top_bids_the_best_ask() -> None:
    analysis = analyze_orderbook([order("2.00", 16), order("2.10", 16)], [order("1.90", 8)], 8)

    assert (analysis.optimal_price_per_gpu_hour, analysis.optimal_index) == (Decimal("2.00"), 0)
    assert analysis.scores[0].score == pytest.approx(0.4 * 2.0 + 0.4 * 1.0 + 0.2 * 1.5)
    assert analysis.spread_per_gpu_hour == Decimal("0.10")
    assert analysis.fill is not None
    assert analysis.fill.slippage_per_gpu_hour == 0
    assert analysis.reason.message.endswith("It is the cheapest level that covers 8 GPUs.")


def test_deep_book_for_a_large_order_scores_only_the_window_after_min_viable() -> None:
    # 64 nodes x 8 GPUs = 512 GPUs over ten levels of 64 GPUs from $2.00 in $0.05 steps.
    asks = [order(Decimal("2.00") + Decimal("0.05") * i, 64) for i in range(10)]
    required = required_gpus_for(64, 8)

    analysis = analyze_orderbook(asks, [], required)

    assert analysis.min_viable_index == 7  # 8 x 64 = 512
    assert [s.index for s in analysis.scores] == [7, 8, 9]  # the book ends before min_viable + 5
    # Deeper levels win here: depth grows faster than the price term shrinks.
    assert (analysis.optimal_price_per_gpu_hour, analysis.optimal_index) == (Decimal("2.45"), 9)
    assert analysis.scores[2].score == pytest.approx(0.4 * 1.25 + 0.4 * (2.35 / 2.45) + 0.2 * 0.125)
    fill = analysis.fill
    assert fill is not None
    assert fill.vwap_per_gpu_hour == Decimal("2.175")  # the mean of $2.00..$2.35, 64 GPUs each
    assert fill.worst_price_per_gpu_hour == Decimal("2.35")
    assert fill.slippage_fraction == Decimal("0.0875")


def test_insufficient_liquidity_falls_back_to_the_lowest_ask_at_index_0_and_says_so() -> None:
    asks = [order("3.00", 64), order("2.50", 32)]  # unsorted: the lowest ask is the second given

    assert calculate_optimal_price(asks, 100) == (Decimal("2.50"), 0)
    analysis = analyze_orderbook(asks, [], 100)
    assert analysis.insufficient_liquidity is True
    assert analysis.scores == ()
    assert analysis.min_viable_index is None
    assert analysis.reason.code == "insufficient_liquidity"
    assert (analysis.reason.need, analysis.reason.have) == (100, 96)
    assert analysis.reason in analysis.warnings
    assert analysis.fill is not None
    assert (analysis.fill.filled_gpus, analysis.fill.unfilled_gpus) == (96, 4)
    assert not analysis.fill.complete


def test_empty_book_returns_none_none_with_a_warning_and_no_mock_data() -> None:
    assert calculate_optimal_price([], 8) == (None, None)

    analysis = analyze_orderbook([], [], 8)
    assert analysis.asks == () and analysis.bids == ()
    assert analysis.reason.code == "no_asks"
    assert {w.code for w in analysis.warnings} == {"no_asks", "no_bids"}
    assert analysis.fill is None
    assert analysis.spread_per_gpu_hour is None
    assert analysis.total_ask_liquidity == 0


def test_bids_without_asks_still_count_bid_liquidity_but_have_no_spread() -> None:
    analysis = analyze_orderbook([], [order("1.00", 8), order("1.20", 4)], 8)

    assert analysis.optimal_price_per_gpu_hour is None
    assert analysis.total_bid_liquidity == 12
    assert analysis.best_bid == Decimal("1.20")
    assert analysis.spread_per_gpu_hour is None


def test_complex_book_unsorted_with_equal_prices_keeps_input_order_and_indexes_the_sorted_book() -> None:
    asks = [
        order("3.10", 4),
        order("2.90", 6),
        order("3.00", 10),  # equal price, given first: stays first
        order("2.95", 2),
        order("3.00", 3),
        order("3.50", 40, MONTH),
    ]
    analysis = analyze_orderbook(asks, [order("2.80", 5), order("2.85", 1)], 16)

    assert [lv.input_index for lv in analysis.asks] == [1, 3, 2, 4, 0, 5]
    assert [lv.cumulative_quantity for lv in analysis.asks] == [6, 8, 18, 21, 25, 65]
    assert analysis.min_viable_index == 2
    assert (analysis.optimal_price_per_gpu_hour, analysis.optimal_index) == (Decimal("3.50"), 5)
    assert analysis.asks[5].quantity_gpus == 40
    assert [b.price_per_gpu_hour for b in analysis.bids] == [Decimal("2.85"), Decimal("2.80")]
    assert analysis.spread_per_gpu_hour == Decimal("0.05")


def test_a_tie_is_broken_to_the_first_level() -> None:
    # Levels 1 and 2 have identical terms: depth capped at 2.0, price 4/5, liquidity capped at 1.5.
    asks = [order("4.00", 10), order("5.00", 20), order("5.00", 20)]
    analysis = analyze_orderbook(asks, [], 10)

    assert analysis.scores[1].score == analysis.scores[2].score
    assert analysis.scores[1].score > analysis.scores[0].score
    assert analysis.optimal_index == 1
    assert analysis.runner_up is not None and analysis.runner_up.index == 2
    assert "first of equal scores wins" in analysis.reason.message


def test_single_large_order_that_is_also_the_cheapest_covering_level_wins() -> None:
    analysis = analyze_orderbook([order("2.00", 8), order("2.10", 512), order("2.20", 16)], [], 64)

    assert (analysis.optimal_price_per_gpu_hour, analysis.optimal_index) == (Decimal("2.10"), 1)
    assert [s.index for s in analysis.scores] == [1, 2]  # still evaluates more than one level


def test_single_large_order_just_above_an_exact_fit_is_worth_the_higher_price() -> None:
    # The seed: "May recommend a slightly higher price if it offers better depth/liquidity scores".
    analysis = analyze_orderbook([order("2.00", 64), order("2.05", 512)], [], 64)

    assert analysis.min_viable_index == 0
    assert (analysis.optimal_price_per_gpu_hour, analysis.optimal_index) == (Decimal("2.05"), 1)
    assert "behind on price" in analysis.reason.message


def test_a_better_scoring_level_beyond_min_viable_plus_5_is_never_chosen() -> None:
    # Level 6 (same price, 100 GPUs) would score 1.5, above everything in the window, but it is outside.
    asks = [order("10.00", 10)] + [order("10.00", 1) for _ in range(5)] + [order("10.00", 100)]
    analysis = analyze_orderbook(asks, [], 10)

    assert analysis.min_viable_index == 0
    assert [s.index for s in analysis.scores] == [0, 1, 2, 3, 4, 5]
    outside = score_level(Decimal("10.00"), 115, 100, Decimal("10.00"), 10)
    assert outside.score > max(s.score for s in analysis.scores)
    assert analysis.optimal_index == 5


def test_money_is_exact_decimal_not_float() -> None:
    analysis = analyze_orderbook([order("0.10", 1), order("0.20", 1)], [], 2)

    assert analysis.fill is not None
    assert analysis.fill.cost_per_hour == Decimal("0.30")
    assert analysis.fill.vwap_per_gpu_hour == Decimal("0.15")


def test_a_crossed_book_is_flagged() -> None:
    analysis = analyze_orderbook([order("2.00", 8)], [order("2.10", 8)], 8)

    assert analysis.spread_per_gpu_hour == Decimal("-0.10")
    assert [w.code for w in analysis.warnings] == ["crossed_book"]


def test_zero_quantity_asks_add_no_liquidity() -> None:
    analysis = analyze_orderbook([order("1.00", 0), order("1.50", 8)], [], 8)

    assert analysis.min_viable_index == 1
    assert analysis.fill is not None and analysis.fill.levels_touched == 1
    assert analysis.fill.vwap_per_gpu_hour == Decimal("1.50")


# ------------------------------------------------------------------------------ invalid input


@pytest.mark.parametrize("required", [0, -8])
def test_required_gpus_must_be_positive(required: int) -> None:
    with pytest.raises(InvalidSpecError) as err:
        calculate_optimal_price(SEED_ASKS, required)
    assert err.value.field == "required_gpus"


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (BookOrder(Decimal("0"), 1, Decimal(1)), "asks[1].price_per_gpu_hour"),
        (BookOrder(Decimal("-1"), 1, Decimal(1)), "asks[1].price_per_gpu_hour"),
        (BookOrder(Decimal("NaN"), 1, Decimal(1)), "asks[1].price_per_gpu_hour"),
        (BookOrder(Decimal("1"), -1, Decimal(1)), "asks[1].quantity_gpus"),
        (BookOrder(Decimal("1"), 1, Decimal(0)), "asks[1].duration_hours"),
    ],
)
def test_invalid_orders_name_the_field(bad: BookOrder, field: str) -> None:
    with pytest.raises(InvalidSpecError) as err:
        analyze_orderbook([order("1.00", 1), bad], [], 1)
    assert err.value.field == field


def test_required_gpus_for_nodes() -> None:
    assert required_gpus_for(8, 8) == 64
    with pytest.raises(InvalidSpecError) as err:
        required_gpus_for(0, 8)
    assert err.value.field == "node_count"


def test_format_usd() -> None:
    assert usd(Decimal("24.5")) == "$24.50"
    assert usd(Decimal("2.315")) == "$2.315"
    assert usd(Decimal("1552")) == "$1,552.00"


# ------------------------------------------------------------------------------ properties

prices = st.integers(min_value=1, max_value=5000).map(lambda cents: Decimal(cents) / 100)
orders = st.builds(
    BookOrder,
    price_per_gpu_hour=prices,
    quantity_gpus=st.integers(min_value=0, max_value=300),
    duration_hours=st.sampled_from([Decimal(DAY), Decimal(WEEK), Decimal(MONTH)]),
)
books = st.lists(orders, max_size=25)
required = st.integers(min_value=1, max_value=2000)


def seed_reference(asks: list[dict[str, float]], required_gpus: int) -> tuple[float | None, int | None]:
    """The seed's algorithm written out plainly over floats, as its Python would run it."""
    if not asks:
        return None, None
    ordered = sorted(asks, key=lambda a: a["price"])
    cumulative, running = [], 0.0
    for a in ordered:
        running += a["quantity_gpus"]
        cumulative.append(running)
    min_viable = next((i for i, c in enumerate(cumulative) if c >= required_gpus), None)
    if min_viable is None:
        return ordered[0]["price"], 0
    best_score, best_idx = -math.inf, min_viable
    for i in range(min_viable, min(min_viable + 6, len(ordered))):
        depth = min(cumulative[i] / required_gpus, 2.0)
        price = ordered[min_viable]["price"] / ordered[i]["price"]
        liquidity = min(ordered[i]["quantity_gpus"] / required_gpus, 1.5)
        score = (depth * 0.4) + (price * 0.4) + (liquidity * 0.2)
        if score > best_score:
            best_score, best_idx = score, i
    return ordered[best_idx]["price"], best_idx


@given(books, required)
def test_matches_the_seed_algorithm_run_on_floats(asks: list[BookOrder], need: int) -> None:
    as_floats = [{"price": float(a.price_per_gpu_hour), "quantity_gpus": a.quantity_gpus} for a in asks]
    price, index = calculate_optimal_price(asks, need)
    ref_price, ref_index = seed_reference(as_floats, need)

    assert index == ref_index
    assert (None if price is None else float(price)) == ref_price


@given(books, required)
def test_the_optimal_price_is_an_ask_inside_the_scored_window(asks: list[BookOrder], need: int) -> None:
    analysis = analyze_orderbook(asks, [], need)
    if not asks:
        assert (analysis.optimal_price_per_gpu_hour, analysis.optimal_index) == (None, None)
        return
    assert analysis.optimal_index is not None
    chosen = analysis.asks[analysis.optimal_index]
    assert chosen.price_per_gpu_hour == analysis.optimal_price_per_gpu_hour
    assert analysis.optimal_price_per_gpu_hour in {a.price_per_gpu_hour for a in asks}
    if analysis.insufficient_liquidity:
        assert analysis.total_ask_liquidity < need
        assert analysis.optimal_index == 0
        return
    low = analysis.min_viable_index
    assert low is not None
    assert low <= analysis.optimal_index <= low + LEVELS_BEYOND_MIN_VIABLE
    assert analysis.asks[low].cumulative_quantity >= need
    assert low == 0 or analysis.asks[low - 1].cumulative_quantity < need
    assert all(s.score <= analysis.scores[analysis.optimal_index - low].score for s in analysis.scores)


@given(books)
def test_sorted_asks_and_cumulative_quantities(asks: list[BookOrder]) -> None:
    analysis = analyze_orderbook(asks, [], 1)
    sorted_prices = [lv.price_per_gpu_hour for lv in analysis.asks]
    cumulative = [lv.cumulative_quantity for lv in analysis.asks]

    assert sorted_prices == sorted(a.price_per_gpu_hour for a in asks)
    assert [lv.index for lv in analysis.asks] == list(range(len(asks)))
    assert sorted(lv.input_index for lv in analysis.asks) == list(range(len(asks)))
    assert all(a <= b for a, b in pairwise(cumulative))
    assert (cumulative[-1] if cumulative else 0) == analysis.total_ask_liquidity
    assert analysis.total_ask_liquidity == sum(a.quantity_gpus for a in asks)


@given(books, required)
def test_the_fill_vwap_lies_between_the_best_ask_and_the_worst_touched(
    asks: list[BookOrder], need: int
) -> None:
    analysis = analyze_orderbook(asks, [], need)
    fill = analysis.fill
    if fill is None:
        assert analysis.total_ask_liquidity == 0
        return
    assert fill.filled_gpus == min(need, analysis.total_ask_liquidity)
    assert analysis.best_ask is not None
    assert analysis.best_ask <= fill.vwap_per_gpu_hour <= fill.worst_price_per_gpu_hour
    assert fill.slippage_per_gpu_hour == fill.vwap_per_gpu_hour - analysis.best_ask
    assert fill.slippage_fraction >= 0
    remaining, cost = need, Decimal(0)
    for a in sorted(asks, key=lambda o: o.price_per_gpu_hour):
        take = min(remaining, a.quantity_gpus)
        cost, remaining = cost + take * a.price_per_gpu_hour, remaining - take
    assert fill.cost_per_hour == cost


@given(st.data(), st.lists(orders, max_size=20, unique_by=lambda o: o.price_per_gpu_hour), required)
def test_with_distinct_prices_input_order_does_not_matter(
    data: st.DataObject, asks: list[BookOrder], need: int
) -> None:
    shuffled = data.draw(st.permutations(asks))

    assert calculate_optimal_price(shuffled, need) == calculate_optimal_price(asks, need)
