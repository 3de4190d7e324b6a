"""Exact money. Storage and APIs use ``Decimal``; floats appear only inside scoring formulas."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

CENT = Decimal("0.01")
MICRO = Decimal("0.000001")


def to_decimal(value: float | int | str | Decimal) -> Decimal:
    """Convert a JSON number to ``Decimal`` through its shortest repr, so 24.5 stays 24.5 (not 24.499...)."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool):
        raise TypeError("a boolean is not an amount of money")
    return Decimal(str(value))


def to_json_number(value: Decimal) -> float | int:
    """Render an exact amount as a JSON number (int when whole), as the seeds' response shapes use."""
    if value == value.to_integral_value():
        return int(value)
    return float(value)


def round_cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_EVEN)


def round_micros(value: Decimal) -> Decimal:
    return value.quantize(MICRO, rounding=ROUND_HALF_EVEN)
