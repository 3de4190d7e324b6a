"""``/endpoints``: create, list, read, update and delete serverless endpoints (seed 004, docs/endpoints.md).

An endpoint belongs to the caller's tenant (``current_principal()``); a user sees and changes only its
tenant's endpoints, and another tenant's answers the 404 of one that does not exist (docs/security.md).
An admin sees every tenant's; each endpoint shows its ``tenant``.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from fastapi import APIRouter, Body, Path, Query, Response
from pydantic import ValidationError

from scalar.api import paging
from scalar.api.access import USER
from scalar.api.auth import current_principal, tenant_filter
from scalar.api.problems import ApiProblem, ProblemRoute
from scalar.domain.errors import InvalidSpecError
from scalar.runtime.endpoints.service import (
    EndpointNotFoundError,
    EndpointService,
    HandlerNotAllowedError,
)
from scalar.wire.endpoints import EndpointSpecFile, spec_body_schema
from scalar.wire.endpoints_api import (
    MAX_ID_LENGTH,
    MAX_WORKERS_SHOWN,
    EndpointListOut,
    EndpointLogsOut,
    EndpointOut,
)
from scalar.wire.jobs import FieldProblem, ProblemDetails, field_problems

_PROBLEM = {"model": ProblemDetails, "content": {"application/problem+json": {}}}
ENDPOINT_ID_FIX = "give an endpoint id as returned by POST /endpoints (GET /endpoints lists them)"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_OFFSET = 1_000_000_000
SPEC_FIX = "correct this field (docs/formats/endpoint.md lists every field with its type and bounds)"


class Target(StrEnum):
    """Where an endpoint's workers run (docs/endpoints.md, Targets)."""

    BUILTIN = "builtin"
    LOCAL = "local"
    RUNPOD = "runpod"


def spec_problem(exc: Exception) -> ApiProblem:
    """An invalid spec as a 422 problem naming each field and its fix."""
    if isinstance(exc, InvalidSpecError):
        errors = [
            FieldProblem(
                field=exc.field,
                problem=exc.problem,
                fix=exc.hint or "correct this field (docs/formats/endpoint.md lists every field)",
            )
        ]
    else:
        assert isinstance(exc, ValidationError)
        errors = [
            e.model_copy(update={"fix": SPEC_FIX}) if e.fix.startswith("correct ") else e
            for e in field_problems(exc.errors(), known_fields=sorted(EndpointSpecFile.model_fields))
        ]
    first = errors[0]
    return ApiProblem(422, "invalid-request", f"{first.field}: {first.problem}", errors)


def handler_problem(exc: HandlerNotAllowedError) -> ApiProblem:
    """403 naming ``handler``: a local handler runs on the control plane's host, so an admin chooses it."""
    return ApiProblem(
        403,
        "forbidden",
        f"handler: {exc.handler!r} is not an allowed handler",
        [
            FieldProblem(
                field="handler",
                problem=f"{exc.handler!r} is not in a module an admin allowed",
                fix=exc.fix,
            )
        ],
    )


def not_found(endpoint_id: str) -> ApiProblem:
    return ApiProblem(
        404,
        "not-found",
        f"no endpoint with id {endpoint_id!r}",
        [
            FieldProblem(
                field="endpoint_id", problem=f"no endpoint has id {endpoint_id!r}", fix=ENDPOINT_ID_FIX
            )
        ],
    )


def endpoints_router(service: EndpointService) -> APIRouter:
    router = APIRouter(route_class=ProblemRoute, tags=["endpoints"], dependencies=[USER])

    @router.post(
        "/endpoints",
        status_code=201,
        response_model=EndpointOut,
        responses={422: {**_PROBLEM, "description": "invalid spec: the errors name each field and the fix"}},
        summary="Create a serverless endpoint",
        openapi_extra=spec_body_schema(create=True),
    )
    def create_endpoint(
        response: Response,
        body: dict[str, Any] = Body(..., description="the endpoint spec (docs/formats/endpoint.md)"),
        target: Target | None = Query(
            None, description="builtin, local or runpod (default: local with a handler, else builtin)"
        ),
    ) -> Any:
        try:
            created = service.create(
                body,
                None if target is None else target.value,
                tenant=current_principal().tenant,
                admin=current_principal().is_admin,
            )
        except (InvalidSpecError, ValidationError) as exc:
            raise spec_problem(exc) from None
        except HandlerNotAllowedError as exc:
            raise handler_problem(exc) from None
        response.headers["Location"] = f"/endpoints/{created.id}"
        return created

    @router.get(
        "/endpoints",
        response_model=EndpointListOut,
        responses={422: {**_PROBLEM, "description": "a bad page"}},
        summary="List endpoints (the caller's tenant's; an admin's: every tenant's)",
    )
    def list_endpoints(
        include_deleted: bool = Query(False, description="also list deleted endpoints"),
        limit: int = Query(
            DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description=f"at most this many endpoints (1 to {MAX_LIMIT})"
        ),
        offset: int = Query(
            0, ge=0, le=MAX_OFFSET, description="skip this many endpoints first (prefer `after`)"
        ),
        workers_limit: int = Query(
            MAX_WORKERS_SHOWN, ge=0, le=MAX_WORKERS_SHOWN, description="at most this many workers each"
        ),
        after: str | None = Query(
            None, max_length=paging.MAX_CURSOR_LENGTH, description="a page's `next` or `prev` cursor"
        ),
    ) -> Any:
        """Endpoints in creation order (then id), a page of ``limit``; ``next``/``prev``: the cursors of the
        pages after and before."""
        tenant = tenant_filter()
        listing = paging.fingerprint("endpoints", include_deleted=include_deleted, tenant=tenant)
        cursor = paging.decode_with_offset(after, listing, offset)

        def fetch(key: Any, reverse: bool, n: int) -> list[EndpointOut]:
            start = None
            if key is not None:
                try:
                    start = (datetime.fromisoformat(key[0]), str(key[1]))
                except (ValueError, TypeError):
                    raise paging.bad_cursor("is not a cursor this server returned") from None
                if start[0].tzinfo is None:
                    raise paging.bad_cursor("is not a cursor this server returned")
            return service.list_endpoints(
                include_deleted,
                tenant=tenant,
                limit=n,
                offset=offset,
                workers_limit=workers_limit,
                after=start,
                descending=reverse,
            )

        found = paging.page(fetch, lambda e: [str(e.created_at), str(e.id)], limit, cursor, listing)
        return EndpointListOut(
            endpoints=found.items,
            count=len(found.items),
            limit=limit,
            offset=offset,
            after=after or None,
            next=found.next,
            prev=found.prev,
        )

    @router.get(
        "/endpoints/{endpoint_id}",
        response_model=EndpointOut,
        responses={404: {**_PROBLEM, "description": "no such endpoint"}},
        summary="Read one endpoint: workers, health, latency, cost and scaling decisions",
    )
    def get_endpoint(
        endpoint_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
        workers_limit: int = Query(
            MAX_WORKERS_SHOWN,
            ge=0,
            le=MAX_WORKERS_SHOWN,
            description="show at most this many active workers (workers_count has them all)",
        ),
    ) -> Any:
        found = service.get(endpoint_id, tenant=tenant_filter(), workers_limit=workers_limit)
        if found is None:
            raise not_found(endpoint_id)
        return found

    @router.patch(
        "/endpoints/{endpoint_id}",
        response_model=EndpointOut,
        responses={
            404: {**_PROBLEM, "description": "no such endpoint"},
            422: {**_PROBLEM, "description": "the changed spec is invalid"},
        },
        summary="Change an endpoint's spec (the fields given replace the current ones)",
        openapi_extra=spec_body_schema(create=False),
    )
    def update_endpoint(
        endpoint_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
        body: dict[str, Any] = Body(..., description="spec fields to change"),
    ) -> Any:
        try:
            return service.update(
                endpoint_id, body, tenant=tenant_filter(), admin=current_principal().is_admin
            )
        except EndpointNotFoundError:
            raise not_found(endpoint_id) from None
        except (InvalidSpecError, ValidationError) as exc:
            raise spec_problem(exc) from None
        except HandlerNotAllowedError as exc:
            raise handler_problem(exc) from None

    @router.delete(
        "/endpoints/{endpoint_id}",
        response_model=EndpointOut,
        responses={404: {**_PROBLEM, "description": "no such endpoint"}},
        summary="Delete an endpoint: its workers stop, its queued requests are cancelled",
    )
    def delete_endpoint(endpoint_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH)) -> Any:
        try:
            return service.delete(endpoint_id, tenant=tenant_filter())
        except EndpointNotFoundError:
            raise not_found(endpoint_id) from None

    @router.get(
        "/endpoints/{endpoint_id}/logs",
        response_model=EndpointLogsOut,
        responses={404: {**_PROBLEM, "description": "no such endpoint"}},
        summary="Scaling decisions and worker moves, newest first",
    )
    def endpoint_logs(
        endpoint_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
        limit: int = Query(100, ge=1, le=MAX_LIMIT, description="at most this many lines"),
    ) -> Any:
        try:
            return EndpointLogsOut(
                id=endpoint_id, lines=service.logs(endpoint_id, limit, tenant=tenant_filter())
            )
        except EndpointNotFoundError:
            raise not_found(endpoint_id) from None

    return router
