"""Errors as RFC 9457 problem details that say what to fix, and never a traceback.

Every error response is ``application/problem+json``: ``type`` (``urn:scalar:problem:<kind>``), ``title``,
``status``, ``detail`` and ``errors: [{field, problem, fix}]``. Request validation (422) names the field;
a job the control plane refuses (422) carries each reason's code and numbers; unknown things are 404. Any
unexpected exception is logged here and answered with a 500 problem that shows no internals.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError, ResponseValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute, iter_route_contexts
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from scalar.domain.reasons import Reason
from scalar.store.errors import DatabaseUnavailableError
from scalar.wire.jobs import FIELD_FIXES, FieldProblem, ProblemDetails, field_problems

logger = logging.getLogger("scalar.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_PREFIX = "urn:scalar:problem:"

# kind -> title; the kinds are documented in docs/api.md.
TITLES: dict[str, str] = {
    "invalid-request": "Invalid request",
    "job-rejected": "Job refused",
    "not-found": "Not found",
    "method-not-allowed": "Method not allowed",
    "unauthorized": "Unauthorized",
    "forbidden": "Forbidden",
    "payload-too-large": "Request body too large",
    "rate-limited": "Too many requests",
    "unavailable": "Service unavailable",
    "internal-error": "Internal error",
    "http-error": "HTTP error",
}

# How to fix the control plane's refusals, by reason code. ``{need}``/``{have}``/``{limit}`` are the
# reason's numbers.
REASON_FIXES: dict[str, str] = {
    "negative_gpus": "set gpu_count to 0 or more",
    "unknown_tier": FIELD_FIXES["tier"],
    "no_group_for_tier": (
        "submit with the other tier, or add a scale group whose tiers include {need} to the config "
        "([controller] scale_groups in scalar.toml)"
    ),
    "no_offer_for_tier": (
        "wait a few seconds for the first prices to be collected (GET /orderbook shows the market), or "
        "configure a scale group that matches an offer for {need}"
    ),
    "gpu_model_not_offered": "accept one of the models on offer ({have}), or leave gpu_models out",
    "vram_too_large": "ask for at most {have} GB of VRAM per GPU",
    "cpu_too_large": "ask for at most {have} CPU cores per node",
    "ram_too_large": "ask for at most {have} GB of RAM per node",
    "too_large": (
        "ask for at most {have} GPUs, or raise max_slices or slice_size of a scale group in the config"
    ),
}

# Fixes for query and path parameters (the body's fields use ``FIELD_FIXES``).
PARAMETER_FIXES: dict[str, str] = {
    "state": "give one of PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED, CANCELLED, PREEMPTED, REJECTED",
    "limit": "give a whole number from 1 to 1000",
    "offset": "give a whole number from 0 up",
    "order": "give newest (the default) or oldest (submission order)",
    "after": "pass the `next` (or `prev`) of a page this list returned; leave it out for the first page",
    "instance_type": 'give an instance type sold on an orderbook, e.g. "8xH100"',
    "node_count": "give a whole number of nodes from 1 to 1000",
    "gpus_per_node": "give a whole number of GPUs per node from 1 to 64 (default: the N of NxMODEL, else 8)",
    "job_id": "give a job id as returned by POST /jobs (GET /jobs lists them)",
    # serverless endpoints (api/routes_endpoints.py, api/routes_runpod.py)
    "target": "give one of builtin, local or runpod, or leave it out",
    "endpoint_id": "give an endpoint id as returned by POST /endpoints, at most 64 characters",
    "request_id": "give a request id as returned by POST /v2/{endpoint_id}/run, at most 64 characters",
    "workers_limit": "give a whole number from 0 to 1000",
    "wait": "give the milliseconds to wait, a whole number from 0 to 300000",
}


class ApiProblem(Exception):
    """Raise from a route to answer with a problem; ``kind`` is the ``type``'s last part."""

    def __init__(
        self,
        status: int,
        kind: str,
        detail: str,
        errors: Sequence[FieldProblem] = (),
        title: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.detail = detail
        self.errors = list(errors)
        self.title = title or TITLES.get(kind, "Error")
        self.headers = dict(headers) if headers else None


def problem(
    status: int, kind: str, detail: str, errors: Sequence[FieldProblem] = (), *, instance: str | None = None
) -> ProblemDetails:
    return ProblemDetails(
        type=PROBLEM_PREFIX + kind,
        title=TITLES.get(kind, "Error"),
        status=status,
        detail=detail,
        instance=instance,
        errors=list(errors),
    )


def problem_response(body: ProblemDetails, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        body.model_dump(mode="json", exclude_none=True),
        status_code=body.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=dict(headers) if headers else None,
    )


def _instance(request: Request) -> str:
    return request.url.path


def _format_number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return "-" if value is None else str(value)


def reason_problem(reason: Reason) -> FieldProblem:
    field = reason.resource or "(job)"
    template = REASON_FIXES.get(reason.code)
    if template is not None:
        fix = template.format(
            need=_format_number(reason.need),
            have=_format_number(reason.have),
            limit=_format_number(reason.limit),
        )
    else:
        fix = FIELD_FIXES.get(field) or PARAMETER_FIXES.get(field) or "change the job and submit it again"
    return FieldProblem(
        field=field,
        problem=reason.message,
        fix=fix,
        code=reason.code,
        need=reason.need,
        have=reason.have,
        limit=reason.limit,
    )


def rejection_problem(reasons: Iterable[Reason], instance: str | None = None) -> ProblemDetails:
    errors = [reason_problem(r) for r in reasons]
    detail = "job refused: " + ("; ".join(e.problem for e in errors) or "the control plane gave no reason")
    return problem(422, "job-rejected", detail, errors, instance=instance)


def _summary(errors: Sequence[FieldProblem]) -> str:
    if not errors:
        return "the request is invalid"
    first = errors[0]
    text = f"{first.field}: {first.problem}"
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return text


def validation_problem(exc: RequestValidationError, instance: str | None = None) -> ProblemDetails:
    errors: list[FieldProblem] = []
    for raw in exc.errors():
        loc = tuple(raw.get("loc", ()))
        where = loc[0] if loc else "body"
        item = dict(raw)
        item["loc"] = loc[1:] if where in {"body", "query", "path", "header"} else loc
        if raw.get("type") == "json_invalid":
            item["loc"] = ()
        (entry,) = field_problems([item])
        if where in {"query", "path"}:
            name = entry.field.split(".", 1)[0]
            entry = entry.model_copy(update={"fix": PARAMETER_FIXES.get(name, entry.fix)})
        errors.append(entry)
    return problem(422, "invalid-request", _summary(errors), errors, instance=instance)


# --------------------------------------------------------------------------------------------- handlers


async def _on_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return problem_response(validation_problem(exc, _instance(request)))


async def _on_api_problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiProblem)
    body = problem(exc.status, exc.kind, exc.detail, exc.errors, instance=_instance(request))
    body = body.model_copy(update={"title": exc.title})
    return problem_response(body, exc.headers)


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    if status == 404:
        body = problem(
            404,
            "not-found",
            f"no such endpoint: {request.method} {request.url.path}",
            [FieldProblem(field="(path)", problem="is not an endpoint", fix="see /docs for the endpoints")],
            instance=_instance(request),
        )
    elif status == 405:
        allow = allowed_methods(request)
        body = problem(
            405,
            "method-not-allowed",
            f"{request.method} is not allowed on {request.url.path}",
            [FieldProblem(field="(method)", problem="is not allowed here", fix=f"use one of {allow}")],
            instance=_instance(request),
        )
        return problem_response(body, {**(exc.headers or {}), "Allow": allow})
    elif status == 400:
        body = problem(
            400,
            "invalid-request",
            f"the request body could not be read: {exc.detail}",
            [
                FieldProblem(
                    field="(body)",
                    problem="is not valid UTF-8 JSON",
                    fix="send a JSON object encoded as UTF-8 with content-type application/json",
                )
            ],
            instance=_instance(request),
        )
    else:
        body = problem(
            status,
            "http-error",
            str(exc.detail),
            [FieldProblem(field="(request)", problem=str(exc.detail), fix="see /docs for this endpoint")],
            instance=_instance(request),
        )
    return problem_response(body, exc.headers)


def allowed_methods(request: Request) -> str:
    """The methods of the documented path this request's path is (FastAPI makes one route per method, so
    the route that refused the request knows only its own). The most literal template wins, as in the
    OpenAPI document: ``/jobs/preview`` is its own path, not ``/jobs/{job_id}``."""
    by_template: dict[str, set[str]] = {}
    path = request.url.path
    for route in iter_route_contexts(request.app.routes):  # routes of included routers too
        if route.methods and route.path and compile_path(route.path)[0].fullmatch(path):
            by_template.setdefault(route.path, set()).update(route.methods)
    if not by_template:
        return ""
    most_literal = min(by_template, key=lambda template: template.count("{"))
    return ", ".join(sorted(by_template[most_literal]))


def internal_problem(request: Request) -> ProblemDetails:
    return problem(
        500,
        "internal-error",
        "the server failed while answering; the error is in the server's log",
        [
            FieldProblem(
                field="(server)",
                problem="an unexpected error happened",
                fix="try again; if it persists, report it with the server log",
            )
        ],
        instance=_instance(request),
    )


# The database is down, unreachable, locked or out of connections: the request may succeed later.
DATABASE_ERRORS: tuple[type[Exception], ...] = (
    OperationalError,
    InterfaceError,
    SQLAlchemyTimeoutError,
    DatabaseUnavailableError,
)
DATABASE_RETRY_AFTER_S = 5


def database_unavailable(exc: BaseException, path: str) -> JSONResponse | None:
    """A 503 problem with ``Retry-After`` when ``exc`` (or what caused it) says the database is unavailable,
    else ``None``. The driver's text stays in the server's log."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, DATABASE_ERRORS):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return None
    logger.warning(
        "database unavailable on %s: %s", path, str(cause).splitlines()[0] if str(cause) else cause
    )
    body = problem(
        503,
        "unavailable",
        "the database is unavailable; retry shortly",
        [
            FieldProblem(
                field="(server)",
                problem="cannot reach its database right now",
                fix=f"retry in {DATABASE_RETRY_AFTER_S} s; if it persists, an admin should check the database "
                "(GET /healthz/details)",
            )
        ],
        instance=path,
    )
    return problem_response(body, {"Retry-After": str(DATABASE_RETRY_AFTER_S)})


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    unavailable = database_unavailable(exc, request.url.path)
    if unavailable is not None:
        return unavailable
    logger.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(internal_problem(request))


_HANDLED = (StarletteHTTPException, RequestValidationError, ApiProblem)


class ProblemRoute(APIRoute):
    """A route whose unexpected exceptions become a logged 500 problem (no internals, no re-raise)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except _HANDLED:
                raise
            except ResponseValidationError as exc:
                logger.error(
                    "response of %s %s did not match its schema: %s",
                    request.method,
                    request.url.path,
                    exc.errors(),
                )
                return problem_response(internal_problem(request))
            except Exception as exc:
                return await _on_unexpected(request, exc)

        return guarded


def install_problem_handlers(app: FastAPI) -> None:
    handlers: list[tuple[Any, Any]] = [
        (RequestValidationError, _on_validation),
        (ApiProblem, _on_api_problem),
        (StarletteHTTPException, _on_http),
        (Exception, _on_unexpected),
    ]
    for exc_type, handler in handlers:
        app.add_exception_handler(exc_type, handler)
