"""Service tiers (seed 001): FAST buys capacity now, FLEX waits for cheap capacity."""

from __future__ import annotations

from enum import StrEnum


class Tier(StrEnum):
    FAST = "FAST"
    FLEX = "FLEX"

    @classmethod
    def parse(cls, value: str) -> Tier:
        """Accept ``fast``/``FAST``; raise ``ValueError`` naming the allowed values otherwise."""
        try:
            return cls(value.upper())
        except (ValueError, AttributeError):
            allowed = ", ".join(t.value for t in cls)
            raise ValueError(f"unknown tier {value!r}; use one of {allowed}") from None
