"""Times: the parsers, the one ISO form Scalar writes, exact durations for money (pure: no clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any


def parse_time(value: Any, *, epoch: bool = False) -> datetime | None:
    """An ISO 8601 time (``Z`` or an offset; a naive time is taken as UTC) as an aware UTC datetime.

    A ``datetime`` is taken as it is (naive as UTC); with ``epoch``, a number is epoch seconds. Anything
    else (``None``, ``""``, a boolean, text that is not a time) is ``None``."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    elif epoch and isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    else:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_iso(raw: Any) -> datetime | None:
    """A time Scalar stored itself (``datetime.isoformat()`` text) back as it was; ``None`` if missing.

    Strict: text that is not ISO 8601 raises ``ValueError`` (stored data is never malformed)."""
    return datetime.fromisoformat(raw) if isinstance(raw, str) and raw else None


def iso_z(moment: datetime) -> str:
    """``2026-11-26T20:31:05Z``: an aware time in UTC, ISO 8601 with ``Z`` (fractions kept)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def exact_seconds(delta: timedelta) -> Decimal:
    """A duration in seconds as an exact ``Decimal`` (microseconds kept), for money that accrues by time."""
    return Decimal(delta.days * 86_400 + delta.seconds) + Decimal(delta.microseconds) / Decimal(1_000_000)
