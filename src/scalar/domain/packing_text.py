"""How packing decisions read as sentences: numbers, durations, GPU index lists."""

from __future__ import annotations

from collections.abc import Sequence


def fmt_num(value: float) -> str:
    """``60.0`` -> ``60``, ``40.5`` -> ``40.5``: quantities without noise."""
    if value == int(value):
        return str(int(value))
    return f"{value:.6g}"


def fmt_duration(seconds: float) -> str:
    """``7500`` -> ``2h05m``, ``300`` -> ``5m``, ``330`` -> ``5m30s``, ``42`` -> ``42s``; negative: ``-5m``."""
    if seconds < 0:
        return "-" + fmt_duration(-seconds)
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m" + (f"{secs:02d}s" if secs else "")
    return f"{secs}s"


def fmt_indices(indices: Sequence[int]) -> str:
    """``[0, 1, 2, 3]`` -> ``0-3``; ``[0, 2, 3]`` -> ``0,2-3``; empty -> ``none``."""
    if not indices:
        return "none"
    parts: list[str] = []
    ordered = sorted(indices)
    start = prev = ordered[0]
    for index in ordered[1:]:
        if index == prev + 1:
            prev = index
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = index
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def plural(count: int, singular: str, many: str | None = None) -> str:
    return singular if count == 1 else (many if many is not None else singular + "s")
