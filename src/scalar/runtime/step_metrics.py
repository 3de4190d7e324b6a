"""The metrics a process keeps in memory rather than reads from the database: how long the leader's
steps take (a ``prometheus_client`` histogram, safe across threads) and the requests the rate limits
refused (a counter).

The leader observes each step's wall time (the fenced transaction included); ``GET /metrics`` and
``scalar status`` read a snapshot. A follower observes nothing, so its histogram stays at zero. These
metrics belong to no registry: each API app exposes them through its own (``api/routes_metrics.py``).

Several processes (``scalar up`` with API workers): with ``PROMETHEUS_MULTIPROC_DIR`` set (``scalar up``
makes a fresh directory per start and gives it to its workers) prometheus_client keeps each process's
values in a file there, and any process's ``/metrics`` reads them all (``MultiProcessCollector``): the
controller's step histogram and the sum of every process's counters, whichever worker answers.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client import Counter, Histogram, values

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
RATE_LIMITED = "scalar_rate_limited"  # exposed as scalar_rate_limited_total


def multiprocess_dir() -> str | None:
    """The directory of prometheus_client's multiprocess mode, when this process runs in it."""
    path = os.environ.get(MULTIPROC_ENV, "").strip()
    return path if path and os.path.isdir(path) else None


@contextmanager
def multiprocess_metrics() -> Iterator[str]:
    """Run this process and the children it starts meanwhile in multiprocess mode, over a fresh directory
    (removed at the end, with the mode). prometheus_client chooses where values live when it is imported;
    a process that learns the directory later (``scalar up``) switches here, before it creates any metric:
    create the metrics to share (the control plane) inside the block."""
    previous_env, previous_class = os.environ.get(MULTIPROC_ENV), values.ValueClass
    path = tempfile.mkdtemp(prefix="scalar-metrics-")
    os.environ[MULTIPROC_ENV] = path
    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    try:
        yield path
    finally:
        if previous_env is None:
            os.environ.pop(MULTIPROC_ENV, None)
        else:
            os.environ[MULTIPROC_ENV] = previous_env
        values.ValueClass = previous_class
        shutil.rmtree(path, ignore_errors=True)


_counters_lock = threading.Lock()
_rate_limited: Counter | None = None


def rate_limited_counter() -> Counter:
    """Requests refused with 429, by limit (``token``, ``agent``, ``failure``): one per process, created at
    first use (after ``use_multiprocess``)."""
    global _rate_limited
    with _counters_lock:
        if _rate_limited is None:
            _rate_limited = Counter(
                RATE_LIMITED, "Requests refused by a rate limit (429), by limit.", ["limit"], registry=None
            )
        return _rate_limited


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
