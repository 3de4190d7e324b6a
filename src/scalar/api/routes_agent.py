"""``/agent/v1/...``: the node agent's protocol (docs/agent.md), and ``GET /jobs/{id}/logs``.

``POST /agents/join-tokens`` and ``GET /agents`` are for users (API token, outside the agent prefix).
The agent always calls the controller: it registers with a one-time join token, then sends heartbeats
(the reply is the desired state) and its assignments' output in chunks by byte offset. Agents
authenticate with their join token, then their node token (in the body), not with API tokens.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from fastapi import APIRouter, Path, Query

from scalar.api.problems import ApiProblem, ProblemRoute
from scalar.runtime.agents import AgentError, AgentService
from scalar.wire.agent import (
    Heartbeat,
    HeartbeatReply,
    JobLogsOut,
    JoinTokenOut,
    JoinTokenRequest,
    LogChunk,
    LogChunkReply,
    RegisterReply,
    RegisterRequest,
)
from scalar.wire.jobs import FieldProblem, ProblemDetails

_PROBLEM = {"model": ProblemDetails, "content": {"application/problem+json": {}}}
MAX_ID_LENGTH = 200
AGENT_PATHS = ("/agent/v1/register", "/agent/v1/heartbeat", "/agent/v1/logs")
"""Routes an agent calls with its join or node token (no API token)."""


@runtime_checkable
class AgentsPort(Protocol):
    agents: AgentService


def _problem(err: AgentError, field: str) -> ApiProblem:
    return ApiProblem(
        err.status, err.code, err.message, [FieldProblem(field=field, problem=err.message, fix=err.fix)]
    )


def agent_router(control_plane: AgentsPort) -> APIRouter:
    router = APIRouter(route_class=ProblemRoute, tags=["agents"])
    service = control_plane.agents

    @router.post(
        "/agents/join-tokens",
        status_code=201,
        response_model=JoinTokenOut,
        summary="Create a one-time join token for a node agent",
    )
    def create_join_token(body: JoinTokenRequest) -> Any:
        """Without ``node_id`` the host that registers with it becomes a user-owned, fixed-capacity block of
        ``provider``; with one, the agent is attached to that node Scalar bought."""
        return service.create_join_token(body)

    @router.post(
        "/agent/v1/register",
        response_model=RegisterReply,
        responses={401: _PROBLEM, 409: {**_PROBLEM, "description": "incompatible agent version"}},
        summary="An agent registers its host",
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
    )
    def ship_log(body: LogChunk) -> Any:
        try:
            return LogChunkReply(next_offset=service.ship_log(body))
        except AgentError as err:
            raise _problem(err, "offset" if err.code == "log-gap" else "assignment_id") from None

    @router.get("/agents", summary="Registered agents and their leases")
    def list_agents() -> Any:
        return {"agents": service.agents()}

    @router.get(
        "/jobs/{job_id}/logs",
        response_model=JobLogsOut,
        responses={404: {**_PROBLEM, "description": "no such job"}},
        summary="A job's output (its latest attempt unless attempt is given), from a byte offset",
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
