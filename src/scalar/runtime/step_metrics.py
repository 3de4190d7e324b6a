"""How long the leader's steps take: a cumulative histogram (Prometheus buckets), safe across threads.

The leader observes each step's wall time (the fenced transaction included); ``GET /metrics`` reads a
snapshot. A follower observes nothing, so its histogram stays at zero.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

# Seconds; the last bucket (+Inf) is implied.
STEP_BUCKETS_S: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    buckets_s: tuple[float, ...]
    cumulative: tuple[int, ...]  # observations <= each bucket's bound, same order as ``buckets_s``
    count: int
    sum_s: float
    max_s: float


class StepLatency:
    """Observations of step durations in seconds."""

    def __init__(self, buckets_s: tuple[float, ...] = STEP_BUCKETS_S) -> None:
        self._buckets_s = buckets_s
        self._counts = [0] * len(buckets_s)
        self._count = 0
        self._sum_s = 0.0
        self._max_s = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        with self._lock:
            self._count += 1
            self._sum_s += seconds
            self._max_s = max(self._max_s, seconds)
            for i, bound in enumerate(self._buckets_s):
                if seconds <= bound:
                    self._counts[i] += 1
                    break

    def snapshot(self) -> HistogramSnapshot:
        with self._lock:
            running = 0
            cumulative = []
            for n in self._counts:
                running += n
                cumulative.append(running)
            return HistogramSnapshot(
                self._buckets_s, tuple(cumulative), self._count, self._sum_s, self._max_s
            )
