"""RunPod's worker protocol, so an unmodified worker (``runpod.serverless.start({"handler": ...})``) serves
a Scalar endpoint (docs/endpoints.md, "Coming from RunPod").

The worker runs as the endpoint's worker job on a node agent; the launcher (``scalar.agent.endpoint_worker
--exec``) points its ``RUNPOD_WEBHOOK_*`` variables here, under ``/agent/v1/runpod/{endpoint_id}``, with
the job's attempt in the query. Each route maps onto the Scalar worker path (``AgentWorkerService``):

- ``GET job-take/{worker}`` (and ``job-take-batch/{worker}?batch_size=``): a long poll, answered within
  ``TAKE_WAIT_S`` (20 s): 200 with ``{id, input}`` (the batch form: a list) for the request the endpoint
  tick delivered to this worker, else 204. The first call marks the worker ready (its cold start is the
  real one). A request is handed out only on a poll whose client is still connected; while the worker says
  ``job_in_progress=0`` a request it was handed before and never finished is handed again (the worker lost
  it), with ``job_in_progress=1`` not (it is running it);
- ``POST job-done/{worker}/{request}``: the SDK's form-encoded JSON (``output``, ``error``, both,
  ``stopPod``), with ``X-Request-ID``: the result, fenced by worker, delivery and attempt; ``stopPod``
  (``refresh_worker``) replaces the worker after it; ``{"status": "IN_PROGRESS"}`` (a progress update) is
  accepted and not stored;
- ``POST job-stream/{worker}/{request}``: one streamed chunk (``{"output": ...}``) for ``/v2/.../stream``;
- ``GET ping/{worker}?job_id=a,b&runpod_version=``: liveness (marks the worker ready like a take);
- ``GET job-stop/{worker}``: a long poll: ``{"jobsToStop": [...]}`` for requests of this worker cancelled
  or timed out, each once, else 204.

Credential: the worker's own token (``RUNPOD_AI_API_KEY``, the worker job's sealed ``SCALAR_WORKER_TOKEN``),
sent raw in ``Authorization`` as RunPod's SDK does (``Bearer <token>`` is accepted too), accepted on these
routes only and only for this worker. Errors are problem documents.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from fastapi.security import APIKeyHeader

from scalar.api.access import (
    ACCESS_ATTRIBUTE,
    AGENT_BURST,
    AGENT_RATE_PER_S,
    FAILURE_BURST,
    FAILURE_DELAY_S,
    FAILURE_RATE_PER_S,
    Access,
    rate_limited,
)
from scalar.api.auth import RateLimiter
from scalar.api.problems import ApiProblem, ProblemRoute
from scalar.runtime.agents import AgentError
from scalar.runtime.endpoints.agent_workers import AgentWorkerError, AgentWorkerService
from scalar.wire.endpoint_workers import MAX_ERROR_CHARS
from scalar.wire.endpoints_api import MAX_ID_LENGTH
from scalar.wire.jobs import FieldProblem, ProblemDetails

RUNPOD_WORKER_PREFIX = "/agent/v1/runpod/{endpoint_id}"
TAKE_WAIT_S = 20.0
STOP_WAIT_S = 20.0
POLL_EVERY_S = 0.2
STOP_WINDOW_S = 600.0
MAX_WORKERS_REMEMBERED = 10_000  # a cancellation older than this is not signalled any more
_PROBLEM = {"model": ProblemDetails, "content": {"application/problem+json": {}}}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {**_PROBLEM, "description": "not this worker's key"},
    404: {**_PROBLEM, "description": "no such worker of this endpoint"},
    429: {**_PROBLEM, "description": "too many calls from this worker, or refused keys from this address"},
}

worker_key = APIKeyHeader(
    name="Authorization",
    scheme_name="RunPodWorkerKey",
    description="the worker's RUNPOD_AI_API_KEY, raw (as RunPod's SDK sends it) or as Bearer; "
    "valid for this worker's calls only",
    auto_error=False,
)


def _no_key(problem: str) -> ApiProblem:
    return ApiProblem(
        401,
        "worker-token-invalid",
        "not this worker's key",
        [
            FieldProblem(
                field="Authorization",
                problem=problem,
                fix="send the worker's RUNPOD_AI_API_KEY (set by Scalar for the worker's job)",
            )
        ],
    )


def _checked_key(workers: AgentWorkerService, limiter: RateLimiter, failures: RateLimiter) -> Any:
    """The declaration of the worker protocol's routes (``Access.WORKER``): the worker's key, raw or as
    Bearer, checked against that worker by a read before any route runs (any failure is 401, and a client
    looping on bad keys is held back), then rate-limited per worker."""

    async def worker_key_checked(request: Request, raw: Annotated[str | None, Depends(worker_key)]) -> str:
        token = (raw or "").strip()
        if token.lower().startswith("bearer "):
            token = token[7:].strip()
        endpoint_id = str(request.path_params.get("endpoint_id", ""))
        worker_id = str(request.path_params.get("worker_id", ""))
        try:
            if not token:
                raise _no_key("is missing")
            await run_in_threadpool(workers.authenticate, endpoint_id, worker_id, token)
        except (AgentWorkerError, ApiProblem):
            client = request.client.host if request.client is not None else "?"
            wait = await failures.atake("worker-failure:" + client)
            if wait > 0:
                await asyncio.sleep(FAILURE_DELAY_S)
                raise rate_limited(wait, "address") from None
            raise _no_key("is not the key of this endpoint's worker") from None
        wait = await limiter.atake(f"worker:{endpoint_id}/{worker_id}")
        if wait > 0:
            raise rate_limited(wait, "worker")
        return token

    setattr(worker_key_checked, ACCESS_ATTRIBUTE, Access.WORKER)  # read by the route walk (api/access.py)
    return Depends(worker_key_checked)


def _problem(err: AgentError) -> ApiProblem:
    return ApiProblem(
        err.status,
        err.code,
        err.message,
        [FieldProblem(field="Authorization", problem=err.message, fix=err.fix)],
    )


def _id() -> Any:
    return Path(min_length=1, max_length=MAX_ID_LENGTH)


def runpod_worker_router(
    workers: AgentWorkerService, limiter: RateLimiter | None = None, failures: RateLimiter | None = None
) -> APIRouter:
    """The worker protocol's routes. ``limiter``: calls per worker (the agents' limiter: 50/s, bursts of
    200); ``failures``: refused keys per client address (2/s, bursts of 20), shared with the agents' routes."""
    router = APIRouter(prefix=RUNPOD_WORKER_PREFIX, route_class=ProblemRoute, tags=["runpod worker protocol"])
    checked_key = _checked_key(
        workers,
        limiter or RateLimiter(AGENT_RATE_PER_S, AGENT_BURST, name="agent"),
        failures or RateLimiter(FAILURE_RATE_PER_S, FAILURE_BURST, name="failure"),
    )
    handed: dict[str, set[tuple[str, int]]] = {}  # per worker: (request, delivery) handed out
    signalled: dict[str, set[str]] = {}  # per worker: requests already sent on job-stop

    def forget_old() -> None:
        """Bounded memory: past ``MAX_WORKERS_REMEMBERED`` workers, start over (a worker then gets an
        unfinished request again on a ``job_in_progress=1`` poll, and a stop signal once more)."""
        for memory in (handed, signalled):
            if len(memory) > MAX_WORKERS_REMEMBERED:
                memory.clear()

    async def take(
        request: Request, endpoint_id: str, worker_id: str, token: str, attempt: int, in_progress: bool
    ) -> dict[str, Any] | None:
        deadline = time.monotonic() + TAKE_WAIT_S
        forget_old()
        mine = handed.setdefault(worker_id, set())
        while True:
            skip = frozenset(mine) if in_progress else frozenset()
            try:
                found = await run_in_threadpool(workers.take, endpoint_id, worker_id, token, attempt, skip)
            except AgentWorkerError as err:
                raise _problem(err) from None
            req = found.request
            if await request.is_disconnected():
                return None  # an abandoned poll hands nothing out: the request waits for the next one
            if req is not None:
                mine.add((req.id, req.delivery))
                return {"id": req.id, "input": req.input}
            if found.stop or time.monotonic() >= deadline:
                return None
            await asyncio.sleep(POLL_EVERY_S)

    @router.get(
        "/job-take/{worker_id}",
        responses={**_RESPONSES, 204: {"description": "no request within 20 s"}},
        summary="A RunPod worker takes its next request (long poll)",
    )
    async def job_take(
        request: Request,
        endpoint_id: str = _id(),
        worker_id: str = _id(),
        attempt: int = Query(1, ge=1, le=1_000_000),
        job_in_progress: int = Query(0, ge=0, le=1),
        token: str = checked_key,
    ) -> Any:
        job = await take(request, endpoint_id, worker_id, token, attempt, bool(job_in_progress))
        return Response(status_code=204) if job is None else job

    @router.get(
        "/job-take-batch/{worker_id}",
        responses={**_RESPONSES, 204: {"description": "no request within 20 s"}},
        summary="A RunPod worker takes up to batch_size requests (long poll)",
    )
    async def job_take_batch(
        request: Request,
        endpoint_id: str = _id(),
        worker_id: str = _id(),
        attempt: int = Query(1, ge=1, le=1_000_000),
        batch_size: int = Query(1, ge=1, le=1000),
        job_in_progress: int = Query(0, ge=0, le=1),
        token: str = checked_key,
    ) -> Any:
        """A worker serves one request at a time here (each worker is one slot of the endpoint), so the
        list holds at most one request whatever ``batch_size`` is."""
        job = await take(request, endpoint_id, worker_id, token, attempt, bool(job_in_progress))
        return Response(status_code=204) if job is None else [job]

    async def _body(request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            data = json.loads(raw or b"{}")
        except ValueError as exc:
            raise ApiProblem(
                400,
                "invalid-request",
                f"the body is not JSON ({exc})",
                [FieldProblem(field="(body)", problem="is not JSON", fix="send the job result as JSON")],
            ) from None
        if not isinstance(data, dict):
            raise ApiProblem(
                422,
                "invalid-request",
                "(body): must be a JSON object",
                [FieldProblem(field="(body)", problem="must be a JSON object", fix='send {"output": ...}')],
            )
        return data

    def _check_request_header(header: str | None, request_id: str) -> None:
        if header is not None and header != request_id:
            raise ApiProblem(
                422,
                "invalid-request",
                f"X-Request-ID {header!r} is not the request {request_id!r} of the URL",
                [
                    FieldProblem(
                        field="X-Request-ID", problem="disagrees with the URL", fix="send the job's id"
                    )
                ],
            )

    @router.post(
        "/job-done/{worker_id}/{request_id}",
        responses=_RESPONSES,
        summary="A RunPod worker posts a request's result (output, error, stopPod)",
    )
    async def job_done(
        request: Request,
        endpoint_id: str = _id(),
        worker_id: str = _id(),
        request_id: str = _id(),
        attempt: int = Query(1, ge=1, le=1_000_000),
        isStream: str = Query("false", pattern="^(true|false)$"),
        x_request_id: str | None = Header(None, max_length=MAX_ID_LENGTH),
        token: str = checked_key,
    ) -> Any:
        _check_request_header(x_request_id, request_id)
        data = await _body(request)
        if data.get("status") == "IN_PROGRESS":  # a progress update (runpod.serverless.progress_update)
            return {"accepted": True, "reason": "progress update (not stored)"}
        error = data.get("error")
        if error is not None and not isinstance(error, str):
            error = json.dumps(error, default=str)
        if error is not None:
            error = error[:MAX_ERROR_CHARS]
        try:
            accepted, reason = await run_in_threadpool(
                workers.result,
                endpoint_id,
                worker_id,
                token,
                attempt,
                request_id,
                None,  # the delivery the request is at, if it is on this worker
                data.get("output"),
                error or None,
                stop_pod=bool(data.get("stopPod")),
            )
        except AgentWorkerError as err:
            raise _problem(err) from None
        mine = handed.get(worker_id, set())
        mine.difference_update({h for h in mine if h[0] == request_id})
        return {"accepted": accepted, "reason": reason}

    @router.post(
        "/job-stream/{worker_id}/{request_id}",
        responses=_RESPONSES,
        summary="A RunPod worker posts one streamed chunk of a request",
    )
    async def job_stream(
        request: Request,
        endpoint_id: str = _id(),
        worker_id: str = _id(),
        request_id: str = _id(),
        attempt: int = Query(1, ge=1, le=1_000_000),
        x_request_id: str | None = Header(None, max_length=MAX_ID_LENGTH),
        token: str = checked_key,
    ) -> Any:
        _check_request_header(x_request_id, request_id)
        data = await _body(request)
        try:
            accepted, reason = await run_in_threadpool(
                workers.result,
                endpoint_id,
                worker_id,
                token,
                attempt,
                request_id,
                None,
                None,
                None,
                stream=[data.get("output")],
                final=False,
            )
        except AgentWorkerError as err:
            raise _problem(err) from None
        return {"accepted": accepted, "reason": reason}

    @router.get("/ping/{worker_id}", responses=_RESPONSES, summary="A RunPod worker's heartbeat")
    async def ping(
        endpoint_id: str = _id(),
        worker_id: str = _id(),
        attempt: int = Query(1, ge=1, le=1_000_000),
        # the worker's requests in progress, comma-separated (it serves one here); bounded so that the
        # URL, percent-encoded, stays within what the HTTP server reads (a longer one is its 400, no route's)
        job_id: str | None = Query(None, max_length=4096),
        runpod_version: str | None = Query(None, max_length=64),
        token: str = checked_key,
    ) -> Any:
        try:
            found = await run_in_threadpool(workers.take, endpoint_id, worker_id, token, attempt, frozenset())
        except AgentWorkerError as err:
            raise _problem(err) from None
        return {"ok": not found.stop, "reason": found.reason}

    @router.get(
        "/job-stop/{worker_id}",
        responses={**_RESPONSES, 204: {"description": "nothing to stop within 20 s"}},
        summary="A RunPod worker learns which of its requests to stop (long poll)",
    )
    async def job_stop(
        request: Request,
        endpoint_id: str = _id(),
        worker_id: str = _id(),
        attempt: int = Query(1, ge=1, le=1_000_000),
        job_in_progress: int | None = Query(None, ge=0, le=1),
        token: str = checked_key,
    ) -> Any:
        deadline = time.monotonic() + STOP_WAIT_S
        forget_old()
        sent = signalled.setdefault(worker_id, set())
        while True:
            since = workers.clock() - timedelta(seconds=STOP_WINDOW_S)
            try:
                ids = await run_in_threadpool(
                    workers.stopped_requests, endpoint_id, worker_id, token, attempt, since
                )
            except AgentWorkerError as err:
                raise _problem(err) from None
            new = [i for i in ids if i not in sent]
            if new and not await request.is_disconnected():
                sent.update(new)
                return {"jobsToStop": new}
            if time.monotonic() >= deadline or await request.is_disconnected():
                return Response(status_code=204)
            await asyncio.sleep(POLL_EVERY_S)

    return router
