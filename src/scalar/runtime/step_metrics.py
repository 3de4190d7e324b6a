"""How long the leader's steps take: a ``prometheus_client`` histogram, safe across threads.

The leader observes each step's wall time (the fenced transaction included); ``GET /metrics`` and
``scalar status`` read a snapshot. A follower observes nothing, so its histogram stays at zero. The
histogram belongs to no registry: each API app exposes it through its own (``api/routes_metrics.py``).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from prometheus_client import Histogram

# Seconds; the last bucket (+Inf) is implied.
STEP_BUCKETS_S: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

STEP_DURATION = "scalar_step_duration_seconds"


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    buckets_s: tuple[float, ...]
    cumulative: tuple[int, ...]  # observations <= each bucket's bound, same order as ``buckets_s``
    count: int
    sum_s: float
    max_s: float


class StepLatency:
    """Observations of step durations in seconds, plus the largest one (which a histogram cannot tell)."""

    def __init__(self, buckets_s: tuple[float, ...] = STEP_BUCKETS_S) -> None:
        self._buckets_s = buckets_s
        self._histogram = Histogram(
            STEP_DURATION, "Wall time of one leader step.", buckets=buckets_s, registry=None
        )
        self._max_s = 0.0
        self._lock = threading.Lock()  # a snapshot sees the histogram and the maximum of the same steps

    def observe(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        with self._lock:
            self._histogram.observe(seconds)
            self._max_s = max(self._max_s, seconds)

    def snapshot(self) -> HistogramSnapshot:
        with self._lock:
            samples = [s for metric in self._histogram.collect() for s in metric.samples]
            max_s = self._max_s
        buckets = {
            float(s.labels["le"]): int(s.value) for s in samples if s.name == f"{STEP_DURATION}_bucket"
        }
        (count,) = (int(s.value) for s in samples if s.name == f"{STEP_DURATION}_count")
        (sum_s,) = (float(s.value) for s in samples if s.name == f"{STEP_DURATION}_sum")
        assert buckets[math.inf] == count
        return HistogramSnapshot(
            self._buckets_s, tuple(buckets[float(b)] for b in self._buckets_s), count, sum_s, max_s
        )
