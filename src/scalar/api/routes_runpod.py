"""RunPod's serverless data plane, so RunPod clients work unchanged: ``/v2/{endpoint_id}/...``.

``POST run`` (async, returns an id), ``POST runsync`` (waits up to ``?wait=`` ms, default 90 000, then
answers the current status), ``GET status/{id}``, ``GET stream/{id}``, ``POST cancel/{id}``,
``POST purge-queue``, ``GET health``, ``GET metrics``. Answers keep RunPod's shapes. Errors are problem
documents (``application/problem+json``, ``errors`` naming the field and the fix) that also carry RunPod's
``{"error": "..."}`` and no ``status`` member (a RunPod client reads ``status`` as the job's).

Every route is the caller's tenant's: another tenant's endpoint, and its requests, answer the 404 of an
endpoint that does not exist (docs/security.md). Bounds (docs/endpoints.md): ids of at most 64
characters; a body of at most 1 MiB (the API's limit) whose ``input`` nests at most 64 levels, without
NaN or infinity; ``webhook`` an http(s) URL of at most 2048 characters; ``policy.executionTimeout`` and
``policy.ttl`` whole milliseconds from 1 to 7 days; no other field.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import anyio
from fastapi import APIRouter, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError

from scalar.api.access import USER
from scalar.api.auth import MAX_BODY_BYTES, tenant_filter
from scalar.api.problems import (
    ApiProblem,
    database_unavailable,
    internal_problem,
    logger,
    problem,
    validation_problem,
)
from scalar.domain.endpoint_scaling import RequestStatus
from scalar.domain.errors import InvalidSpecError
from scalar.runtime.endpoints.service import EndpointNotFoundError, EndpointService, RequestNotFoundError
from scalar.wire.endpoints_api import (
    MAX_ID_LENGTH,
    HealthOut,
    MetricsOut,
    PurgeOut,
    RequestStatusOut,
    RunAccepted,
    RunPodProblem,
    RunRequest,
    StreamOut,
)
from scalar.wire.jobs import FieldProblem, ProblemDetails, field_problems

MAX_INPUT_BYTES = MAX_BODY_BYTES
MAX_INPUT_DEPTH = 64
RUNSYNC_WAIT_MS = 90_000
MAX_RUNSYNC_WAIT_MS = 300_000
POLL_S = 0.05
RUN_FIX = 'send {"input": {...}} with optional "webhook" and "policy" (docs/endpoints.md, Requests)'

_ERROR = {"model": RunPodProblem, "content": {"application/problem+json": {}}}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {**_ERROR, "description": "no such endpoint (or request) for this caller"},
    422: {**_ERROR, "description": "a bad parameter: the errors name it and the fix"},
}
_BODY_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_RESPONSES,
    400: {**_ERROR, "description": "the body is not JSON"},
    413: {**_ERROR, "description": "the body or its input is too large"},
    422: {**_ERROR, "description": "a bad body or parameter: the errors name the field and the fix"},
}


def runpod_problem(body: ProblemDetails) -> JSONResponse:
    """A problem document with RunPod's ``error`` key, so RunPod clients and Scalar's read it alike. It has
    no integer ``status`` member: on ``/v2`` a ``status`` is a job status, and RunPod's clients read it as
    one (an async client's ``stream()`` waits forever for a ``404`` to become final). The HTTP status is the
    response's own."""
    content = body.model_dump(mode="json", exclude_none=True)
    content.pop("status", None)
    content["error"] = body.detail
    return JSONResponse(content, status_code=body.status, media_type="application/problem+json")


def _fail(status: int, kind: str, detail: str, errors: Sequence[FieldProblem], path: str) -> JSONResponse:
    return runpod_problem(problem(status, kind, detail, errors, instance=path))


class RunPodRoute(APIRoute):
    """Every error of a ``/v2`` route (a bad parameter, an ``ApiProblem``, an unexpected failure) becomes
    a problem document carrying RunPod's ``error``; never a traceback."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            path = request.url.path
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return runpod_problem(validation_problem(exc, path))
            except ApiProblem as exc:
                return _fail(exc.status, exc.kind, exc.detail, exc.errors, path)
            except Exception as exc:
                unavailable = database_unavailable(exc, path)
                if unavailable is not None:  # 503 with Retry-After, as on every route
                    return unavailable
                logger.exception("unexpected error on %s %s", request.method, path)
                return runpod_problem(internal_problem(request))

        return guarded


def no_endpoint(endpoint_id: str) -> ApiProblem:
    """A missing endpoint, and another tenant's: the same answer, word for word."""
    return ApiProblem(
        404,
        "not-found",
        f"no endpoint with id {endpoint_id!r}",
        [
            FieldProblem(
                field="endpoint_id",
                problem=f"no endpoint has id {endpoint_id!r}",
                fix="give an endpoint id as returned by POST /endpoints (GET /endpoints lists them)",
            )
        ],
    )


def no_request(endpoint_id: str, request_id: str) -> ApiProblem:
    return ApiProblem(
        404,
        "not-found",
        f"no request with id {request_id!r} on endpoint {endpoint_id!r}",
        [
            FieldProblem(
                field="request_id",
                problem=f"endpoint {endpoint_id!r} has no request with id {request_id!r}",
                fix="give a request id as returned by POST /v2/{endpoint_id}/run on this endpoint",
            )
        ],
    )


def _input_issue(value: Any) -> tuple[str, str] | None:
    """(problem, fix) when ``value`` nests deeper than ``MAX_INPUT_DEPTH`` levels or holds NaN or an
    infinity (which JSON does not have; Python's parser reads them); walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"holds {item!r}, which is not a JSON number", "send finite numbers (or null, or a string)"
        if isinstance(item, dict | list):
            if depth > MAX_INPUT_DEPTH:
                return f"nests deeper than {MAX_INPUT_DEPTH} levels", "flatten the input's lists and objects"
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return None


def _input_problem(problem_text: str, fix: str) -> ApiProblem:
    return ApiProblem(
        422,
        "invalid-request",
        f"input: {problem_text}",
        [FieldProblem(field="input", problem=problem_text, fix=fix)],
    )


async def _run_request(request: Request) -> RunRequest:
    """The request's body, checked; ``ApiProblem`` naming the field otherwise."""
    raw = await request.body()
    if len(raw) > MAX_INPUT_BYTES:
        text = f"is larger than {MAX_INPUT_BYTES} bytes"
        raise ApiProblem(
            413,
            "payload-too-large",
            f"input: {text}",
            [
                FieldProblem(
                    field="input", problem=text, fix="send a smaller input, or a URL the handler fetches"
                )
            ],
        )
    try:
        body = json.loads(raw or b"null")  # NaN and Infinity read as floats, refused below naming the field
    except RecursionError:
        raise _input_problem(
            f"nests deeper than {MAX_INPUT_DEPTH} levels", "flatten the input's lists and objects"
        ) from None
    except ValueError as exc:
        raise ApiProblem(
            400,
            "invalid-request",
            f"the body is not JSON ({exc})",
            [FieldProblem(field="(body)", problem=f"is not JSON ({exc})", fix=RUN_FIX)],
        ) from None
    if not isinstance(body, dict):
        raise ApiProblem(
            422,
            "invalid-request",
            '(body): must be a JSON object with an "input" field',
            [FieldProblem(field="(body)", problem="must be a JSON object", fix=RUN_FIX)],
        )
    try:
        checked = RunRequest.model_validate(body)
    except ValidationError as exc:
        errors = field_problems(exc.errors(), known_fields=sorted(RunRequest.model_fields))
        errors = [
            e.model_copy(update={"fix": RUN_FIX}) if e.fix.startswith(("correct ", "send a JSON")) else e
            for e in errors
        ]
        first = errors[0]
        raise ApiProblem(422, "invalid-request", f"{first.field}: {first.problem}", errors) from None
    issue = _input_issue(checked.input)
    if issue is not None:
        raise _input_problem(*issue)
    return checked


def _endpoint_id() -> Any:
    return Path(min_length=1, max_length=MAX_ID_LENGTH, description="the endpoint's id")


def _request_id() -> Any:
    return Path(min_length=1, max_length=MAX_ID_LENGTH, description="the request's id, from run")


def _run_body() -> dict[str, Any]:
    schema = RunRequest.model_json_schema()  # its $defs move to components (api/openapi.py)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def runpod_router(service: EndpointService) -> APIRouter:
    router = APIRouter(prefix="/v2", tags=["runpod data plane"], route_class=RunPodRoute, dependencies=[USER])

    def submit(endpoint_id: str, body: RunRequest, tenant: str | None) -> RunAccepted:
        policy = body.policy
        try:
            return service.submit_request(
                endpoint_id,
                body.input,
                tenant=tenant,
                webhook=body.webhook,
                execution_timeout_ms=None if policy is None else policy.executionTimeout,
                ttl_ms=None if policy is None else policy.ttl,
            )
        except EndpointNotFoundError:
            raise no_endpoint(endpoint_id) from None
        except InvalidSpecError as err:
            raise ApiProblem(
                422,
                "invalid-request",
                f"{err.field}: {err.problem}",
                [FieldProblem(field=err.field, problem=err.problem, fix=err.hint or RUN_FIX)],
            ) from None

    def read_status(endpoint_id: str, request_id: str, tenant: str | None) -> RequestStatusOut:
        try:
            return service.request_status(endpoint_id, request_id, tenant=tenant)
        except EndpointNotFoundError:
            raise no_endpoint(endpoint_id) from None
        except RequestNotFoundError:
            raise no_request(endpoint_id, request_id) from None

    @router.post(
        "/{endpoint_id}/run",
        response_model=RunAccepted,
        responses=_BODY_RESPONSES,
        openapi_extra=_run_body(),
        summary="Queue a request (RunPod's run)",
    )
    async def run(request: Request, endpoint_id: str = _endpoint_id()) -> Any:
        tenant = tenant_filter()
        body = await _run_request(request)
        return await anyio.to_thread.run_sync(submit, endpoint_id, body, tenant)

    @router.post(
        "/{endpoint_id}/runsync",
        response_model=RequestStatusOut,
        responses=_BODY_RESPONSES,
        openapi_extra=_run_body(),
        summary="Queue a request and wait for its result (RunPod's runsync)",
    )
    async def runsync(
        request: Request,
        endpoint_id: str = _endpoint_id(),
        wait: int = Query(
            RUNSYNC_WAIT_MS, ge=0, le=MAX_RUNSYNC_WAIT_MS, description="milliseconds to wait for the result"
        ),
    ) -> Any:
        tenant = tenant_filter()
        body = await _run_request(request)
        accepted = await anyio.to_thread.run_sync(submit, endpoint_id, body, tenant)
        deadline = time.monotonic() + wait / 1000
        while True:
            status = await anyio.to_thread.run_sync(read_status, endpoint_id, accepted.id, tenant)
            if RequestStatus(status.status).terminal or time.monotonic() >= deadline:
                return status
            await anyio.sleep(POLL_S)

    @router.get(
        "/{endpoint_id}/status/{request_id}",
        response_model=RequestStatusOut,
        responses=_RESPONSES,
        summary="A request's status",
    )
    def status(endpoint_id: str = _endpoint_id(), request_id: str = _request_id()) -> Any:
        return read_status(endpoint_id, request_id, tenant_filter())

    @router.post(
        "/{endpoint_id}/cancel/{request_id}",
        response_model=RequestStatusOut,
        responses=_RESPONSES,
        summary="Cancel a request",
    )
    def cancel(endpoint_id: str = _endpoint_id(), request_id: str = _request_id()) -> Any:
        try:
            return service.cancel_request(endpoint_id, request_id, tenant=tenant_filter())
        except EndpointNotFoundError:
            raise no_endpoint(endpoint_id) from None
        except RequestNotFoundError:
            raise no_request(endpoint_id, request_id) from None

    @router.get(
        "/{endpoint_id}/stream/{request_id}",
        response_model=StreamOut,
        responses=_RESPONSES,
        summary="A streaming request's new chunks (RunPod's stream)",
    )
    def stream(endpoint_id: str = _endpoint_id(), request_id: str = _request_id()) -> Any:
        """The request's status and the chunks its handler yielded since the last call, each returned once;
        ``stream`` is always present (empty when nothing new came), so a client loops until the status is
        final and the stream empty."""
        try:
            return service.stream(endpoint_id, request_id, tenant=tenant_filter())
        except EndpointNotFoundError:
            raise no_endpoint(endpoint_id) from None
        except RequestNotFoundError:
            raise no_request(endpoint_id, request_id) from None

    @router.post(
        "/{endpoint_id}/purge-queue",
        response_model=PurgeOut,
        responses=_RESPONSES,
        summary="Cancel every queued request (RunPod's purge-queue)",
    )
    def purge_queue(endpoint_id: str = _endpoint_id()) -> Any:
        try:
            return service.purge_queue(endpoint_id, tenant=tenant_filter())
        except EndpointNotFoundError:
            raise no_endpoint(endpoint_id) from None

    @router.get(
        "/{endpoint_id}/metrics",
        response_model=MetricsOut,
        responses=_RESPONSES,
        summary="Workers and requests by state, with the workers' ids",
    )
    def metrics(endpoint_id: str = _endpoint_id()) -> Any:
        try:
            return service.metrics(endpoint_id, tenant=tenant_filter())
        except EndpointNotFoundError:
            raise no_endpoint(endpoint_id) from None

    @router.get(
        "/{endpoint_id}/health",
        response_model=HealthOut,
        responses=_RESPONSES,
        summary="Workers and requests by state",
    )
    def health(endpoint_id: str = _endpoint_id()) -> Any:
        try:
            return service.health(endpoint_id, tenant=tenant_filter())
        except EndpointNotFoundError:
            raise no_endpoint(endpoint_id) from None

    return router
