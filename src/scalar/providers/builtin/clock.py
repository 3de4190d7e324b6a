"""Market time: UTC datetimes outside, integer microseconds since the epoch in the tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scalar.providers.base import ProviderError

US_PER_S = 1_000_000
US_PER_HOUR = 3600 * US_PER_S
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(when: datetime, provider: str = "builtin") -> int:
    """Microseconds since the epoch of an aware datetime (a naive one is refused: its zone is unknown)."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise ProviderError(
            provider, f"time {when.isoformat()} has no time zone; pass an aware UTC datetime", retryable=False
        )
    delta = when - EPOCH
    return (delta.days * 86_400 + delta.seconds) * US_PER_S + delta.microseconds


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def scaled_us(seconds: float, time_scale: float) -> int:
    """A real-world duration in seconds as market microseconds under ``time_scale``."""
    return round(seconds * US_PER_S / time_scale)


def market_hour_us(time_scale: float) -> int:
    """How long one market hour lasts, in microseconds (an hour divided by the time scale)."""
    return max(1, round(US_PER_HOUR / time_scale))


def hour_bucket(at_us: int, time_scale: float) -> int:
    """The market hour ``at_us`` falls in (hours since the epoch, scaled)."""
    return at_us // market_hour_us(time_scale)


def ceil_to(at_us: int, step_us: int) -> int:
    return -(-at_us // step_us) * step_us


def describe_duration(us: int) -> str:
    """``3h12m``, ``45m``, ``12s``."""
    seconds = max(0, round(us / US_PER_S))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
