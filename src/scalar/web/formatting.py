"""Jinja filters: money, prices, ages, durations and times as the dashboard shows them ("-" when missing)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scalar.domain.money import usd_price_signed, usd_signed
from scalar.domain.timefmt import iso_z, parse_time

MISSING = "-"


def number(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing or not a number (booleans are not numbers)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if result == result and abs(result) != float("inf") else None


def usd(value: Any, digits: int = 2) -> str:
    amount = number(value)
    if amount is None:
        return MISSING
    return usd_signed(amount, digits)


def per_gpu_hour(value: Any) -> str:
    """A $/GPU-hour price: 4 significant decimals below $1, else cents."""
    amount = number(value)
    if amount is None:
        return MISSING
    return usd_price_signed(amount)


def quantity(value: Any) -> str:
    amount = number(value)
    if amount is None:
        return MISSING
    return f"{amount:,.0f}" if amount == int(amount) else f"{amount:,.1f}"


def percent(value: Any, digits: int = 0) -> str:
    """A fraction (0.42) as a percentage (42%)."""
    amount = number(value)
    if amount is None:
        return MISSING
    return f"{amount * 100:.{digits}f}%"


def duration(value: Any) -> str:
    """Seconds as ``1h05m``, ``3m20s`` or ``12s``."""
    seconds = number(value)
    if seconds is None:
        return MISSING
    sign = "-" if seconds < 0 else ""
    total = int(abs(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days}d{hours:02d}h"
    if hours:
        return f"{sign}{hours}h{minutes:02d}m"
    if minutes:
        return f"{sign}{minutes}m{secs:02d}s"
    return f"{sign}{secs}s"


def clock(value: Any) -> str:
    """A time as ``HH:MM:SS`` UTC (the date too when it is not today)."""
    parsed = parse_time(value)
    if parsed is None:
        return MISSING
    parsed = parsed.astimezone(UTC)
    if parsed.date() != datetime.now(UTC).date():
        return parsed.strftime("%Y-%m-%d %H:%M:%S")
    return parsed.strftime("%H:%M:%S")


def iso(value: Any) -> str:
    parsed = parse_time(value)
    return iso_z(parsed) if parsed else ""


def seconds_between(start: Any, end: Any) -> float | None:
    first, last = parse_time(start), parse_time(end)
    if first is None or last is None:
        return None
    return (last - first).total_seconds()


def text(value: Any) -> str:
    if value is None or value == "":
        return MISSING
    if isinstance(value, float):
        return quantity(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or MISSING
    return str(value)


FILTERS = {
    "usd": usd,
    "per_gpu_hour": per_gpu_hour,
    "quantity": quantity,
    "percent": percent,
    "duration": duration,
    "clock": clock,
    "iso": iso,
    "text": text,
}
