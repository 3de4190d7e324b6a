"""Seed 000's orderbook: which price to bid for ``required_gpus``, and why.

``calculate_optimal_price(asks, required_gpus) -> (price, index)`` is the seed's algorithm, exactly:

1. sort the asks by price per GPU-hour, ascending (stable: equal prices keep their input order);
2. running (cumulative) quantity of GPUs up the book;
3. the minimum viable index is the first level whose cumulative quantity covers ``required_gpus``;
4. score the levels from it to it + 5 (inclusive, bounded by the book)::

       depth     = min(cumulative_quantity / required_gpus, 2.0)
       price     = min_viable_price / level_price
       liquidity = min(level_quantity / required_gpus, 1.5)
       score     = depth * 0.4 + price * 0.4 + liquidity * 0.2

5. the best score wins; of equal scores the first (cheapest) level wins.

The index is a position in the *sorted* asks. When the whole book cannot cover ``required_gpus`` the
answer is the lowest ask at index 0 (the seed's fallback) and ``analyze_orderbook`` says so with
``insufficient_liquidity=True``; an empty book answers ``(None, None)`` with a warning, never mock data.

Money is exact (``Decimal``); the scores are floats computed as the seed computes them, so ties and
near-ties resolve exactly as the seed's Python would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from scalar.domain.errors import InvalidSpecError
from scalar.domain.money import usd
from scalar.domain.orderbook_fill import FillEstimate, estimate_fill
from scalar.domain.reasons import Reason

__all__ = [
    "AskLevel",
    "AskPrice",
    "BookOrder",
    "FillEstimate",
    "LevelScore",
    "OrderbookAnalysis",
    "analyze_orderbook",
    "calculate_optimal_price",
    "optimal_ask",
    "required_gpus_for",
    "score_level",
]

WEIGHT_DEPTH = 0.4
WEIGHT_PRICE = 0.4
WEIGHT_LIQUIDITY = 0.2
DEPTH_CAP = 2.0
LIQUIDITY_CAP = 1.5
LEVELS_BEYOND_MIN_VIABLE = 5


@dataclass(frozen=True, slots=True)
class BookOrder:
    """One order on the book: ``quantity_gpus`` GPUs at ``price_per_gpu_hour`` USD for ``duration_hours``."""

    price_per_gpu_hour: Decimal
    quantity_gpus: int
    duration_hours: Decimal


@dataclass(frozen=True, slots=True)
class AskLevel:
    """An ask in the sorted book: ``index`` is its sorted position, ``input_index`` where it was given."""

    index: int
    input_index: int
    order: BookOrder
    cumulative_quantity: int

    @property
    def price_per_gpu_hour(self) -> Decimal:
        return self.order.price_per_gpu_hour

    @property
    def quantity_gpus(self) -> int:
        return self.order.quantity_gpus

    @property
    def duration_hours(self) -> Decimal:
        return self.order.duration_hours


@dataclass(frozen=True, slots=True)
class LevelScore:
    """The seed's score of one level with its three (unweighted) components."""

    index: int
    price_per_gpu_hour: Decimal
    cumulative_quantity: int
    level_quantity: int
    depth_score: float
    price_score: float
    liquidity_score: float
    score: float

    @property
    def weighted_depth(self) -> float:
        return self.depth_score * WEIGHT_DEPTH

    @property
    def weighted_price(self) -> float:
        return self.price_score * WEIGHT_PRICE

    @property
    def weighted_liquidity(self) -> float:
        return self.liquidity_score * WEIGHT_LIQUIDITY


@dataclass(frozen=True, slots=True)
class OrderbookAnalysis:
    """Everything the seed's GET /orderbook reports, plus why the optimal level won.

    ``asks`` are sorted cheapest first with cumulative quantities; ``bids`` highest price first.
    ``scores`` holds every level evaluated (empty when liquidity is insufficient or there are no asks).
    ``reason`` explains the answer; ``warnings`` lists what a user should know (insufficient liquidity,
    no asks, no bids, crossed book).
    """

    required_gpus: int
    asks: tuple[AskLevel, ...]
    bids: tuple[BookOrder, ...]
    optimal_price_per_gpu_hour: Decimal | None
    optimal_index: int | None
    min_viable_index: int | None
    insufficient_liquidity: bool
    scores: tuple[LevelScore, ...]
    spread_per_gpu_hour: Decimal | None
    total_ask_liquidity: int
    total_bid_liquidity: int
    fill: FillEstimate | None
    reason: Reason
    warnings: tuple[Reason, ...]

    @property
    def best_ask(self) -> Decimal | None:
        return self.asks[0].price_per_gpu_hour if self.asks else None

    @property
    def best_bid(self) -> Decimal | None:
        return self.bids[0].price_per_gpu_hour if self.bids else None

    @property
    def chosen_score(self) -> LevelScore | None:
        for level in self.scores:
            if level.index == self.optimal_index:
                return level
        return None

    @property
    def runner_up(self) -> LevelScore | None:
        """The best-scoring level that was not chosen (first of equals), if any other was scored."""
        return _runner_up(self.scores, self.optimal_index)


def required_gpus_for(node_count: int, gpus_per_node: int) -> int:
    """The seed's ``required_gpus = node_count x gpus_per_node``, both at least 1."""
    _check_positive_int("node_count", node_count)
    _check_positive_int("gpus_per_node", gpus_per_node)
    return node_count * gpus_per_node


def score_level(
    level_price: Decimal,
    cumulative_quantity: int,
    level_quantity: int,
    min_viable_price: Decimal,
    required_gpus: int,
    index: int = 0,
) -> LevelScore:
    """The seed's weighted score of one level, computed in floats as the seed does."""
    depth = min(cumulative_quantity / required_gpus, DEPTH_CAP)
    price = float(min_viable_price) / float(level_price)
    liquidity = min(level_quantity / required_gpus, LIQUIDITY_CAP)
    score = (depth * WEIGHT_DEPTH) + (price * WEIGHT_PRICE) + (liquidity * WEIGHT_LIQUIDITY)
    return LevelScore(
        index=index,
        price_per_gpu_hour=level_price,
        cumulative_quantity=cumulative_quantity,
        level_quantity=level_quantity,
        depth_score=depth,
        price_score=price,
        liquidity_score=liquidity,
        score=score,
    )


def calculate_optimal_price(
    asks: Sequence[BookOrder], required_gpus: int
) -> tuple[Decimal | None, int | None]:
    """The seed's call: ``(optimal price per GPU-hour, index in the sorted asks)``.

    Insufficient liquidity gives ``(lowest ask, 0)``; no asks gives ``(None, None)``. Use
    :func:`analyze_orderbook` for the flag, the scores and the explanation.
    """
    analysis = analyze_orderbook(asks, (), required_gpus)
    return analysis.optimal_price_per_gpu_hour, analysis.optimal_index


def analyze_orderbook(
    asks: Sequence[BookOrder], bids: Sequence[BookOrder], required_gpus: int
) -> OrderbookAnalysis:
    """The optimal price with its scores and reason, spread, liquidity and the fill estimate."""
    _check_positive_int("required_gpus", required_gpus)
    _check_orders("asks", asks)
    _check_orders("bids", bids)

    levels = _sorted_levels(asks)
    sorted_bids = tuple(sorted(bids, key=lambda b: b.price_per_gpu_hour, reverse=True))
    total_asks = levels[-1].cumulative_quantity if levels else 0
    total_bids = sum(b.quantity_gpus for b in sorted_bids)
    spread = (
        levels[0].price_per_gpu_hour - sorted_bids[0].price_per_gpu_hour if levels and sorted_bids else None
    )
    warnings = _book_warnings(levels, sorted_bids, spread)
    fill = estimate_fill(levels, required_gpus)

    facts = _BookFacts(levels, sorted_bids, spread, total_asks, total_bids, fill, warnings)

    if not levels:
        reason = Reason(
            code="no_asks",
            message=(
                f"The book has no asks, so there is no price to bid for {required_gpus} GPUs "
                "(no mock data is substituted)."
            ),
            resource="gpus",
            need=required_gpus,
            have=0,
        )
        return _analysis(facts, required_gpus, None, None, None, True, (), reason)

    min_viable = next((lv.index for lv in levels if lv.cumulative_quantity >= required_gpus), None)
    if min_viable is None:
        lowest = levels[0].price_per_gpu_hour
        reason = Reason(
            code="insufficient_liquidity",
            message=(
                f"The asks hold {total_asks} GPUs in all, fewer than the {required_gpus} needed; "
                f"falling back to the lowest ask {usd(lowest)}/GPU-h at index 0 "
                "(no level was scored)."
            ),
            resource="gpus",
            need=required_gpus,
            have=total_asks,
        )
        return _analysis(facts, required_gpus, lowest, 0, None, True, (), reason)

    min_viable_price = levels[min_viable].price_per_gpu_hour
    end = min(min_viable + LEVELS_BEYOND_MIN_VIABLE + 1, len(levels))
    scores = tuple(
        score_level(
            lv.price_per_gpu_hour,
            lv.cumulative_quantity,
            lv.quantity_gpus,
            min_viable_price,
            required_gpus,
            index=lv.index,
        )
        for lv in levels[min_viable:end]
    )
    best = scores[0]
    for candidate in scores[1:]:
        if candidate.score > best.score:
            best = candidate
    reason = Reason(
        code="optimal_level",
        message=_explain(best, _runner_up(scores, best.index), scores, required_gpus),
        resource="gpus",
        need=required_gpus,
        have=best.cumulative_quantity,
    )
    return _analysis(
        facts, required_gpus, best.price_per_gpu_hour, best.index, min_viable, False, scores, reason
    )


@dataclass(frozen=True, slots=True)
class AskPrice:
    """The ask for selling ``gpus`` GPUs (the algorithm's mirror) and why: ``None`` when the book has no
    bids; ``insufficient_liquidity`` when the bids hold fewer GPUs than offered (the best bid is asked)."""

    price_per_gpu_hour: Decimal | None
    insufficient_liquidity: bool
    chosen: LevelScore | None
    reason: Reason


def optimal_ask(bids: Sequence[BookOrder], gpus: int) -> AskPrice:
    """The seed's algorithm mirrored for a seller: the bids sorted highest first, cumulative quantity down
    the book, the minimum viable index the first bid whose cumulative quantity covers ``gpus``; the levels
    from it to it + 5 are scored as for a buyer (depth, liquidity), the price term being
    ``level_price / min_viable_price`` (a lower bid sells deeper but for less). The best score wins, the
    first (highest) of equals. Asking at the chosen bid sells, in expectation, to every bid at or above it."""
    _check_positive_int("gpus", gpus)
    _check_orders("bids", bids)
    ordered = sorted(bids, key=lambda b: b.price_per_gpu_hour, reverse=True)
    if not ordered:
        why = f"the book has no bids: no price to ask for {gpus} GPUs"
        return AskPrice(None, True, None, Reason("no_bids", why, "gpus", gpus, 0))
    cumulative: list[int] = []
    running = 0
    for order in ordered:
        running += order.quantity_gpus
        cumulative.append(running)
    min_viable = next((i for i, c in enumerate(cumulative) if c >= gpus), None)
    if min_viable is None:
        best = ordered[0].price_per_gpu_hour
        why = (
            f"the bids hold {running} GPUs in all, fewer than the {gpus} offered: asking the best bid "
            f"{usd(best)}/GPU-h"
        )
        return AskPrice(best, True, None, Reason("insufficient_bids", why, "gpus", gpus, running))
    floor = ordered[min_viable].price_per_gpu_hour
    scores: list[LevelScore] = []
    for i in range(min_viable, min(min_viable + LEVELS_BEYOND_MIN_VIABLE + 1, len(ordered))):
        level = ordered[i]
        depth = min(cumulative[i] / gpus, DEPTH_CAP)
        price = float(level.price_per_gpu_hour) / float(floor)
        liquidity = min(level.quantity_gpus / gpus, LIQUIDITY_CAP)
        score = depth * WEIGHT_DEPTH + price * WEIGHT_PRICE + liquidity * WEIGHT_LIQUIDITY
        scores.append(
            LevelScore(
                i,
                level.price_per_gpu_hour,
                cumulative[i],
                level.quantity_gpus,
                depth,
                price,
                liquidity,
                score,
            )
        )
    chosen = scores[0]
    for candidate in scores[1:]:
        if candidate.score > chosen.score:
            chosen = candidate
    why = (
        f"ask {usd(chosen.price_per_gpu_hour)}/GPU-h for {gpus} GPUs: bid level {chosen.index} scores "
        f"{chosen.score:.3f} (depth {chosen.depth_score:.2f}, price {chosen.price_score:.3f}, liquidity "
        f"{chosen.liquidity_score:.2f}); {chosen.cumulative_quantity} GPUs bid at or above it"
    )
    return AskPrice(
        chosen.price_per_gpu_hour,
        False,
        chosen,
        Reason("optimal_ask", why, "gpus", gpus, chosen.cumulative_quantity),
    )


@dataclass(frozen=True, slots=True)
class _BookFacts:
    """What the book says whatever the decision: sorted sides, spread, liquidity, fill, warnings."""

    asks: tuple[AskLevel, ...]
    bids: tuple[BookOrder, ...]
    spread: Decimal | None
    total_asks: int
    total_bids: int
    fill: FillEstimate | None
    warnings: tuple[Reason, ...]


def _analysis(
    facts: _BookFacts,
    required: int,
    price: Decimal | None,
    index: int | None,
    min_viable: int | None,
    insufficient: bool,
    scores: tuple[LevelScore, ...],
    reason: Reason,
) -> OrderbookAnalysis:
    warnings = (reason, *facts.warnings) if insufficient else facts.warnings
    return OrderbookAnalysis(
        required_gpus=required,
        asks=facts.asks,
        bids=facts.bids,
        optimal_price_per_gpu_hour=price,
        optimal_index=index,
        min_viable_index=min_viable,
        insufficient_liquidity=insufficient,
        scores=scores,
        spread_per_gpu_hour=facts.spread,
        total_ask_liquidity=facts.total_asks,
        total_bid_liquidity=facts.total_bids,
        fill=facts.fill,
        reason=reason,
        warnings=warnings,
    )


def _sorted_levels(asks: Sequence[BookOrder]) -> tuple[AskLevel, ...]:
    ordered = sorted(enumerate(asks), key=lambda pair: pair[1].price_per_gpu_hour)
    levels: list[AskLevel] = []
    cumulative = 0
    for position, (input_index, order) in enumerate(ordered):
        cumulative += order.quantity_gpus
        levels.append(AskLevel(position, input_index, order, cumulative))
    return tuple(levels)


def _runner_up(scores: Sequence[LevelScore], chosen_index: int | None) -> LevelScore | None:
    runner: LevelScore | None = None
    for level in scores:
        if level.index == chosen_index:
            continue
        if runner is None or level.score > runner.score:
            runner = level
    return runner


def _explain(
    chosen: LevelScore, runner: LevelScore | None, scores: Sequence[LevelScore], required: int
) -> str:
    head = (
        f"Bid {usd(chosen.price_per_gpu_hour)}/GPU-h (sorted ask {chosen.index}, "
        f"{chosen.cumulative_quantity} GPUs cumulative for {required} needed), score {chosen.score:.3f}"
    )
    viable = scores[0]
    if viable.index == chosen.index:
        tail = f"It is the cheapest level that covers {required} GPUs."
    else:
        tail = (
            f"The cheapest level that covers {required} GPUs, "
            f"{usd(viable.price_per_gpu_hour)}/GPU-h (sorted ask {viable.index}), "
            f"scores {viable.score:.3f}."
        )
    if runner is None:
        return f"{head}: the only level scored, as the book ends there. {tail}"
    versus = f"vs {runner.score:.3f} for {usd(runner.price_per_gpu_hour)}/GPU-h (sorted ask {runner.index})"
    if runner.score == chosen.score:
        return (
            f"{head}, the same score as {usd(runner.price_per_gpu_hour)}/GPU-h "
            f"(sorted ask {runner.index}); the first of equal scores wins. {tail}"
        )
    terms = (
        ("depth", chosen.weighted_depth, runner.weighted_depth),
        ("price", chosen.weighted_price, runner.weighted_price),
        ("level liquidity", chosen.weighted_liquidity, runner.weighted_liquidity),
    )
    wins = [f"{name} {mine:.3f} vs {theirs:.3f}" for name, mine, theirs in terms if mine > theirs]
    losses = [f"{name} {mine:.3f} vs {theirs:.3f}" for name, mine, theirs in terms if mine < theirs]
    equal = [name for name, mine, theirs in terms if mine == theirs]
    why = "ahead (weighted terms) on " + " and ".join(wins)
    if losses:
        why += ", which outweighs being behind on " + " and ".join(losses)
    if equal:
        why += "; equal on " + " and ".join(equal)
    return f"{head} {versus}: {why}. {tail}"


def _book_warnings(
    levels: Sequence[AskLevel],
    bids: Sequence[BookOrder],
    spread: Decimal | None,
) -> tuple[Reason, ...]:
    warnings: list[Reason] = []
    if not bids:
        warnings.append(
            Reason(code="no_bids", message="The book has no bids, so the spread is undefined.", have=0)
        )
    if spread is not None and spread < 0:
        warnings.append(
            Reason(
                code="crossed_book",
                message=(
                    f"The highest bid {usd(bids[0].price_per_gpu_hour)}/GPU-h is above the lowest "
                    f"ask {usd(levels[0].price_per_gpu_hour)}/GPU-h: the book is crossed."
                ),
                need=str(levels[0].price_per_gpu_hour),
                have=str(bids[0].price_per_gpu_hour),
            )
        )
    return tuple(warnings)


def _check_positive_int(field: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpecError(field, f"must be a whole number, got {value!r}")
    if value < 1:
        raise InvalidSpecError(field, f"must be at least 1, got {value}", f"give a positive {field}")


def _check_orders(side: str, orders: Sequence[BookOrder]) -> None:
    for i, order in enumerate(orders):
        price = order.price_per_gpu_hour
        if not isinstance(price, Decimal) or not price.is_finite() or price <= 0:
            raise InvalidSpecError(
                f"{side}[{i}].price_per_gpu_hour",
                f"must be a positive amount of USD per GPU-hour, got {price!r}",
            )
        qty = order.quantity_gpus
        if isinstance(qty, bool) or not isinstance(qty, int) or qty < 0:
            raise InvalidSpecError(
                f"{side}[{i}].quantity_gpus", f"must be a whole number of GPUs >= 0, got {qty!r}"
            )
        duration = order.duration_hours
        if not isinstance(duration, Decimal) or not duration.is_finite() or duration <= 0:
            raise InvalidSpecError(
                f"{side}[{i}].duration_hours", f"must be a positive number of hours, got {duration!r}"
            )
