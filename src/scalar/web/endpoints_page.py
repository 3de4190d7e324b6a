"""The dashboard's Endpoints page (``/ui/endpoints``): each serverless endpoint's workers by state, queue
depth, latency, cost and latest scaling decisions, read from ``GET /endpoints`` and refreshed live."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from scalar.web.nav import PREFIX
from scalar.web.reader import ApiReader
from scalar.web.router import render

WORKER_STATES = ("ready", "running", "idle", "initializing", "throttled", "unhealthy")


def endpoint_rows(endpoints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for e in endpoints:
        health = e.get("health") or {}
        workers = health.get("workers") or {}
        jobs = health.get("jobs") or {}
        rows.append(
            {
                "id": e.get("id"),
                "name": e.get("name"),
                "tenant": e.get("tenant") or "default",
                "target": e.get("target"),
                "scaler": f"{e['spec'].get('scalerType')} {e['spec'].get('scalerValue')}"
                if e.get("spec")
                else "",
                "range": f"{e['spec'].get('workersMin')}..{e['spec'].get('workersMax')}"
                if e.get("spec")
                else "",
                "gpus": ", ".join((e.get("spec") or {}).get("gpus") or []),
                "workers": [(s, workers.get(s, 0)) for s in WORKER_STATES],
                "queued": jobs.get("inQueue", 0),
                "in_progress": jobs.get("inProgress", 0),
                "completed": jobs.get("completed", 0),
                "failed": jobs.get("failed", 0),
                "retried": jobs.get("retried", 0),
                "p50_ms": (e.get("latency_ms") or {}).get("p50"),
                "p99_ms": (e.get("latency_ms") or {}).get("p99"),
                "cost": (e.get("cost") or {}).get("cost_usd"),
                "cost_per_1000": (e.get("cost") or {}).get("cost_per_1000_requests_usd"),
                "worker_hours": (e.get("cost") or {}).get("worker_hours"),
                "no_workers_reason": e.get("no_workers_reason"),
                "scaling": (e.get("scaling") or [])[:5],
                "worker_list": e.get("workers") or [],
            }
        )
    return rows


def endpoints_page_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get(f"{PREFIX}/endpoints")
    async def endpoints_page(request: Request) -> Response:
        answer = await ApiReader(request).get("/endpoints")
        found = answer.json().get("endpoints", [])
        return render(
            request,
            "endpoints.html",
            title="Endpoints",
            endpoints=endpoint_rows(found),
            problem="" if answer.ok else answer.problem(),
        )

    return router
