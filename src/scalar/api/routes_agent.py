"""``/agent/v1/...``: the node agent's protocol (docs/agent.md), and ``GET /jobs/{id}/logs``.

``POST /agents/join-tokens`` and ``POST /agents/{node_id}/remove`` are for admins, ``GET /agents`` and a
job's logs for any API token. The agent always calls the controller: it registers with a one-time join
token, then sends heartbeats (the reply is the desired state) and its assignments' output in chunks by
byte offset. Agents authenticate with their join token, then their node token (in the body), not with API
tokens; each route declares which (``scalar.api.access``: the node token is checked by a read before any
write transaction, then rate-limited per node; workers' tokens likewise per worker).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol, runtime_checkable

from fastapi import APIRouter, Path, Query, Request
from starlette.concurrency import run_in_threadpool

from scalar.api.access import ADMIN, USER, agent_access, worker_access
from scalar.api.auth import RateLimiter, require_admin
from scalar.api.problems import ApiProblem, ProblemRoute
from scalar.runtime.agents import AgentError, AgentService
from scalar.runtime.endpoints.agent_workers import AgentWorkerError, AgentWorkerService
from scalar.wire.agent import (
    AgentsOut,
    Heartbeat,
    HeartbeatReply,
    JobLogsOut,
    JoinTokenOut,
    JoinTokenRequest,
    LogChunk,
    LogChunkReply,
    NodeRemoveOut,
    NodeRemoveRequest,
    RegisterReply,
    RegisterRequest,
)
from scalar.wire.endpoint_workers import FailedCall, NextCall, NextReply, ResultCall, ResultReply
from scalar.wire.jobs import FieldProblem, ProblemDetails

_PROBLEM = {"model": ProblemDetails, "content": {"application/problem+json": {}}}
MAX_ID_LENGTH = 200
AGENT_PATHS = ("/agent/v1/register", "/agent/v1/heartbeat", "/agent/v1/logs")
"""Routes an agent calls with its join or node token (no API token)."""
WORKER_PREFIX = "/agent/v1/endpoints/{endpoint_id}/workers/{worker_id}"
"""An endpoint worker run by an agent calls under here with its worker token (docs/endpoints.md)."""
POLL_EVERY_S = 0.2


@runtime_checkable
class AgentsPort(Protocol):
    agents: AgentService


def _problem(err: AgentError, field: str) -> ApiProblem:
    return ApiProblem(
        err.status, err.code, err.message, [FieldProblem(field=field, problem=err.message, fix=err.fix)]
    )


def agent_router(
    control_plane: AgentsPort, limiter: RateLimiter | None = None, failures: RateLimiter | None = None
) -> APIRouter:
    """The agents' routes. ``limiter``: the per-node and per-worker rate limit (default: 50/s, bursts of
    200); ``failures``: refused credentials per client address (default: 2/s, bursts of 20). Bogus
    credentials are refused by a read before any write transaction (``scalar.api.access``)."""
    router = APIRouter(route_class=ProblemRoute, tags=["agents"])
    service = control_plane.agents
    workers = AgentWorkerService(service.store, service.clock, service.secret_box)

    def worker_token_valid(endpoint_id: str, worker_id: str, token: str) -> bool:
        try:
            workers.authenticate(endpoint_id, worker_id, token)
        except AgentWorkerError:
            return False
        return True

    joining, node = agent_access(service.node_token_valid, limiter=limiter, failures=failures)
    worker = worker_access(worker_token_valid, limiter=limiter, failures=failures)

    @router.post(
        "/agents/join-tokens",
        status_code=201,
        response_model=JoinTokenOut,
        summary="Create a one-time join token for a node agent (admin)",
        dependencies=[ADMIN],
    )
    def create_join_token(body: JoinTokenRequest) -> Any:
        """Without ``node_id`` the host that registers with it becomes a user-owned, fixed-capacity block of
        ``provider``; with one, the agent is attached to that node Scalar bought."""
        return service.create_join_token(body)

    @router.post(
        "/agents/{node_id}/remove",
        status_code=202,
        response_model=NodeRemoveOut,
        responses={
            403: {**_PROBLEM, "description": "an admin token is needed"},
            404: {**_PROBLEM, "description": "no such node"},
            409: {**_PROBLEM, "description": "a node Scalar bought: release its block instead"},
        },
        summary="Remove a user-owned host (admin): drain it, end its block, revoke its agent's token",
        dependencies=[ADMIN],
    )
    def remove_node(
        body: NodeRemoveRequest | None = None,
        node_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
    ) -> Any:
        """Nothing new is placed on the node; its running jobs finish (``force``: are requeued now, as when
        a node is lost, their old attempts fenced). Once it runs nothing its block ends (no further cost) and
        its agent's next heartbeat is refused with 410, on which the agent stops. Audit-logged."""
        actor = require_admin().token_id
        force = body.force if body is not None else False
        try:
            return service.remove_node(node_id, force=force, actor=actor)
        except AgentError as err:
            raise _problem(err, "node_id") from None

    @router.post(
        "/agent/v1/register",
        response_model=RegisterReply,
        responses={401: _PROBLEM, 409: {**_PROBLEM, "description": "incompatible agent version"}},
        summary="An agent registers its host",
        dependencies=[joining],
    )
    def register(body: RegisterRequest) -> Any:
        try:
            return service.register(body)
        except AgentError as err:
            raise _problem(err, "version" if err.code == "agent-version" else "join_token") from None

    @router.post(
        "/agent/v1/heartbeat",
        response_model=HeartbeatReply,
        responses={401: _PROBLEM},
        summary="An agent reports its assignments; the reply is the desired state",
        dependencies=[node],
    )
    def heartbeat(body: Heartbeat) -> Any:
        try:
            return service.heartbeat(body)
        except AgentError as err:
            raise _problem(err, "node_token") from None

    @router.post(
        "/agent/v1/logs",
        response_model=LogChunkReply,
        responses={401: _PROBLEM, 404: _PROBLEM, 409: {**_PROBLEM, "description": "a gap: resend from"}},
        summary="An agent ships a chunk of an assignment's output",
        dependencies=[node],
    )
    def ship_log(body: LogChunk) -> Any:
        try:
            return LogChunkReply(next_offset=service.ship_log(body))
        except AgentError as err:
            raise _problem(err, "offset" if err.code == "log-gap" else "assignment_id") from None

    @router.post(
        WORKER_PREFIX + "/next",
        response_model=NextReply,
        responses={401: _PROBLEM, 404: _PROBLEM},
        summary="An endpoint worker run by an agent waits for its next request (long poll)",
        dependencies=[worker],
    )
    async def worker_next(
        request: Request,
        body: NextCall,
        endpoint_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
        worker_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
    ) -> Any:
        """Answers at once with the request delivered to this worker, or ``stop`` when the worker or its
        attempt is no longer current; otherwise waits up to ``wait_s`` and answers ``{}``."""
        deadline = time.monotonic() + body.wait_s
        while True:
            try:
                found = await run_in_threadpool(
                    workers.take, endpoint_id, worker_id, body.token, body.attempt
                )
            except AgentWorkerError as err:
                raise _problem(err, "token") from None
            if (
                found.stop
                or found.request is not None
                or time.monotonic() >= deadline
                or await request.is_disconnected()
            ):
                return found
            await asyncio.sleep(POLL_EVERY_S)

    @router.post(
        WORKER_PREFIX + "/result",
        response_model=ResultReply,
        responses={401: _PROBLEM, 404: _PROBLEM},
        summary="An endpoint worker run by an agent posts a request's output or error",
        dependencies=[worker],
    )
    def worker_result(
        body: ResultCall,
        endpoint_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
        worker_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
    ) -> Any:
        """Recorded only if the request is still in progress on this worker at this delivery and the call
        comes from the job's current attempt; otherwise ``accepted: false`` with why (fenced)."""
        try:
            accepted, reason = workers.result(
                endpoint_id,
                worker_id,
                body.token,
                body.attempt,
                body.request_id,
                body.delivery,
                body.output,
                body.error,
                stream=body.stream,
                final=body.final,
                stop_pod=body.stop_pod,
            )
        except AgentWorkerError as err:
            raise _problem(err, "token") from None
        return ResultReply(accepted=accepted, reason=reason)

    @router.post(
        WORKER_PREFIX + "/failed",
        response_model=ResultReply,
        responses={401: _PROBLEM, 404: _PROBLEM},
        summary="An endpoint worker run by an agent could not load its handler",
        dependencies=[worker],
    )
    def worker_failed(
        body: FailedCall,
        endpoint_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
        worker_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
    ) -> Any:
        try:
            reason = workers.failed(endpoint_id, worker_id, body.token, body.attempt, body.error)
        except AgentWorkerError as err:
            raise _problem(err, "token") from None
        return ResultReply(accepted=not reason.startswith("ignored"), reason=reason)

    @router.get(
        "/agents",
        response_model=AgentsOut,
        summary="Registered agents and their leases",
        dependencies=[USER],
    )
    def list_agents() -> Any:
        return AgentsOut(agents=service.agents())

    @router.get(
        "/jobs/{job_id}/logs",
        response_model=JobLogsOut,
        responses={404: {**_PROBLEM, "description": "no such job"}},
        summary="A job's output (its latest attempt unless attempt is given), from a byte offset",
        dependencies=[USER],
    )
    def job_logs(
        job_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH),
        offset: int = Query(0, ge=0, le=2**62, description="bytes already read"),
        attempt: int | None = Query(
            None, ge=1, le=1_000_000, description="which attempt (default: the latest)"
        ),
    ) -> Any:
        logs = service.job_logs(job_id, offset, attempt)
        if logs is None:
            raise ApiProblem(
                404,
                "not-found",
                f"no job with id {job_id!r}",
                [
                    FieldProblem(
                        field="job_id", problem=f"no job has id {job_id!r}", fix="list jobs with GET /jobs"
                    )
                ],
            )
        return logs

    return router
