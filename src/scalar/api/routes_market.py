"""``/healthz`` and ``/orderbook`` (seed 000's GET /orderbook)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from sqlalchemy.engine import make_url

from scalar.api.access import ADMIN, PUBLIC, USER
from scalar.api.ports import ControlPlanePort
from scalar.api.problems import PARAMETER_FIXES, ApiProblem, ProblemRoute
from scalar.wire.jobs import FieldProblem, HealthDetailsOut, HealthOut, ProblemDetails
from scalar.wire.orderbook import OrderbookResponse

DEFAULT_GPUS_PER_NODE = 8
_GPUS_IN_NAME = re.compile(r"^(\d+)x", re.IGNORECASE)
_PROBLEM = {"model": ProblemDetails, "content": {"application/problem+json": {}}}


def gpus_per_node_of(instance_type: str) -> int:
    """The N of ``NxMODEL`` (``8xH100`` -> 8), else 8 (SFCompute's nodes)."""
    named = _GPUS_IN_NAME.match(instance_type)
    if named:
        count = int(named.group(1))
        if 1 <= count <= 64:
            return count
    return DEFAULT_GPUS_PER_NODE


def _redacted(url: str | None) -> str | None:
    if url is None or "://" not in url:
        return url
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(hidden)"


HEALTH_RETRY_AFTER_S = 5


def health_response(model: type[HealthOut], full: HealthDetailsOut) -> Any:
    """The runtime's ``full`` health shown as ``model`` (its fields only): 200 when ok, else 503 with
    ``Retry-After``."""
    health = model.model_validate(full.model_dump())
    if health.status != "ok":
        return JSONResponse(
            health.model_dump(mode="json"),
            status_code=503,
            headers={"Retry-After": str(HEALTH_RETRY_AFTER_S)},
        )
    return health


def market_router(control_plane: ControlPlanePort) -> APIRouter:
    router = APIRouter(route_class=ProblemRoute)

    @router.get(
        "/healthz",
        response_model=HealthOut,
        tags=["health"],
        summary="Is the control plane up, and is this process the leader?",
        dependencies=[PUBLIC],
        responses={503: {"model": HealthOut, "description": "up but not ok: starting or degraded"}},
    )
    def healthz() -> Any:
        """``status`` ok (200) or starting/degraded (503, with ``Retry-After`` and a ``problem`` code). Public,
        so it names no database, host or process: an admin reads those from ``GET /healthz/details``."""
        return health_response(HealthOut, control_plane.health())

    @router.get(
        "/healthz/details",
        response_model=HealthDetailsOut,
        tags=["health"],
        summary="The health with the database, the lease holder and the driver's error (admin)",
        dependencies=[ADMIN],
        responses={503: {"model": HealthDetailsOut, "description": "up but not ok: starting or degraded"}},
    )
    def healthz_details() -> Any:
        health = control_plane.health()
        redacted = health.model_copy(update={"database": _redacted(health.database)})
        return health_response(HealthDetailsOut, redacted)

    @router.get(
        "/orderbook",
        response_model=OrderbookResponse,
        tags=["market"],
        summary="The orderbook of an instance type and the price seed 000's algorithm would bid",
        dependencies=[USER],
        responses={
            404: {**_PROBLEM, "description": "no orderbook for this instance type"},
            422: {**_PROBLEM, "description": "a bad parameter"},
        },
    )
    def orderbook(
        instance_type: str = Query(min_length=1, max_length=64, description='e.g. "8xH100"'),
        node_count: int = Query(1, ge=1, le=1000, description="nodes to buy"),
        gpus_per_node: int | None = Query(
            None, ge=1, le=64, description="GPUs per node (default: the N of NxMODEL, else 8)"
        ),
    ) -> Any:
        """Seed 000's response (asks with cumulative quantities, bids, optimal price and index, spread,
        liquidity, metadata) plus ``insufficient_liquidity``, the ``fill`` estimate and the scores."""
        per_node = gpus_per_node if gpus_per_node is not None else gpus_per_node_of(instance_type)
        try:
            raw = control_plane.orderbook(instance_type, node_count, per_node)
        except KeyError as exc:
            said = exc.args[0] if exc.args and isinstance(exc.args[0], str) else ""
            known = said if said and said != instance_type else ""
            raise ApiProblem(
                404,
                "not-found",
                f"no orderbook for instance type {instance_type!r}" + (f": {known}" if known else ""),
                [
                    FieldProblem(
                        field="instance_type",
                        problem=f"no orderbook sells {instance_type!r}",
                        fix=PARAMETER_FIXES["instance_type"],
                    )
                ],
            ) from None
        return raw

    return router
