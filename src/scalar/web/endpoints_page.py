"""The dashboard's Endpoints page (``/ui/endpoints``): each serverless endpoint's workers by state, queue
depth, latency, cost and latest scaling decisions, read from ``GET /endpoints`` as its model
(``wire/endpoints_api.py``) and refreshed live."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError

from scalar.web.nav import PREFIX
from scalar.web.reader import ApiReader
from scalar.web.router import render
from scalar.wire.endpoints_api import EndpointListOut, EndpointOut

WORKER_STATES = ("ready", "running", "idle", "initializing", "throttled", "unhealthy")


def endpoint_rows(endpoints: list[EndpointOut]) -> list[dict[str, Any]]:
    rows = []
    for e in endpoints:
        workers = e.health.workers.model_dump()
        jobs = e.health.jobs
        spec = e.spec
        rows.append(
            {
                "id": e.id,
                "name": e.name,
                "tenant": e.tenant or "default",
                "target": e.target,
                "scaler": f"{spec.get('scalerType')} {spec.get('scalerValue')}" if spec else "",
                "range": f"{spec.get('workersMin')}..{spec.get('workersMax')}" if spec else "",
                "gpus": ", ".join(spec.get("gpus") or []),
                "workers": [(s, workers.get(s, 0)) for s in WORKER_STATES],
                "queued": jobs.inQueue,
                "in_progress": jobs.inProgress,
                "completed": jobs.completed,
                "failed": jobs.failed,
                "retried": jobs.retried,
                "p50_ms": e.latency_ms.p50,
                "p99_ms": e.latency_ms.p99,
                "cost": e.cost.cost_usd,
                "cost_per_1000": e.cost.cost_per_1000_requests_usd,
                "worker_hours": e.cost.worker_hours,
                "no_workers_reason": e.no_workers_reason,
                "scaling": e.scaling[:5],
                "worker_list": e.workers,
            }
        )
    return rows


def endpoints_of(body: dict[str, Any]) -> list[EndpointOut]:
    """``GET /endpoints``, read as its model (``EndpointListOut``); none when the answer is not one."""
    try:
        return EndpointListOut.model_validate(body).endpoints if body else []
    except ValidationError:
        return []


def endpoints_page_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get(f"{PREFIX}/endpoints")
    async def endpoints_page(request: Request) -> Response:
        answer = await ApiReader(request).get("/endpoints")
        found = endpoints_of(answer.json())
        return render(
            request,
            "endpoints.html",
            title="Endpoints",
            endpoints=endpoint_rows(found),
            problem="" if answer.ok else answer.problem(),
        )

    return router
