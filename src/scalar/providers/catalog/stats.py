"""Exact medians over prices."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

TWO = Decimal(2)


def median(values: Iterable[Decimal]) -> Decimal:
    """The median of exact amounts (the mean of the two middle values for an even count)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of no values")
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / TWO
