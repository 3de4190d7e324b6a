"""AWS Spot Advisor interruption buckets as probabilities.

The advisor publishes, per region and instance type, a range index ``r`` for the frequency of spot
interruptions over the last month: 0 <5%, 1 5-10%, 2 10-15%, 3 15-20%, 4 >20%. The catalog uses the
bucket's midpoint, and 0.25 for the open-ended >20% bucket (the midpoint of 20-30%, a conservative
reading of "more than 20%"). Offers of other providers, and AWS types the advisor does not list, have
no published rate (``None``).
"""

from __future__ import annotations

from types import MappingProxyType

INTERRUPTION_RATE_BY_RANGE: MappingProxyType[int, float] = MappingProxyType(
    {0: 0.025, 1: 0.075, 2: 0.125, 3: 0.175, 4: 0.25}
)
RANGE_LABELS: MappingProxyType[int, str] = MappingProxyType(
    {0: "<5%", 1: "5-10%", 2: "10-15%", 3: "15-20%", 4: ">20%"}
)


def interruption_rate(range_index: int | None) -> float | None:
    """The monthly interruption probability of a Spot Advisor range index (``None`` if not published)."""
    if range_index is None:
        return None
    return INTERRUPTION_RATE_BY_RANGE.get(range_index)
