"""Who may call each route: one declaration per route, as a FastAPI security dependency (docs/security.md).

Every route of the app declares one kind of caller (``Access``), by a dependency on its router (or, where a
router mixes kinds, on the route):

- ``PUBLIC``: anyone (``/healthz``, ``/openapi.json``, ``/docs``, the dashboard's sign-in and its static
  files); reveals no tenant's data.
- ``USER``: an API token (``Authorization: Bearer``, or the dashboard's cookie) of any role.
- ``ADMIN``: an API token with role ``admin`` (a user token: 403).
- ``AGENT``: a node agent, with its one-time join token (``/agent/v1/register``) or its node token
  (heartbeats, logs); checked by a read before any write transaction, then rate-limited per node.
- ``WORKER``: an endpoint worker run by an agent, with its worker token; rate-limited per worker.

``route_access(route)`` reads a route's declaration back; ``tests/security/test_route_access.py`` walks
every route of the app (FastAPI's own, the dashboard's and its static mount included) and fails on one
without a declaration. The ASGI middleware (``scalar.api.auth.SecurityMiddleware``) stays in front of
everything as the fallback: a route it does not know as public needs a valid API token even if its
declaration were missing.

The dependencies also describe the credentials in ``/openapi.json`` (``components.securitySchemes``):
``bearerToken`` (API tokens), ``dashboardCookie``, ``nodeToken`` and ``workerToken`` (``X-Scalar-Node-Token``
/ ``X-Scalar-Worker-Token`` headers, or the ``node_token`` / ``token`` field of the body, which the agent
sends).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any

import anyio
from fastapi import Depends, FastAPI, Request, Security
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts
from fastapi.security import APIKeyCookie, APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.routing import BaseRoute

from scalar.api.auth import (
    ADMIN_ONLY_PROBLEM,
    COOKIE_NAME,
    UNAUTHORIZED_PROBLEM,
    RateLimiter,
    current_principal,
    set_principal,
)
from scalar.api.problems import ApiProblem
from scalar.runtime.auth import AUTH_OFF, Principal
from scalar.wire.jobs import FieldProblem


class Access(StrEnum):
    PUBLIC = "public"
    USER = "user"
    ADMIN = "admin"
    AGENT = "agent"
    WORKER = "worker"


ACCESS_ATTRIBUTE = "scalar_access"
NODE_TOKEN_HEADER = "X-Scalar-Node-Token"
WORKER_TOKEN_HEADER = "X-Scalar-Worker-Token"
AGENT_RATE_PER_S = 50.0
AGENT_BURST = 200.0
FAILURE_RATE_PER_S = 2.0
FAILURE_BURST = 20.0
"""Refused agent or worker credentials per client address: past these, each refusal is held back first."""
FAILURE_DELAY_S = 1.0
"""How long a refusal past the failure limit is held back: a client looping on bad credentials is slowed to
one call per connection and second, and the time costs the server no thread and no CPU."""

bearer_scheme = HTTPBearer(
    scheme_name="bearerToken",
    bearerFormat="scalar.<id>.<secret>",
    description="An API token (`scalar token create`; `scalar up` prints the first admin's). "
    "Routes marked admin need a token of role admin.",
    auto_error=False,
)
cookie_scheme = APIKeyCookie(
    name=COOKIE_NAME,
    scheme_name="dashboardCookie",
    description="The dashboard's HttpOnly cookie, set by POST /login; holds an API token.",
    auto_error=False,
)
node_scheme = APIKeyHeader(
    name=NODE_TOKEN_HEADER,
    scheme_name="nodeToken",
    description="A node agent's node token (from /agent/v1/register); the agent sends it as the body's "
    "node_token, or in this header.",
    auto_error=False,
)
worker_scheme = APIKeyHeader(
    name=WORKER_TOKEN_HEADER,
    scheme_name="workerToken",
    description="An endpoint worker's token ($SCALAR_WORKER_TOKEN in its job); sent as the body's token, "
    "or in this header.",
    auto_error=False,
)


def _declared(access: Access) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        setattr(function, ACCESS_ATTRIBUTE, access)
        return function

    return mark


# ------------------------------------------------------------------------------------------ problems


def unauthorized() -> ApiProblem:
    return ApiProblem(
        401,
        "unauthorized",
        "a valid API token is required",
        [UNAUTHORIZED_PROBLEM],
        headers={"WWW-Authenticate": 'Bearer realm="scalar"'},
    )


def forbidden() -> ApiProblem:
    return ApiProblem(403, "forbidden", "this action needs an admin token", [ADMIN_ONLY_PROBLEM])


def _credential_problem(kind: str, field: str, detail: str, fix: str) -> ApiProblem:
    """The 401 the agent's and workers' routes have always answered (their wording, their ``type``)."""
    return ApiProblem(401, kind, detail, [FieldProblem(field=field, problem=detail, fix=fix)])


def rate_limited(wait_s: float, who: str) -> ApiProblem:
    wait = max(1, math.ceil(wait_s))
    return ApiProblem(
        429,
        "rate-limited",
        f"too many requests from this {who}; retry in {wait} s",
        [FieldProblem(field=f"({who})", problem="made too many requests", fix=f"wait {wait} s and retry")],
        headers={"Retry-After": str(wait)},
    )


# ------------------------------------------------------------------------------------------ public


@_declared(Access.PUBLIC)
def public_caller() -> None:
    """Anyone may call: the route reveals no tenant's data."""


# ------------------------------------------------------------------------------------------ users


async def _principal_of(
    request: Request, credentials: HTTPAuthorizationCredentials | None, cookie: str | None
) -> Principal:
    """The caller the middleware authenticated, else (a route it let through as public) the token of
    this request, checked here; 401 without a valid one. With authentication off: the local admin."""
    found = request.scope.get("state", {}).get("principal")
    if isinstance(found, Principal):
        return found
    authenticate: Callable[[str], Principal | None] | None = getattr(request.app.state, "authenticate", None)
    if authenticate is None:
        return AUTH_OFF
    token = credentials.credentials if credentials is not None else cookie
    principal = await anyio.to_thread.run_sync(authenticate, token) if token else None
    if principal is None:
        raise unauthorized()
    request.scope.setdefault("state", {})["principal"] = principal
    set_principal(principal)
    return principal


@_declared(Access.USER)
async def user_caller(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Security(bearer_scheme),
    cookie: str | None = Security(cookie_scheme),
) -> Principal:
    """Any API token (user or admin)."""
    return await _principal_of(request, credentials, cookie)


@_declared(Access.ADMIN)
async def admin_caller(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Security(bearer_scheme),
    cookie: str | None = Security(cookie_scheme),
) -> Principal:
    """An API token of role admin; a user's: 403."""
    principal = await _principal_of(request, credentials, cookie)
    if not principal.is_admin:
        raise forbidden()
    return principal


PUBLIC = Depends(public_caller)
USER = Depends(user_caller)
ADMIN = Depends(admin_caller)


def caller() -> Principal:
    """The caller of the request being served (set by the middleware or the route's declaration)."""
    return current_principal()


# ------------------------------------------------------------------------------------------ agents

NodeCheck = Callable[[str, str], bool]
"""``check(node_id, node_token)``: whether the token is that node's (a read; no write transaction)."""
WorkerCheck = Callable[[str, str, str], bool]
"""``check(endpoint_id, worker_id, token)``: whether the token is that worker's current one (a read)."""


async def _body_fields(request: Request, *names: str) -> list[str]:
    """String fields of the JSON body (parsed once: FastAPI keeps the parsed body for the route)."""
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return ["" for _ in names]
    return [value if isinstance(value := body.get(name), str) else "" for name in names]


def _client(request: Request) -> str:
    return request.client.host if request.client is not None else "?"


async def _refusal(failures: RateLimiter, key: str) -> None:
    """Count a refused credential; past the limit, hold the answer back (``FAILURE_DELAY_S``) and make it
    429, so a flood of bogus calls slows itself down instead of the server."""
    wait = await failures.atake(key)
    if wait > 0:
        await asyncio.sleep(FAILURE_DELAY_S)
        raise rate_limited(wait, "address")


def agent_access(
    check: NodeCheck, *, limiter: RateLimiter | None = None, failures: RateLimiter | None = None
) -> tuple[Any, Any]:
    """``(join, node)``: the declarations of the agent's register route (join token in the body, checked by
    the route; rate-limited per client address) and of its node-token routes (checked here by a read, so a
    bogus heartbeat costs no write transaction; then rate-limited per node). Failed checks are
    rate-limited per client address."""
    limiter = limiter or RateLimiter(AGENT_RATE_PER_S, AGENT_BURST, name="agent")
    failures = failures or RateLimiter(FAILURE_RATE_PER_S, FAILURE_BURST, name="failure")

    @_declared(Access.AGENT)
    async def joining_agent(request: Request, header: str | None = Security(node_scheme)) -> None:
        """The join token itself is checked (and used up) by the route, in its one write transaction."""
        wait = await limiter.atake("join:" + _client(request))
        if wait > 0:
            raise rate_limited(wait, "address")

    @_declared(Access.AGENT)
    async def node_agent(request: Request, header: str | None = Security(node_scheme)) -> str:
        node_id, body_token = await _body_fields(request, "node_id", "node_token")
        token = header or body_token
        valid = bool(node_id and token) and await anyio.to_thread.run_sync(check, node_id, token)
        if not valid:
            await _refusal(failures, "node-failure:" + _client(request))
            raise _credential_problem(
                "node-token-invalid",
                "node_token",
                f"unknown node {node_id[:200]} or wrong node token",
                "register again with a new join token (remove the agent's state dir first)",
            )
        wait = await limiter.atake("node:" + node_id)
        if wait > 0:
            raise rate_limited(wait, "node")
        return node_id

    return Depends(joining_agent), Depends(node_agent)


def worker_access(
    check: WorkerCheck, *, limiter: RateLimiter | None = None, failures: RateLimiter | None = None
) -> Any:
    """The declaration of an endpoint worker's routes: its token (body ``token`` or the header) checked
    by a read, then rate-limited per worker; failed checks rate-limited per client address."""
    limiter = limiter or RateLimiter(AGENT_RATE_PER_S, AGENT_BURST, name="agent")
    failures = failures or RateLimiter(FAILURE_RATE_PER_S, FAILURE_BURST, name="failure")

    @_declared(Access.WORKER)
    async def endpoint_worker(request: Request, header: str | None = Security(worker_scheme)) -> str:
        endpoint_id = str(request.path_params.get("endpoint_id", ""))
        worker_id = str(request.path_params.get("worker_id", ""))
        (body_token,) = await _body_fields(request, "token")
        token = header or body_token
        valid = bool(endpoint_id and worker_id and token) and await anyio.to_thread.run_sync(
            check, endpoint_id, worker_id, token
        )
        if not valid:
            await _refusal(failures, "worker-failure:" + _client(request))
            raise _credential_problem(
                "worker-token-invalid",
                "token",
                f"wrong worker token for worker {worker_id[:200]}",
                "the agent passes the token in $SCALAR_WORKER_TOKEN; run the worker only as its assignment",
            )
        wait = await limiter.atake(f"worker:{endpoint_id}/{worker_id}")
        if wait > 0:
            raise rate_limited(wait, "worker")
        return worker_id

    return Depends(endpoint_worker)


# ------------------------------------------------------------------------------------------ reading back


def _dependency_access(dependant: Any, out: set[Access]) -> None:
    access = getattr(dependant.call, ACCESS_ATTRIBUTE, None)
    if isinstance(access, Access):
        out.add(access)
    for sub in dependant.dependencies:
        _dependency_access(sub, out)


def route_access(route: BaseRoute | RouteContext) -> set[Access]:
    """The kinds of caller ``route`` declares (empty: none). An API route declares through its dependencies
    (its own, its router's and those given where the router was included); any other route (FastAPI's docs,
    a static mount) through ``declare``."""
    found: set[Access] = set()
    dependant = getattr(route, "dependant", None)
    if dependant is not None:
        _dependency_access(dependant, found)
    original = route.original_route if isinstance(route, RouteContext) else route
    access = getattr(original, ACCESS_ATTRIBUTE, None)
    if isinstance(access, Access):
        found.add(access)
    return found


def app_routes(app: FastAPI) -> list[RouteContext]:
    """Every route the app serves, included routers flattened (FastAPI's own routes and mounts too)."""
    return list(iter_route_contexts(app.routes))


def declare(route: BaseRoute, access: Access) -> None:
    """Declare who may call a route that has no FastAPI dependencies (a mount, FastAPI's own docs)."""
    setattr(route, ACCESS_ATTRIBUTE, access)


def declare_public(app: FastAPI, paths: Iterable[str]) -> None:
    """Declare public the app's non-``APIRoute`` routes and mounts at ``paths`` (FastAPI's ``/openapi.json``,
    ``/docs`` and its OAuth redirect, the dashboard's static files)."""
    wanted = set(paths)
    for route in app.routes:
        path = getattr(route, "path", None)
        if path in wanted and not isinstance(route, APIRoute):
            declare(route, Access.PUBLIC)


def undeclared_routes(app: FastAPI) -> list[str]:
    """``METHOD path`` of every route of ``app`` that declares no kind of caller (``*`` for a mount)."""
    out: list[str] = []
    for route in app_routes(app):
        if not route_access(route):
            methods = sorted((route.methods or set()) - {"HEAD"}) or ["*"]
            out.extend(f"{method} {route.path}" for method in methods)
    return out
