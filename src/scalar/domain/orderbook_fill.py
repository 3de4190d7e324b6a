"""Seed 000's "slippage modeling": what it costs to actually take ``required_gpus`` from the asks.

A buy walks up the book from the cheapest ask, taking each level's GPUs until the need is met (or the
book runs out). The volume-weighted average price (VWAP) of what it takes, against the best ask, is the
slippage: the price of moving through the book instead of buying everything at the top. Exact
``Decimal`` throughout; callers round only when they print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol


class PricedQuantity(Protocol):
    """Anything with a price per GPU-hour and a number of GPUs (an ask)."""

    @property
    def price_per_gpu_hour(self) -> Decimal: ...

    @property
    def quantity_gpus(self) -> int: ...


@dataclass(frozen=True, slots=True)
class FillEstimate:
    """Taking ``required_gpus`` from the asks, cheapest first.

    ``filled_gpus`` is ``min(required_gpus, total ask liquidity)``. ``vwap_per_gpu_hour`` is the average
    price per GPU-hour over the GPUs taken, ``worst_price_per_gpu_hour`` the most expensive ask touched,
    ``cost_per_hour`` what the taken GPUs cost together per hour. Slippage is ``vwap - best ask`` in
    USD per GPU-hour and as a fraction of the best ask.
    """

    required_gpus: int
    filled_gpus: int
    levels_touched: int
    best_price_per_gpu_hour: Decimal
    worst_price_per_gpu_hour: Decimal
    vwap_per_gpu_hour: Decimal
    cost_per_hour: Decimal
    slippage_per_gpu_hour: Decimal
    slippage_fraction: Decimal

    @property
    def complete(self) -> bool:
        """True when the book holds every GPU asked for."""
        return self.filled_gpus >= self.required_gpus

    @property
    def unfilled_gpus(self) -> int:
        return self.required_gpus - self.filled_gpus


def estimate_fill(sorted_asks: Sequence[PricedQuantity], required_gpus: int) -> FillEstimate | None:
    """Walk ``sorted_asks`` (cheapest first) taking up to ``required_gpus``.

    Returns ``None`` when nothing can be taken (no asks, or every ask holds 0 GPUs). The best ask is the
    lowest ask price in the book, the reference the seed's spread also uses.
    """
    if not sorted_asks:
        return None
    best = sorted_asks[0].price_per_gpu_hour
    remaining = required_gpus
    filled = 0
    cost = Decimal(0)
    worst: Decimal | None = None
    touched = 0
    for ask in sorted_asks:
        if remaining <= 0:
            break
        take = min(remaining, ask.quantity_gpus)
        if take <= 0:
            continue
        cost += ask.price_per_gpu_hour * take
        filled += take
        remaining -= take
        worst = ask.price_per_gpu_hour
        touched += 1
    if filled == 0 or worst is None:
        return None
    vwap = cost / filled
    slippage = vwap - best
    return FillEstimate(
        required_gpus=required_gpus,
        filled_gpus=filled,
        levels_touched=touched,
        best_price_per_gpu_hour=best,
        worst_price_per_gpu_hour=worst,
        vwap_per_gpu_hour=vwap,
        cost_per_hour=cost,
        slippage_per_gpu_hour=slippage,
        slippage_fraction=slippage / best,
    )
