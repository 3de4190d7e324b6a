"""The built-in market's pure parts: book generation, matching, node plans (no database)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.market import NodeState
from scalar.domain.orderbook import BookOrder
from scalar.providers.builtin.books import (
    DURATIONS_HOURS,
    GeneratedBook,
    Level,
    generate_book,
    match_buy,
    remaining_asks,
)
from scalar.providers.builtin.clock import US_PER_HOUR, US_PER_S
from scalar.providers.builtin.config import BOOT_PROFILES, POD_BOOT
from scalar.providers.builtin.timeline import Move, NodePlan, due_moves, next_move_us, plan_node

REFERENCE = Decimal("2.37")
HOUR_2025 = 484_000  # hours since the epoch, mid-2025


def _level(key: str, price: str, gpus: int) -> Level:
    return Level(key, Decimal(price), gpus, Decimal(168))


@given(seed=st.integers(0, 2**32), hour=st.integers(HOUR_2025, HOUR_2025 + 24 * 365))
def test_generated_books_are_well_formed_and_around_the_reference(seed: int, hour: int) -> None:
    book = generate_book(seed, "8xH100", hour, REFERENCE)
    asks = [level.price_per_gpu_hour for level in book.asks]
    bids = [order.price_per_gpu_hour for order in book.bids]
    assert 8 <= len(asks) <= 14 and 1 <= len(bids) <= 7
    assert asks == sorted(set(asks)) and bids == sorted(set(bids), reverse=True)
    assert bids[0] < asks[0]
    assert all(p == p.quantize(Decimal("0.01")) and p > 0 for p in asks + bids)
    assert REFERENCE * Decimal("0.8") <= asks[0] <= REFERENCE * Decimal("1.1")
    assert asks[-1] <= REFERENCE * Decimal("1.7")
    orders: list[Level | BookOrder] = [*book.asks, *book.bids]
    assert all(o.quantity_gpus > 0 and o.quantity_gpus % 8 == 0 for o in orders)
    assert all(int(o.duration_hours) in DURATIONS_HOURS for o in orders)


def test_the_same_seed_and_hour_give_the_same_book_and_hours_differ() -> None:
    one = generate_book(5, "8xH100", HOUR_2025, REFERENCE)
    assert one == generate_book(5, "8xH100", HOUR_2025, REFERENCE)
    assert one != generate_book(5, "8xH100", HOUR_2025 + 1, REFERENCE)
    assert one != generate_book(6, "8xH100", HOUR_2025, REFERENCE)
    assert isinstance(one, GeneratedBook) and one.hour == HOUR_2025


def test_remaining_asks_subtract_fills_and_add_resales_in_price_order() -> None:
    book = GeneratedBook(
        "8xH100",
        1,
        Decimal("2.40"),
        1.0,
        (_level("g0", "2.30", 16), _level("g1", "2.40", 32), _level("g2", "2.50", 8)),
        (),
    )
    asks = remaining_asks(
        book, {"g0": 16, "g1": 8, "r3": 8}, [_level("r3", "2.40", 24), _level("r4", "2.35", 8)]
    )
    assert [(a.key, a.price_per_gpu_hour, a.quantity_gpus) for a in asks] == [
        ("r4", Decimal("2.35"), 8),
        ("g1", Decimal("2.40"), 24),
        ("r3", Decimal("2.40"), 16),
        ("g2", Decimal("2.50"), 8),
    ]


def test_matching_walks_up_the_book_and_pays_each_level_its_price() -> None:
    asks = (_level("g0", "2.00", 16), _level("g1", "2.10", 32), _level("g2", "2.50", 64))
    match = match_buy(asks, 32, Decimal("2.10"))
    assert match.filled
    assert [(p.level_key, p.quantity_gpus) for p in match.parts] == [("g0", 16), ("g1", 16)]
    assert match.average_price_per_gpu_hour == Decimal("2.05")
    assert match.worst_price_per_gpu_hour == Decimal("2.10")
    assert match_buy(asks, 32, None).filled  # a market order takes what it needs


def test_matching_refuses_with_the_limit_and_the_price_needed() -> None:
    asks = (_level("g0", "2.00", 16), _level("g1", "2.10", 32))
    refused = match_buy(asks, 24, Decimal("2.05"))
    assert not refused.filled and refused.parts == ()
    assert refused.reason == (
        "limit price $2.05/GPU-h is below the asks needed: 24 GPUs fill only up to $2.10/GPU-h, "
        "and 16 GPUs are offered at or below the limit"
    )
    short = match_buy(asks, 56, None)
    assert short.reason == "insufficient liquidity: the book holds 48 GPUs, the order needs 56"


def _plan(**kw: object) -> NodePlan:
    values: dict[str, object] = {
        "booting_us": 10,
        "initializing_us": 20,
        "ready_us": 30,
        "fail_cause": None,
        "preempt_us": None,
        "end_us": 100,
    }
    values.update(kw)
    return NodePlan(**values)  # type: ignore[arg-type]


def test_due_moves_follow_the_boot_order_up_to_the_time_asked() -> None:
    plan = _plan()
    assert due_moves(NodeState.REQUESTING, plan, 5) == ()
    assert due_moves(NodeState.REQUESTING, plan, 20) == (
        Move(NodeState.BOOTING, 10),
        Move(NodeState.INITIALIZING, 20),
    )
    assert due_moves(NodeState.INITIALIZING, plan, 99) == (Move(NodeState.READY, 30),)
    assert due_moves(NodeState.READY, plan, 100) == (Move(NodeState.TERMINATED, 100, "contract_ended"),)
    assert due_moves(NodeState.TERMINATED, plan, 1000) == ()
    assert next_move_us(NodeState.REQUESTING, plan) == 10 and next_move_us(NodeState.READY, plan) == 100


def test_a_node_that_stops_while_booting_never_becomes_ready() -> None:
    plan = _plan(preempt_us=25)
    assert due_moves(NodeState.REQUESTING, plan, 1000) == (
        Move(NodeState.BOOTING, 10),
        Move(NodeState.INITIALIZING, 20),
        Move(NodeState.TERMINATED, 25, "preempted"),
    )
    assert next_move_us(NodeState.INITIALIZING, plan) == 25
    failing = _plan(fail_cause="injected", end_us=30)  # the contract ends the moment it would fail
    assert due_moves(NodeState.INITIALIZING, failing, 1000) == (
        Move(NodeState.TERMINATED, 30, "contract_ended"),
    )


def test_a_failing_boot_ends_in_failed_and_nothing_after() -> None:
    plan = _plan(fail_cause="injected")
    assert due_moves(NodeState.BOOTING, plan, 1000) == (
        Move(NodeState.INITIALIZING, 20),
        Move(NodeState.FAILED, 30, "boot_failed"),
    )


def test_node_plans_draw_each_stage_from_its_range_and_scale_with_time() -> None:
    def plan(node_id: str, scale: float) -> NodePlan:
        return plan_node(
            seed=3,
            node_id=node_id,
            start_us=0,
            end_us=10 * US_PER_HOUR,
            profile=POD_BOOT,
            time_scale=scale,
            boot_failure_rate=0.0,
            forced_failure=False,
            monthly_interruption_rate=None,
        )

    for index in range(50):
        real = plan(f"n{index}", 1.0)
        (b_lo, b_hi), (i_lo, i_hi), (r_lo, r_hi) = POD_BOOT
        assert b_lo * US_PER_S <= real.booting_us <= b_hi * US_PER_S
        assert i_lo * US_PER_S <= real.initializing_us - real.booting_us <= i_hi * US_PER_S
        assert r_lo * US_PER_S <= real.ready_us - real.initializing_us <= r_hi * US_PER_S
        fast = plan(f"n{index}", 10.0)
        assert abs(fast.ready_us - real.ready_us / 10) <= 2
        assert real.preempt_us is None and real.fail_cause is None
    assert plan("n1", 1.0) == plan("n1", 1.0) and plan("n1", 1.0) != plan("n2", 1.0)
    assert set(BOOT_PROFILES) == {"sfcompute", "aws", "azure", "gcp", "prime", "runpod"}
