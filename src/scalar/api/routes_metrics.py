"""``GET /metrics``: Prometheus text exposition format (version 0.0.4), written by hand.

Every gauge is emitted for every known label value (each job state, node state, order and action
status), so a series drops back to 0 when what it counts is gone instead of vanishing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any, Protocol, runtime_checkable

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from scalar.api.access import USER
from scalar.api.problems import ProblemRoute

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@runtime_checkable
class MetricsPort(Protocol):
    def metrics_snapshot(self) -> dict[str, Any]: ...


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float | int | Decimal) -> str:
    if isinstance(value, Decimal):
        value = float(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return repr(value)
    return str(value)


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


class Exposition:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines.append(f"# HELP {name} {_escape(help_text)}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(
        self, name: str, value: float | int | Decimal, labels: Mapping[str, str] | None = None
    ) -> None:
        self.lines.append(f"{name}{_labels(labels or {})} {_number(value)}")

    def gauge(self, name: str, help_text: str, value: float | int | Decimal) -> None:
        self.family(name, "gauge", help_text)
        self.sample(name, value)

    def labelled(
        self, name: str, help_text: str, label: str, values: Iterable[tuple[str, float | int | Decimal]]
    ) -> None:
        self.family(name, "gauge", help_text)
        for key, value in values:
            self.sample(name, value, {label: key})

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render_metrics(snap: Mapping[str, Any]) -> str:
    """The exposition of one ``metrics_snapshot()``."""
    out = Exposition()
    out.labelled("scalar_jobs", "Jobs by state.", "state", snap["jobs_by_state"].items())
    out.labelled(
        "scalar_nodes", "Nodes (slices) by lifecycle state.", "state", snap["nodes_by_state"].items()
    )
    out.gauge("scalar_gpus", "GPUs on READY nodes.", snap["gpus_total"])
    out.gauge("scalar_gpus_allocated", "GPUs on READY nodes holding a job.", snap["gpus_allocated"])
    out.gauge("scalar_gpus_idle", "GPUs on READY nodes holding no job.", snap["gpus_idle"])
    out.labelled("scalar_orders", "Purchases by status.", "status", snap["orders_by_status"].items())
    out.labelled("scalar_actions", "Outbox actions by status.", "status", snap["actions_by_status"].items())
    out.gauge("scalar_inbox_pending", "Submissions and cancellations not yet stepped.", snap["inbox_pending"])
    out.family("scalar_spend_usd", "gauge", "USD accrued on contracts so far, by provider.")
    for provider, value in sorted(snap["spend_by_provider"].items()):
        out.sample("scalar_spend_usd", value, {"provider": provider})
    total = sum(snap["spend_by_provider"].values(), Decimal(0))
    out.gauge("scalar_spend_usd_total", "USD accrued on contracts so far, every provider.", total)
    out.gauge("scalar_committed_usd", "USD value of every contract bought (full term).", snap["committed"])
    out.gauge(
        "scalar_open_price_per_hour_usd", "USD per hour the open contracts cost.", snap["open_price_per_hour"]
    )
    out.gauge("scalar_leader", "1 when this process leads the control plane.", 1 if snap["is_leader"] else 0)
    out.gauge("scalar_steps", "Controller steps since this process started leading.", snap["steps"])
    hist = snap["step_latency"]
    name = "scalar_step_duration_seconds"
    out.family(name, "histogram", "Wall time of one leader step (decide and commit).")
    for bound, count in zip(hist.buckets_s, hist.cumulative, strict=True):
        out.sample(f"{name}_bucket", count, {"le": _number(float(bound))})
    out.sample(f"{name}_bucket", hist.count, {"le": "+Inf"})
    out.sample(f"{name}_sum", hist.sum_s)
    out.sample(f"{name}_count", hist.count)
    return out.text()


def metrics_router(control_plane: MetricsPort) -> APIRouter:
    router = APIRouter(route_class=ProblemRoute, tags=["metrics"], dependencies=[USER])

    @router.get(
        "/metrics",
        response_class=PlainTextResponse,
        summary="Prometheus metrics",
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format 0.0.4"}},
    )
    def metrics() -> PlainTextResponse:
        """Jobs by state, nodes by state, GPUs allocated and idle, spend, and the leader's step latency
        as a histogram. Gauges list every state, so they return to 0."""
        return PlainTextResponse(render_metrics(control_plane.metrics_snapshot()), media_type=CONTENT_TYPE)

    return router
