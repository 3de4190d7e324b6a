"""``GET /metrics``: the Prometheus text exposition format (version 0.0.4), through ``prometheus_client``.

Every value is read at scrape time from one ``metrics_snapshot()`` by a custom collector registered in
the app's own ``CollectorRegistry`` (never the library's global one), so several apps in one process
do not collide. Every labelled gauge is emitted for every known label value (each job state, node
state, order and action status), so a series drops back to 0 when what it counts is gone instead of
vanishing.

Names and types follow Prometheus' conventions (``promtool check metrics`` passes): monotonic values
are counters ending in ``_total``. The names of the previous release stay for one release as
deprecated aliases (``DEPRECATED`` below, docs/api.md): ``scalar_spend_usd`` and ``scalar_steps``
(gauges) and ``scalar_spend_usd_total``, which keeps its name and value but is now typed a counter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from typing import Protocol, runtime_checkable

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from scalar.api.access import USER
from scalar.api.problems import ProblemRoute
from scalar.runtime.step_metrics import (
    STEP_DURATION,
    HistogramSnapshot,
    multiprocess_dir,
    rate_limited_counter,
)
from scalar.runtime.views_market import MetricsSnapshot

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
_bound: Callable[[float], str] = (
    floatToGoString  # a bucket's ``le``, spelled as the library's own histograms do
)

# Old name -> the metric that replaces it; still emitted for one release (docs/api.md).
DEPRECATED = {
    "scalar_spend_usd": "scalar_spend_accrued_usd_total",
    "scalar_spend_usd_total": "sum(scalar_spend_accrued_usd_total)",
    "scalar_steps": "scalar_steps_total",
}


@runtime_checkable
class MetricsPort(Protocol):
    def metrics_snapshot(self) -> MetricsSnapshot: ...


def _gauge(name: str, help_text: str, value: float | int | Decimal) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=float(value))


def _labelled(
    family: GaugeMetricFamily | CounterMetricFamily, values: Iterable[tuple[str, float | int | Decimal]]
) -> Metric:
    for key, value in values:
        family.add_metric([key], float(value))
    return family


def _histogram(name: str, help_text: str, hist: HistogramSnapshot) -> HistogramMetricFamily:
    buckets = [(_bound(b), float(n)) for b, n in zip(hist.buckets_s, hist.cumulative, strict=True)]
    return HistogramMetricFamily(name, help_text, [*buckets, ("+Inf", float(hist.count))], hist.sum_s)


def snapshot_metrics(snap: MetricsSnapshot, *, step_latency: bool = True) -> Iterator[Metric]:
    """The metric families of one ``metrics_snapshot()``; ``step_latency=False``: without the step
    histogram (in multiprocess mode it comes from every process's files instead)."""
    yield _labelled(
        GaugeMetricFamily("scalar_jobs", "Jobs by state.", labels=["state"]), snap.jobs_by_state.items()
    )
    yield _labelled(
        GaugeMetricFamily("scalar_nodes", "Nodes (slices) by lifecycle state.", labels=["state"]),
        snap.nodes_by_state.items(),
    )
    yield _gauge("scalar_gpus", "GPUs on READY nodes.", snap.gpus_total)
    yield _gauge("scalar_gpus_allocated", "GPUs on READY nodes holding a job.", snap.gpus_allocated)
    yield _gauge("scalar_gpus_idle", "GPUs on READY nodes holding no job.", snap.gpus_idle)
    yield _labelled(
        GaugeMetricFamily("scalar_orders", "Purchases by status.", labels=["status"]),
        snap.orders_by_status.items(),
    )
    yield _labelled(
        GaugeMetricFamily("scalar_actions", "Outbox actions by status.", labels=["status"]),
        snap.actions_by_status.items(),
    )
    yield _gauge("scalar_inbox_pending", "Submissions and cancellations not yet stepped.", snap.inbox_pending)
    spend = sorted(snap.spend_by_provider.items())
    yield _labelled(
        CounterMetricFamily(
            "scalar_spend_accrued_usd", "USD accrued on contracts so far, by provider.", labels=["provider"]
        ),
        spend,
    )
    yield _gauge("scalar_committed_usd", "USD value of every contract bought (full term).", snap.committed)
    yield _gauge(
        "scalar_open_price_per_hour_usd", "USD per hour the open contracts cost.", snap.open_price_per_hour
    )
    yield _gauge("scalar_leader", "1 when this process leads the control plane.", 1 if snap.is_leader else 0)
    yield CounterMetricFamily(
        "scalar_steps",
        "Controller steps in the log this process has stepped or replayed.",
        value=snap.steps,
    )
    if step_latency:
        yield _histogram(
            STEP_DURATION, "Wall time of one leader step (decide and commit).", snap.step_latency
        )
    # Deprecated aliases, removed in the next release.
    yield _labelled(
        GaugeMetricFamily(
            "scalar_spend_usd",
            "Deprecated: use scalar_spend_accrued_usd_total. USD accrued on contracts so far, by provider.",
            labels=["provider"],
        ),
        spend,
    )
    yield CounterMetricFamily(
        "scalar_spend_usd",  # exposed as scalar_spend_usd_total, the name it always had
        "Deprecated: use sum(scalar_spend_accrued_usd_total). USD accrued on contracts so far, every provider.",
        value=float(sum((v for _, v in spend), Decimal(0))),
    )
    yield _gauge(
        "scalar_steps", "Deprecated: use scalar_steps_total. Controller steps in the log.", snap.steps
    )


class SnapshotCollector(Collector):
    """Reads ``metrics_snapshot()`` once per scrape."""

    def __init__(self, port: MetricsPort, *, step_latency: bool = True) -> None:
        self.port = port
        self.step_latency = step_latency

    def collect(self) -> Iterator[Metric]:
        return snapshot_metrics(self.port.metrics_snapshot(), step_latency=self.step_latency)


def metrics_registry(port: MetricsPort) -> CollectorRegistry:
    """The app's registry: the database's numbers (the same on every process) and this process's own
    metrics, or, in multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``), every process's: the leading
    controller's step histogram and the sum of the counters, whichever process is scraped."""
    registry = CollectorRegistry(auto_describe=False)  # this app's own, not prometheus_client.REGISTRY
    path = multiprocess_dir()
    if path is None:
        registry.register(SnapshotCollector(port))
        registry.register(rate_limited_counter())
    else:
        registry.register(SnapshotCollector(port, step_latency=False))
        MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
    return registry


class _Fixed(Collector):
    def __init__(self, snap: MetricsSnapshot) -> None:
        self.snap = snap

    def collect(self) -> Iterator[Metric]:
        return snapshot_metrics(self.snap)


def render_metrics(snap: MetricsSnapshot) -> str:
    """The exposition of one ``metrics_snapshot()``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(snap))
    return generate_latest(registry).decode("utf-8")


def metrics_router(control_plane: MetricsPort) -> APIRouter:
    router = APIRouter(route_class=ProblemRoute, tags=["metrics"], dependencies=[USER])
    registry = metrics_registry(control_plane)

    @router.get(
        "/metrics",
        response_class=PlainTextResponse,
        summary="Prometheus metrics",
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format 0.0.4"}},
    )
    def metrics() -> PlainTextResponse:
        """Jobs by state, nodes by state, GPUs allocated and idle, spend, the leader's steps and step
        latency (a histogram), and requests refused by the rate limits. Gauges list every state, so they
        return to 0. Under ``scalar up`` with API workers, any worker shows every process's metrics."""
        return PlainTextResponse(generate_latest(registry), media_type=CONTENT_TYPE)

    return router
