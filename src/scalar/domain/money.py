"""Exact money, and every way Scalar writes an amount of US dollars as text.

Storage and APIs use ``Decimal``; floats appear only inside scoring formulas and in what the CLI and the
dashboard read back from JSON. Each text format that exists has one named function here, so a message, a
table and a chart that show the same kind of amount show it the same way:

=====================  ==========================  ============================================================
function               example                     used for
=====================  ==========================  ============================================================
``usd``                ``$24.50``, ``$2.315``      exact prices in decisions' reasons (cents at least)
``usd_cents``          ``$1,234.50``               budget limits and commitments (rounded to cents)
``usd_cents_plain``    ``$1234.50``                amounts in planners' reasons (rounded to cents, ungrouped)
``usd_exact``          ``$13``, ``$12.6935``       exact prices without trailing zeros
``usd_text``           ``$2.50``, ``$60``          an amount as its own text (a decimal's stored digits)
``usd_fixed``          ``$1,234.57``, ``$1,235``   tables and reports with a fixed number of places
``usd_fixed_plain``    ``$1234.5700``              prices in reasons with a fixed number of places (ungrouped)
``usd_signed``         ``-$1,234.56``              the dashboard (sign before the dollar sign)
``usd_price_signed``   ``$0.4035``, ``-$2.50``     dashboard $/GPU-h prices (4 places below $1)
``usd_price``          ``$0.4444``, ``$2.50``      CLI price tables (4 places below $1)
``usd_trimmed``        ``$2.30``, ``$2.1875``      order-book prices (2 to 4 places)
``usd_axis``           ``$12.50``, ``$1,250``      chart axis ticks (whole dollars from $1,000)
``micros_text``        ``12.345678``               money fields of API responses (exact text, 6 places)
``cents_text``         ``12.35``                   budget figures in API responses and reasons (2 places)
=====================  ==========================  ============================================================
"""

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


# Exact amounts (Decimal in).


def usd(amount: Decimal) -> str:
    """``$24.50``; more decimals only when the amount has them (``$2.315``); thousands grouped."""
    cents = amount.quantize(CENT)
    if cents == amount:
        return f"${cents:,.2f}"
    return f"${amount.normalize():,f}"


def usd_cents(amount: Decimal) -> str:
    """``$1,234.50``: rounded half-even to cents, thousands grouped."""
    return f"${round_cents(amount):,.2f}"


def usd_cents_plain(amount: Decimal) -> str:
    """``$1234.50``: rounded half-even to cents, the decimal's own text (no grouping)."""
    return f"${round_cents(amount)}"


def usd_exact(amount: Decimal) -> str:
    """``Decimal("13.0")`` -> ``$13``, ``Decimal("12.6935")`` -> ``$12.6935``: exact, without noise."""
    return f"${amount.normalize():f}"


def usd_text(amount: Decimal | float | str) -> str:
    """``Decimal("2.50")`` -> ``$2.50``: the amount's own text (``str``), digits exactly as stored or given."""
    return f"${amount}"


def micros_text(amount: Decimal) -> str:
    """``12.345678``: an amount as exact text to the micro-dollar (half-even), as API responses carry it."""
    return str(round_micros(amount))


def cents_text(amount: Decimal) -> str:
    """``12.35``: an amount as exact text to the cent (half-even), as budget figures carry it."""
    return str(round_cents(amount))


# Amounts read back from JSON (float or Decimal in, formatted as given).


def usd_fixed(amount: Decimal | float, places: int = 2) -> str:
    """``$1,234.57`` (``places`` decimals, thousands grouped; a negative amount reads ``$-3.00``)."""
    return f"${amount:,.{places}f}"


def usd_fixed_plain(amount: Decimal | float, places: int = 2) -> str:
    """``$1234.5700`` (``places`` decimals, no grouping; a negative amount reads ``$-3.00``)."""
    return f"${amount:.{places}f}"


def usd_signed(amount: float, places: int = 2) -> str:
    """``-$1,234.56``: the sign before the dollar sign, thousands grouped."""
    sign = "-" if amount < 0 else ""
    return f"{sign}${abs(amount):,.{places}f}"


def usd_price_signed(amount: float) -> str:
    """A $/GPU-hour price as the dashboard shows it: 4 decimals below $1 (either sign), else cents."""
    return usd_signed(amount, 4 if abs(amount) < 1 else 2)


def usd_price(amount: float) -> str:
    """A price as the CLI's tables show it: cents from $1 up, 4 decimals below (spot GPUs can cost $0.4444/h)."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def usd_trimmed(amount: float | Decimal) -> str:
    """``2.3`` -> ``$2.30``, ``2.1875`` -> ``$2.1875``: 4 decimals with trailing zeros dropped down to 2."""
    text = f"{float(amount):,.4f}"
    while text.endswith("0") and len(text.split(".")[1]) > 2:
        text = text[:-1]
    return f"${text}"


def usd_axis(amount: float) -> str:
    """A chart tick: ``$12.50`` below $1,000 (either sign), whole dollars from there (``$1,250``)."""
    return f"${amount:,.2f}" if abs(amount) < 1000 else f"${amount:,.0f}"
