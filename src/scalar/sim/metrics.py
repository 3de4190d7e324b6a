"""Protocol A's metrics, discretised exactly as the artifact's analysis scripts do.

After every arriving pod (placed or failed) we record the arrived GPU demand and the allocated GPU milli
(and, around 90% arrived, the fragmentation ratio: fragmented idle GPU milli as % of idle GPU milli). For each integer X in 0..130, the allocation ratio "at X% arrived" is the
mean, over the records whose arrived demand rounds to X% of the cluster's GPUs, of the allocation ratio
(allocated milli / capacity, in %, each rounded to 2 decimals); when no record rounds to X, the records
rounding to X-1..X+1 are used; when there are none either, the value is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

ARRIVED_POINTS = tuple(range(0, 131))
REPORTED_POINTS = (80, 90, 100, 110, 120, 130)
FRAGMENTATION_POINT = 90
# Records whose arrived % rounds into this window get the (costlier) fragmentation ratio computed.
FRAGMENTATION_WINDOW = (FRAGMENTATION_POINT - 1, FRAGMENTATION_POINT + 1)


@dataclass
class Recorder:
    """Per-event samples of one run, preallocated."""

    capacity_milli: int
    size: int

    def __post_init__(self) -> None:
        self.arrived = np.zeros(self.size, dtype=np.int64)
        self.used = np.zeros(self.size, dtype=np.int64)
        self.frag_ratio = np.full(self.size, np.nan, dtype=np.float64)
        self.n = 0

    def record(self, arrived_milli: int, used_milli: int, frag_ratio: float) -> None:
        i = self.n
        self.arrived[i] = arrived_milli
        self.used[i] = used_milli
        self.frag_ratio[i] = frag_ratio
        self.n = i + 1

    def curves(self) -> tuple[dict[int, float | None], float | None]:
        """(allocation ratio at each arrived % in 0..130, fragmentation ratio at 90% arrived)."""
        n = self.n
        pct = self.capacity_milli / 100.0
        arrived = np.round(self.arrived[:n] / pct)
        alloc = np.round(self.used[:n] / pct, 2)
        curve = {x: discretise_at(arrived, alloc, x) for x in ARRIVED_POINTS}
        return curve, discretise_at(arrived, self.frag_ratio[:n], FRAGMENTATION_POINT)


def arrived_bucket(arrived_milli: int, capacity_milli: int) -> float:
    """The arrived % a record counts for (rounded half to even, as the artifact's pandas script does)."""
    return float(round(arrived_milli / (capacity_milli / 100.0)))


def discretise_at(arrived_pct: FloatArray, values: FloatArray, x: int) -> float | None:
    """Mean of ``values`` over the records at ``x``% arrived (else ``x-1..x+1``), 2 decimals; None if none."""
    sel = values[arrived_pct == x]
    if len(sel) == 0:
        sel = values[(arrived_pct >= x - 1) & (arrived_pct <= x + 1)]
    sel = sel[~np.isnan(sel)]
    return round(float(sel.mean()), 2) if len(sel) else None
