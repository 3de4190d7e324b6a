"""SFCompute-style orderbooks made from the catalog's reference prices, and matching a buy against them.

Pure functions of (seed, instance type, market hour, reference price): see
``docs/decisions/builtin-market.md`` for the derivation. The market subtracts what was bought from the
generated levels (liquidity stays consumed until the next market hour regenerates the book) and adds the
asks of contracts sold back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from scalar.domain.money import round_cents, usd_text
from scalar.domain.orderbook import BookOrder
from scalar.providers.builtin.draws import rng_for

DURATIONS_HOURS = (1, 24, 168, 720)  # 1 hour, 1 day, 1 week, 1 month
DURATION_WEIGHTS = (1, 3, 4, 2)
DAILY_AMPLITUDE = 0.06
WEEKLY_AMPLITUDE = 0.04
HOURLY_NOISE = 0.02
ASK_LEVELS = (8, 14)
BID_LEVELS = (4, 7)
FIRST_ASK_OFFSET = (-0.08, -0.03)  # the best ask sits 3-8% below the hour's mid price
ASK_STEP = (0.005, 0.03)  # each further level 0.5-3% above the previous
SPREAD = (0.02, 0.06)  # the best bid sits 2-6% below the best ask
BID_STEP = (0.005, 0.03)
ASK_NODES = (1, 10)
BID_NODES = (1, 6)
CENT = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class Level:
    """One ask the market can fill: ``key`` names it (``g<i>`` generated this hour, ``r<id>`` resold)."""

    key: str
    price_per_gpu_hour: Decimal
    quantity_gpus: int
    duration_hours: Decimal

    def as_book_order(self) -> BookOrder:
        return BookOrder(self.price_per_gpu_hour, self.quantity_gpus, self.duration_hours)


@dataclass(frozen=True, slots=True)
class GeneratedBook:
    """The book of one instance type for one market hour, before anything was bought from it."""

    instance_type: str
    hour: int
    mid_price_per_gpu_hour: Decimal
    depth_factor: float
    asks: tuple[Level, ...]
    bids: tuple[BookOrder, ...]


@dataclass(frozen=True, slots=True)
class FillPart:
    level_key: str
    price_per_gpu_hour: Decimal
    quantity_gpus: int


@dataclass(frozen=True, slots=True)
class Match:
    """The outcome of matching a buy: ``parts`` when filled, ``reason`` when refused."""

    parts: tuple[FillPart, ...]
    reason: str | None

    @property
    def filled(self) -> bool:
        return self.reason is None

    @property
    def quantity_gpus(self) -> int:
        return sum(part.quantity_gpus for part in self.parts)

    @property
    def average_price_per_gpu_hour(self) -> Decimal:
        """The volume-weighted price of the parts, exact."""
        total = sum((part.price_per_gpu_hour * part.quantity_gpus for part in self.parts), Decimal(0))
        return total / self.quantity_gpus

    @property
    def worst_price_per_gpu_hour(self) -> Decimal:
        return max(part.price_per_gpu_hour for part in self.parts)


def _price(value: float) -> Decimal:
    return round_cents(Decimal(repr(value)))


def mid_price(seed: int, instance_type: str, hour: int, reference: Decimal) -> tuple[Decimal, float]:
    """The hour's mid price and cycle factor: the reference times a daily and a weekly wave plus noise."""
    phases = rng_for(seed, "phase", instance_type)
    daily_phase = phases.uniform(0.0, 2.0 * math.pi)
    weekly_phase = phases.uniform(0.0, 2.0 * math.pi)
    cycle = (
        1.0
        + DAILY_AMPLITUDE * math.sin(2.0 * math.pi * (hour % 24) / 24.0 + daily_phase)
        + WEEKLY_AMPLITUDE * math.sin(2.0 * math.pi * (hour % 168) / 168.0 + weekly_phase)
    )
    noise = rng_for(seed, "noise", instance_type, hour).uniform(-HOURLY_NOISE, HOURLY_NOISE)
    factor = cycle + noise
    return _price(float(reference) * factor), cycle


def generate_book(seed: int, instance_type: str, hour: int, reference: Decimal) -> GeneratedBook:
    """The asks and bids of ``instance_type`` in market hour ``hour``, around ``reference`` $/GPU-h.

    Prices are in whole cents per GPU-hour and strictly increase up the asks (strictly decrease down the
    bids); quantities are whole 8-GPU nodes. Depth is thinner when the daily/weekly cycle is high.
    """
    mid, cycle = mid_price(seed, instance_type, hour, reference)
    rng = rng_for(seed, "book", instance_type, hour)
    depth = rng.uniform(0.6, 1.4) * max(0.25, 1.0 - 2.5 * (cycle - 1.0))
    asks: list[Level] = []
    offset = rng.uniform(*FIRST_ASK_OFFSET)
    previous = Decimal(0)
    for index in range(rng.randint(*ASK_LEVELS)):
        if index:
            offset += rng.uniform(*ASK_STEP)
        price = max(_price(float(mid) * (1.0 + offset)), previous + CENT, CENT)
        nodes = max(1, round(rng.randint(*ASK_NODES) * depth))
        duration = rng.choices(DURATIONS_HOURS, weights=DURATION_WEIGHTS)[0]
        asks.append(Level(f"g{index}", price, nodes * 8, Decimal(duration)))
        previous = price
    bids: list[BookOrder] = []
    bid = float(asks[0].price_per_gpu_hour) * (1.0 - rng.uniform(*SPREAD))
    ceiling = asks[0].price_per_gpu_hour - CENT
    for index in range(rng.randint(*BID_LEVELS)):
        if index:
            bid *= 1.0 - rng.uniform(*BID_STEP)
        price = min(_price(bid), ceiling)
        if price <= 0:
            break
        nodes = max(1, round(rng.randint(*BID_NODES) * depth))
        duration = rng.choices(DURATIONS_HOURS, weights=DURATION_WEIGHTS)[0]
        bids.append(BookOrder(price, nodes * 8, Decimal(duration)))
        ceiling = price - CENT
    return GeneratedBook(instance_type, hour, mid, depth, tuple(asks), tuple(bids))


def remaining_asks(
    generated: GeneratedBook, filled_by_key: Mapping[str, int], resales: Iterable[Level]
) -> tuple[Level, ...]:
    """The asks still available: generated levels minus fills this hour, plus resold contracts.

    Sorted by price, then generated before resold, then key; empty levels are left out.
    """
    levels = [
        Level(
            level.key,
            level.price_per_gpu_hour,
            level.quantity_gpus - filled_by_key.get(level.key, 0),
            level.duration_hours,
        )
        for level in generated.asks
    ]
    levels.extend(
        Level(
            level.key,
            level.price_per_gpu_hour,
            level.quantity_gpus - filled_by_key.get(level.key, 0),
            level.duration_hours,
        )
        for level in resales
    )
    live = [level for level in levels if level.quantity_gpus > 0]
    return tuple(sorted(live, key=lambda lv: (lv.price_per_gpu_hour, lv.key[0] != "g", len(lv.key), lv.key)))


def match_buy(asks: Sequence[Level], needed_gpus: int, limit_price_per_gpu_hour: Decimal | None) -> Match:
    """Fill ``needed_gpus`` from the cheapest asks up (immediate or cancel: all of it or nothing).

    Refused, with numbers, when the whole book holds fewer GPUs, or when the asks at or below the limit
    price do not cover the need.
    """
    total = sum(level.quantity_gpus for level in asks)
    if total < needed_gpus:
        return Match(
            (),
            f"insufficient liquidity: the book holds {total} GPUs, the order needs {needed_gpus}",
        )
    parts: list[FillPart] = []
    left = needed_gpus
    for level in asks:
        if left <= 0:
            break
        take = min(left, level.quantity_gpus)
        parts.append(FillPart(level.key, level.price_per_gpu_hour, take))
        left -= take
    worst = max(part.price_per_gpu_hour for part in parts)
    if limit_price_per_gpu_hour is not None and worst > limit_price_per_gpu_hour:
        within = sum(
            level.quantity_gpus for level in asks if level.price_per_gpu_hour <= limit_price_per_gpu_hour
        )
        return Match(
            (),
            f"limit price {usd_text(limit_price_per_gpu_hour)}/GPU-h is below the asks needed: {needed_gpus} GPUs fill "
            f"only up to {usd_text(worst)}/GPU-h, and {within} GPUs are offered at or below the limit",
        )
    return Match(tuple(parts), None)
