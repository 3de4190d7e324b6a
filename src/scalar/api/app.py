"""``create_app(control_plane)``: the HTTP API over one control plane (docs/api.md; OpenAPI at /docs)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from scalar.api.access import (
    AGENT_BURST,
    AGENT_RATE_PER_S,
    FAILURE_BURST,
    FAILURE_RATE_PER_S,
    USER,
    declare_public,
)
from scalar.api.auth import RATE_BURST, RATE_PER_S, RateLimiter, SharedRateLimiter, install_security
from scalar.api.openapi import OPENAPI_PATH, install_docs
from scalar.api.ports import ControlPlanePort
from scalar.api.problems import ProblemRoute, install_problem_handlers
from scalar.api.routes_agent import AgentsPort, agent_router
from scalar.api.routes_budgets import BudgetsPort, budgets_router
from scalar.api.routes_cluster import ClusterPort, cluster_endpoints, cluster_router
from scalar.api.routes_endpoints import endpoints_router
from scalar.api.routes_graphql import graphql_router
from scalar.api.routes_jobs import jobs_router
from scalar.api.routes_market import market_router
from scalar.api.routes_metrics import MetricsPort, metrics_router
from scalar.api.routes_prices import PricesPort, prices_router
from scalar.api.routes_runpod import runpod_router
from scalar.api.routes_runpod_worker import runpod_worker_router
from scalar.api.tenancy import scoped_view
from scalar.runtime.endpoints.agent_workers import AgentWorkerService
from scalar.web.endpoints_page import endpoints_page_router
from scalar.web.router import STATIC_PATH, mount_dashboard, wants_html

DESCRIPTION = """\
Scalar buys GPU capacity where it is cheapest, packs jobs onto it and explains every decision.

Submit a job with `POST /jobs`, follow it with `GET /jobs/{id}` (its state and why), and look at the
market with `GET /orderbook?instance_type=8xH100&node_count=1`. Every error is an RFC 9457 problem
(`application/problem+json`) whose `errors` name each field and say how to fix it.
"""


def _limiters(control_plane: Any, shared: bool) -> tuple[RateLimiter, RateLimiter, RateLimiter]:
    """The limiters per token, per node or worker, and per failing address (api/auth.py)."""
    store = getattr(control_plane, "store", None)
    settings = getattr(control_plane, "settings", None)
    rate = float(getattr(settings, "rate_per_s", RATE_PER_S))
    burst = float(getattr(settings, "rate_burst", RATE_BURST))
    if not shared or store is None:
        return (
            RateLimiter(rate, burst, name="token"),
            RateLimiter(AGENT_RATE_PER_S, AGENT_BURST, name="agent"),
            RateLimiter(FAILURE_RATE_PER_S, FAILURE_BURST, name="failure"),
        )
    return (
        SharedRateLimiter(store, "token", rate, burst),
        SharedRateLimiter(store, "agent", AGENT_RATE_PER_S, AGENT_BURST),
        SharedRateLimiter(store, "failure", FAILURE_RATE_PER_S, FAILURE_BURST),
    )


def create_app(
    control_plane: ControlPlanePort, *, auth_required: bool | None = None, shared_limits: bool = False
) -> FastAPI:
    """The API over ``control_plane`` (a started ``scalar.runtime.ControlPlane``, or a test fake).

    ``auth_required`` defaults to ``control_plane.settings.auth_required`` (docs/security.md).
    ``shared_limits``: keep the rate limits' buckets in the control plane's database, shared by every API
    process on it (``scalar api`` does); otherwise each process has its own (the single-process shape)."""
    app = FastAPI(
        title="Scalar",
        version="0.1.0",
        description=DESCRIPTION,
        docs_url=None,  # served from local assets by install_docs (api/openapi.py)
        redoc_url=None,
        openapi_url=OPENAPI_PATH,
    )
    app.router.route_class = ProblemRoute
    install_problem_handlers(app)
    # tokens, tenants, size and rate limits on every route (api/auth.py); routes get the tenant-scoped view
    endpoint_service = getattr(control_plane, "endpoints", None)  # serverless endpoints (docs/endpoints.md)
    limiters = _limiters(control_plane, shared_limits)
    control_plane = install_security(app, control_plane, auth_required=auth_required, limiter=limiters[0])
    if endpoint_service is not None and app.state.auth_required:  # its answers pass the same redaction
        endpoint_service = scoped_view(endpoint_service, getattr(control_plane, "tokens", None))
    app.include_router(market_router(control_plane))
    app.include_router(jobs_router(control_plane))
    endpoints = ["/healthz", "/orderbook", "/jobs", "/jobs/{id}"]
    if isinstance(control_plane, PricesPort):
        app.include_router(prices_router(control_plane))
        endpoints += ["/prices", "/providers", "/quote", "/market"]
    if isinstance(control_plane, ClusterPort):
        app.include_router(cluster_router(control_plane))
        endpoints += cluster_endpoints()
    if isinstance(control_plane, MetricsPort):
        app.include_router(metrics_router(control_plane))
        endpoints += ["/metrics"]
    if isinstance(control_plane, BudgetsPort):
        app.include_router(budgets_router(control_plane))
        endpoints += ["/budgets"]
    if isinstance(control_plane, AgentsPort):  # node agents (docs/agent.md)
        app.state.agent_rate_limiter = limiters[1]  # per node, per worker
        app.state.agent_failure_limiter = limiters[2]  # per failing address
        app.include_router(
            agent_router(control_plane, app.state.agent_rate_limiter, app.state.agent_failure_limiter)
        )
        agents = control_plane.agents
        worker_service = AgentWorkerService(agents.store, agents.clock, agents.secret_box)
        app.include_router(  # RunPod's worker protocol
            runpod_worker_router(
                worker_service, app.state.agent_rate_limiter, app.state.agent_failure_limiter
            )
        )
        endpoints += ["/agents", "/jobs/{id}/logs"]
    if endpoint_service is not None:
        app.include_router(endpoints_router(endpoint_service))
        app.include_router(runpod_router(endpoint_service))
        app.include_router(graphql_router(endpoint_service))  # RunPod's control plane: tetra-rp, runpod-flash
        app.include_router(endpoints_page_router(), dependencies=[USER])
        endpoints += ["/endpoints", "/v2/{endpoint_id}/run", "/v2/{endpoint_id}/health"]

    @app.get("/", include_in_schema=False, response_model=None, dependencies=[USER])
    def index(request: Request) -> dict[str, Any] | Response:
        if wants_html(request.headers.get("accept", "")):  # a browser: the dashboard (docs/dashboard.md)
            return RedirectResponse("/ui/", status_code=307)
        return {
            "name": "scalar",
            "docs": "/docs",
            "dashboard": "/ui/",
            "openapi": "/openapi.json",
            "endpoints": endpoints,
        }

    install_docs(app)
    mount_dashboard(app, dependencies=[USER])
    # FastAPI's own route (the API's description) and the dashboard's static files: public, no data
    declare_public(app, [app.openapi_url or ""])
    declare_public(app, [STATIC_PATH])
    app.state.control_plane = control_plane
    return app
