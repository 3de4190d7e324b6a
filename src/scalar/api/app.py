"""``create_app(control_plane)``: the HTTP API over one control plane (docs/api.md; OpenAPI at /docs)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from scalar.api.ports import ControlPlanePort
from scalar.api.problems import ProblemRoute, install_problem_handlers
from scalar.api.routes_jobs import jobs_router
from scalar.api.routes_market import market_router
from scalar.api.routes_prices import PricesPort, prices_router

DESCRIPTION = """\
Scalar buys GPU capacity where it is cheapest, packs jobs onto it and explains every decision.

Submit a job with `POST /jobs`, follow it with `GET /jobs/{id}` (its state and why), and look at the
market with `GET /orderbook?instance_type=8xH100&node_count=1`. Every error is an RFC 9457 problem
(`application/problem+json`) whose `errors` name each field and say how to fix it.
"""


def create_app(control_plane: ControlPlanePort) -> FastAPI:
    """The API over ``control_plane`` (a started ``scalar.runtime.ControlPlane``, or a test fake)."""
    app = FastAPI(
        title="Scalar",
        version="0.1.0",
        description=DESCRIPTION,
        docs_url="/docs",
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.router.route_class = ProblemRoute
    install_problem_handlers(app)
    app.include_router(market_router(control_plane))
    app.include_router(jobs_router(control_plane))
    endpoints = ["/healthz", "/orderbook", "/jobs", "/jobs/{id}"]
    if isinstance(control_plane, PricesPort):
        app.include_router(prices_router(control_plane))
        endpoints += ["/prices", "/providers", "/quote", "/market"]

    @app.get("/", include_in_schema=False)
    def index() -> dict[str, Any]:
        return {
            "name": "scalar",
            "docs": "/docs",
            "openapi": "/openapi.json",
            "endpoints": endpoints,
        }

    app.state.control_plane = control_plane
    _problems_in_openapi(app)
    return app


def _problems_in_openapi(app: FastAPI) -> None:
    """Error responses are ``application/problem+json``: move their schema under that media type."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = generate()
        for operations in spec.get("paths", {}).values():
            for operation in operations.values():
                for status, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if status[:1] in {"4", "5"} and "application/problem+json" in content:
                        schema = content.pop("application/json", {}).get("schema")
                        if schema is not None:
                            content["application/problem+json"] = {"schema": schema}
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
