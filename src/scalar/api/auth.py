"""Who may call what: API tokens on every route, tenants, admin-only routes, body size and rate limits.

``install_security(app, control_plane)`` (called first thing by ``create_app``) adds one ASGI middleware
that every request goes through, whatever router or mount serves it:

1. the body is read up to ``max_body_bytes`` (more: 413 problem);
2. outside the allow-list (``PUBLIC_PATHS``, ``PUBLIC_PREFIXES``) the request must carry a valid token,
   ``Authorization: Bearer <token>`` or the dashboard's HttpOnly cookie; otherwise 401 (a browser asking
   for a page is sent to ``/login`` instead). Every failure reads the same: no hint whether the token was
   unknown, malformed or revoked;
3. as a fallback behind each route's own declaration (``scalar.api.access``), writes under the admin
   prefixes (``ADMIN_ONLY``: tokens, the audit log, spending and provider configuration) refuse a user
   token with 403; a user asking for a sub-resource of another tenant's job (``/jobs/{id}/logs``,
   ``/jobs/{id}/explain``...) gets the 404 of a job that does not exist;
4. each token may make ``rate_per_s`` requests a second (bursts of ``burst``); more: 429 with
   ``Retry-After``.

The caller (a :class:`Principal`) is then ``current_principal()`` for the rest of the request. Routes reach
the control plane through :class:`TenantScoped`, which passes the caller's tenant to the job calls: a
user sees, changes and cancels only its tenant's jobs (another tenant's job is 404, as if it did not
exist), and whose answers pass through one redaction step (``as_caller_sees``: other tenants' job ids,
names and limits hidden); an admin sees every tenant's. With authentication off (``scalar up --no-auth``, loopback only),
every request acts as an admin of tenant ``default``. See docs/security.md.
"""

from __future__ import annotations

import contextvars
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.requests import cookie_parser

from scalar.api.problems import ApiProblem, database_unavailable, problem, problem_response
from scalar.runtime.auth import AUTH_OFF, Principal
from scalar.runtime.step_metrics import rate_limited_counter
from scalar.wire.auth import AuditEntryOut, TokenCreated, TokenOut
from scalar.wire.jobs import FieldProblem

log = logging.getLogger("scalar.api")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

COOKIE_NAME = "scalar_token"
LOGIN_PATH = "/login"
MAX_BODY_BYTES = 1024 * 1024
# Node agents ship log chunks (256 KiB of output, larger once JSON-escaped): a larger limit there.
AGENT_PREFIX = "/agent/"
AGENT_MAX_BODY_BYTES = 8 * MAX_BODY_BYTES
RATE_PER_S = 50.0
RATE_BURST = 200.0

# Served without an API token: health, the API's description (/openapi.json, /docs and its assets: no
# data), the login page, the dashboard's static files, and the node agent's own routes (whose declarations
# check the agent's join, node or worker token: scalar.api.access). Each route also declares who may call
# it (scalar.api.access); this list is the fallback in front of them all.
PUBLIC_PATHS = frozenset({"/healthz", "/openapi.json", "/docs", LOGIN_PATH, "/logout", "/favicon.ico"})
PUBLIC_PREFIXES = ("/docs/", "/ui/static/", "/static/", AGENT_PREFIX)
# The fallback behind the routes' own declarations (scalar.api.access): (path prefix, methods or None for
# every method) that need an admin token whatever a route declares.
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ADMIN_ONLY: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("/tokens", None),
    ("/audit", None),
    ("/providers", WRITE_METHODS),
    ("/orders", WRITE_METHODS),
    ("/blocks", WRITE_METHODS),
    ("/buy", WRITE_METHODS),
    ("/sell", WRITE_METHODS),
    ("/release", WRITE_METHODS),
    ("/place", WRITE_METHODS),
    ("/budgets", WRITE_METHODS),
    ("/limits", WRITE_METHODS),
    ("/autoscaler", WRITE_METHODS),
    ("/agents", WRITE_METHODS),  # join tokens: a joined machine receives jobs and their secrets
)

_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "scalar_principal", default=None
)


def set_principal(principal: Principal) -> None:
    """Make ``principal`` the caller for the rest of the request (a route's declaration that checked a
    token itself: ``scalar.api.access``)."""
    _principal.set(principal)


def current_principal() -> Principal:
    """The caller of the request being served (``AUTH_OFF``'s admin outside a request)."""
    return _principal.get() or AUTH_OFF


def tenant_filter() -> str | None:
    """The tenant a job call is limited to: the caller's, or ``None`` (every tenant) for an admin."""
    principal = current_principal()
    return None if principal.is_admin else principal.tenant


def require_admin() -> Principal:
    """A dependency for routes only admins may call (403 otherwise)."""
    principal = current_principal()
    if not principal.is_admin:
        raise ApiProblem(403, "forbidden", "this action needs an admin token", [ADMIN_ONLY_PROBLEM])
    return principal


@runtime_checkable
class AuthPort(Protocol):
    """The control plane's token calls (``scalar.runtime.ControlPlane``)."""

    def authenticate(self, token: str) -> Principal | None: ...

    def create_token(
        self,
        tenant: str,
        role: str,
        name: str | None = None,
        *,
        actor: str = "(local)",
        expires_in: str | None = None,
    ) -> TokenCreated: ...

    def list_tokens(self) -> list[TokenOut]: ...

    def revoke_token(self, token_id: str, *, actor: str = "(local)") -> TokenOut: ...

    def audit(
        self,
        tenant: str | None = None,
        action: str | None = None,
        after_id: int = 0,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[AuditEntryOut]: ...


# ------------------------------------------------------------------------------------------ the problems

UNAUTHORIZED_PROBLEM = FieldProblem(
    field="Authorization",
    problem="is missing, or not a valid API token",
    fix="send 'Authorization: Bearer <token>' with a token from `scalar token create` (or the one "
    "`scalar up` printed and saved in its data dir), or sign in at /login",
)
ADMIN_ONLY_PROBLEM = FieldProblem(
    field="Authorization",
    problem="is a user token; this action is for admins",
    fix="ask an admin, or use a token created with `scalar token create --role admin`",
)


def _unauthorized(path: str) -> JSONResponse:
    body = problem(
        401, "unauthorized", "a valid API token is required", [UNAUTHORIZED_PROBLEM], instance=path
    )
    return problem_response(body, {"WWW-Authenticate": 'Bearer realm="scalar"'})


def _forbidden(path: str) -> JSONResponse:
    body = problem(403, "forbidden", "this action needs an admin token", [ADMIN_ONLY_PROBLEM], instance=path)
    return problem_response(body)


def _too_large(path: str, limit: int) -> JSONResponse:
    fix = f"send at most {limit} bytes; split the request"
    body = problem(
        413,
        "payload-too-large",
        f"the request body is larger than {limit} bytes",
        [FieldProblem(field="(body)", problem=f"is larger than {limit} bytes", fix=fix)],
        instance=path,
    )
    return problem_response(body)


def _no_such_job(path: str, job_id: str) -> JSONResponse:
    """Another tenant's job: the very answer ``GET /jobs/{id}`` gives for a job that does not exist."""
    body = problem(
        404,
        "not-found",
        f"no job with id {job_id!r}",
        [FieldProblem(field="job_id", problem=f"no job has id {job_id!r}", fix="list jobs with GET /jobs")],
        instance=path,
    )
    return problem_response(body)


def _rate_limited(path: str, retry_after_s: float) -> JSONResponse:
    wait = max(1, math.ceil(retry_after_s))
    body = problem(
        429,
        "rate-limited",
        f"too many requests with this token; retry in {wait} s",
        [FieldProblem(field="(token)", problem="made too many requests", fix=f"wait {wait} s and retry")],
        instance=path,
    )
    return problem_response(body, {"Retry-After": str(wait)})


# ------------------------------------------------------------------------------------------ rate limits


class RateLimiter:
    """A token bucket per key: ``rate_per_s`` refills a second, up to ``burst``. Thread-safe. This
    process's own buckets; ``SharedRateLimiter`` shares them with every API process on the database."""

    shared = False

    def __init__(
        self,
        rate_per_s: float,
        burst: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        name: str = "token",
    ) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.name = name  # the ``limit`` label of scalar_rate_limited_total
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """0 if the request may go, else the seconds until it may."""
        return self._refused(self._take_local(key, self._clock()))

    def _refused(self, wait: float) -> float:
        if wait > 0:
            rate_limited_counter().labels(self.name).inc()
        return wait

    async def atake(self, key: str) -> float:
        """``take`` from a coroutine (a shared limiter asks the database in a worker thread)."""
        return self.take(key)

    def _take_local(self, key: str, now: float) -> float:
        with self._lock:
            level, at = self._buckets.get(key, (self.burst, now))
            level = min(self.burst, level + max(0.0, now - at) * self.rate_per_s)
            if level < 1.0:
                self._buckets[key] = (level, now)
                return (1.0 - level) / self.rate_per_s
            self._buckets[key] = (level - 1.0, now)
            if len(self._buckets) > 100_000:  # forget idle keys (full buckets) now and then
                self._buckets = {k: v for k, v in self._buckets.items() if v[0] < self.burst}
            return 0.0

    def _set_local(self, key: str, level: float, now: float) -> None:
        with self._lock:
            self._buckets[key] = (level, now)


def lease_size(rate_per_s: float, burst: float, seconds: float) -> int:
    """Tokens one database write may take for a shared bucket: ``seconds`` of the rate, at most an eighth
    of the burst, at least one."""
    return max(1, min(int(burst // 8), math.ceil(rate_per_s * seconds)))


class SharedRateLimiter(RateLimiter):
    """Token buckets in the database (``store.take_token``, one short UPSERT), shared by every API
    process on it: N processes together allow ``rate_per_s`` per key, not N times it.

    This process's own bucket for the key is checked first. It never holds fewer tokens than the shared
    one would (every answer from the database sets it to the shared level, and both refill alike), so
    when it refuses the database would too: a flood is refused without a write, and each process asks
    the database at most about once per token refilled. When the database cannot answer, the local
    bucket alone decides (per process, as before) rather than failing the request. Times are the wall
    clock's (epoch seconds): processes on several hosts compare them, so keep their clocks in sync.

    Tokens come from the database in leases: one write takes up to ``lease`` tokens (a quarter of a
    second of the rate, at most an eighth of the burst, at least one), and this process spends the rest
    without asking again, so a busy key costs one write per ``lease`` requests instead of one each (on
    SQLite every write takes the database file's lock, which the controller's steps and submissions
    need too). A lease only takes tokens the shared bucket holds: N processes together still never grant
    more than one bucket allows. Unspent leased tokens are the price: another process may be refused up
    to ``lease`` tokens early for each process holding some. Strict limits (a few tokens a second, such
    as failed logins) get a lease of one: the database decides every request, as before."""

    shared = True
    FORGET_EVERY_S = 60.0
    LEASE_S = 0.25
    MAX_LEASED_KEYS = 100_000

    def __init__(
        self,
        store: Any,
        namespace: str,
        rate_per_s: float,
        burst: float,
        clock: Callable[[], float] = time.time,
        *,
        lease: int | None = None,
    ) -> None:
        super().__init__(rate_per_s, burst, clock, name=namespace)
        self.store = store
        self.namespace = namespace
        self.lease = lease if lease is not None else lease_size(rate_per_s, burst, self.LEASE_S)
        if self.lease < 1:
            raise ValueError(f"lease must be at least 1 token, got {self.lease}")
        self._leased: dict[str, int] = {}  # tokens taken from the database, not spent yet
        self._forgot_at = clock()

    def _spend_leased(self, key: str) -> bool:
        with self._lock:
            held = self._leased.get(key, 0)
            if held <= 0:
                return False
            if held == 1:
                del self._leased[key]
            else:
                self._leased[key] = held - 1
            return True

    def take(self, key: str) -> float:
        if self._spend_leased(key):
            return 0.0
        now = self._clock()
        wait = self._take_local(key, now)
        if wait > 0:
            return self._refused(wait)
        try:
            taken, level = self.store.take_token(
                f"{self.namespace}:{key}", self.rate_per_s, self.burst, now, self.lease
            )
        except Exception:
            log.warning("rate limit %s: the database did not answer; this process's bucket decides", key)
            return 0.0
        self._set_local(key, level, now)
        if taken > 1:
            with self._lock:
                if len(self._leased) >= self.MAX_LEASED_KEYS:  # dropping leases only refuses sooner
                    self._leased.clear()
                self._leased[key] = self._leased.get(key, 0) + taken - 1
        if now - self._forgot_at > self.FORGET_EVERY_S:
            self._forget(now)
        if taken:
            return 0.0
        return self._refused(max(1e-6, (1.0 - level) / self.rate_per_s))

    async def atake(self, key: str) -> float:
        if self._spend_leased(key):  # a leased token: no thread, no write
            return 0.0
        now = self._clock()
        with self._lock:  # refused locally: answer without a thread or a write
            level, at = self._buckets.get(key, (self.burst, now))
            local = min(self.burst, level + max(0.0, now - at) * self.rate_per_s)
        if local < 1.0:
            return self.take(key)
        return await anyio.to_thread.run_sync(self.take, key)

    def _forget(self, now: float) -> None:
        self._forgot_at = now
        full_after = self.burst / self.rate_per_s if self.rate_per_s > 0 else 3600.0
        try:
            self.store.forget_tokens(self.namespace + ":", now - full_after - 1.0)
        except Exception:
            log.warning("rate limit %s: could not forget idle buckets", self.namespace)


# ------------------------------------------------------------------------------------------ middleware


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def is_admin_only(method: str, path: str) -> bool:
    for prefix, methods in ADMIN_ONLY:
        if (path == prefix or path.startswith(prefix + "/")) and (methods is None or method in methods):
            return True
    return False


def job_of_subresource(path: str) -> str | None:
    """The job id of ``/jobs/{id}/<anything>`` (explain, logs...): checked for the caller's tenant before
    any route runs, whoever wrote the route. ``/jobs/{id}`` itself goes through ``TenantScoped``."""
    parts = path.split("/", 3)
    if len(parts) == 4 and parts[0] == "" and parts[1] == "jobs" and parts[2] and parts[3]:
        return parts[2]
    return None


def token_of(headers: dict[str, str]) -> str | None:
    """The bearer token of ``Authorization``, else the dashboard's cookie."""
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    # Starlette's parser (what ``request.cookies`` reads): lenient, so a malformed header is no cookie
    return cookie_parser(headers.get("cookie", "")).get(COOKIE_NAME) or None


class SecurityMiddleware:
    """Body size limit, authentication, admin-only routes and rate limits for every HTTP request."""

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        *,
        authenticate: Callable[[str], Principal | None] | None,
        max_body_bytes: int = MAX_BODY_BYTES,
        limiter: RateLimiter | None = None,
        owns_job: Callable[[str, str], bool] | None = None,
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.owns_job = owns_job
        self.max_body_bytes = max_body_bytes
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        method: str = scope.get("method", "GET")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        limit = AGENT_MAX_BODY_BYTES if path.startswith(AGENT_PREFIX) else self.max_body_bytes
        body = await self._read_body(headers, receive, limit)
        if body is None:
            await _too_large(path, limit)(scope, receive, send)
            return
        principal = AUTH_OFF
        if self.authenticate is not None and not is_public(path):
            token = token_of(headers)
            found = None
            if token is not None:
                try:
                    found = await anyio.to_thread.run_sync(self.authenticate, token)
                except Exception as exc:
                    unavailable = database_unavailable(exc, path)
                    if unavailable is None:
                        raise
                    await unavailable(scope, receive, send)
                    return
            if found is None:
                await self._refuse(scope, receive, send, method, path, headers)
                return
            principal = found
            if self.limiter is not None:
                wait = await self.limiter.atake(principal.token_id)
                if wait > 0:
                    await _rate_limited(path, wait)(scope, receive, send)
                    return
        if is_admin_only(method, path) and not principal.is_admin:
            await _forbidden(path)(scope, receive, send)
            return
        job_id = job_of_subresource(path)
        if job_id is not None and not principal.is_admin and self.owns_job is not None:
            try:
                owned = await anyio.to_thread.run_sync(self.owns_job, job_id, principal.tenant)
            except Exception as exc:
                unavailable = database_unavailable(exc, path)
                if unavailable is None:
                    raise
                await unavailable(scope, receive, send)
                return
            if not owned:
                await _no_such_job(path, job_id)(scope, receive, send)
                return
        scope.setdefault("state", {})["principal"] = principal
        reset = _principal.set(principal)
        try:
            await self.app(scope, _replay(body, receive), send)
        finally:
            _principal.reset(reset)

    async def _read_body(self, headers: dict[str, str], receive: Receive, limit: int) -> bytes | None:
        """The whole body, or ``None`` when it is (or says it is) larger than ``limit``."""
        declared = headers.get("content-length")
        if declared is not None:
            try:
                if int(declared) > limit:
                    return None
            except ValueError:
                return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, method: str, path: str, headers: dict[str, str]
    ) -> None:
        wants_page = method == "GET" and "text/html" in headers.get("accept", "")
        if wants_page:  # a browser: to the login page, and back here afterwards
            query = scope.get("query_string", b"").decode("latin-1")
            target = path + (f"?{query}" if query else "")
            location = f"{LOGIN_PATH}?next={quote(target, safe='')}"
            response = JSONResponse({"detail": "sign in"}, status_code=303, headers={"Location": location})
            await response(scope, receive, send)
            return
        await _unauthorized(path)(scope, receive, send)


def _replay(body: bytes, upstream: Receive) -> Receive:
    """The body read already, as one message; then the server's own messages (a disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await upstream()

    return receive


# ------------------------------------------------------------------------------------------- install


def install_security(
    app: FastAPI,
    control_plane: Any,
    *,
    auth_required: bool | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    rate_per_s: float = RATE_PER_S,
    burst: float = RATE_BURST,
    limiter: RateLimiter | None = None,
) -> Any:
    """Add the middleware, the token, audit and login routes; returns the control plane the routes should
    use (tenant-scoped when it has tokens). ``auth_required`` defaults to the control plane's
    ``settings.auth_required``; a control plane without token calls (a test fake) runs without. ``limiter``:
    the per-token limiter (default: this process's own, ``rate_per_s`` and ``burst``)."""
    port = control_plane if isinstance(control_plane, AuthPort) else None
    if auth_required is None:
        settings = getattr(control_plane, "settings", None)
        auth_required = port is not None and bool(getattr(settings, "auth_required", True))
    if auth_required and port is None:
        raise ValueError("authentication needs a control plane with tokens (authenticate, create_token...)")
    from scalar.api.access import PUBLIC
    from scalar.api.routes_auth import auth_router
    from scalar.api.tenancy import scoped_class
    from scalar.web.login import login_router

    limiter = limiter or RateLimiter(rate_per_s, burst)
    owns_job = None
    if port is not None and auth_required:
        get_job = control_plane.get_job

        def owns_job(job_id: str, tenant: str) -> bool:
            return get_job(job_id, tenant=tenant) is not None

    app.add_middleware(
        SecurityMiddleware,
        authenticate=port.authenticate if auth_required and port is not None else None,
        max_body_bytes=max_body_bytes,
        limiter=limiter,
        owns_job=owns_job,
    )
    app.state.rate_limiter = limiter  # tests and operators may tune it (rate_per_s, burst)
    # the routes' declarations (scalar.api.access) check a token themselves where the middleware did not
    app.state.authenticate = port.authenticate if auth_required and port is not None else None
    app.include_router(auth_router(port, auth_required))
    app.include_router(
        login_router(port.authenticate if auth_required and port is not None else None), dependencies=[PUBLIC]
    )
    app.state.auth_required = auth_required
    if port is None:
        return control_plane
    return scoped_class(control_plane)(control_plane)


def request_principal(request: Request) -> Principal:
    """The caller of ``request`` (set by the middleware)."""
    principal = request.scope.get("state", {}).get("principal")
    return principal if isinstance(principal, Principal) else current_principal()
