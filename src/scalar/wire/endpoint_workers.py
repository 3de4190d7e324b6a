"""Messages of an endpoint worker run by a node agent (docs/endpoints.md "Workers on agent nodes").

The worker process (``python -m scalar.agent.endpoint_worker``) always calls the controller, under
``/agent/v1/endpoints/{endpoint_id}/workers/{worker_id}/``: ``next`` (a long poll for the request delivered
to it), ``result`` (the handler's output or error, or with ``final`` false the chunks a streaming handler
yielded) and ``failed`` (the handler could not be loaded). Each
carries the worker's credential (``SCALAR_WORKER_TOKEN``, given to this worker's job only) and the job's
attempt (``SCALAR_ATTEMPT``): a call from an attempt that is no longer the job's current one is fenced.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_WAIT_S = 30.0
MAX_ERROR_CHARS = 10_000
MAX_ID = 200


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkerCall(_Model):
    token: str = Field(min_length=1, max_length=MAX_ID, description="the worker's SCALAR_WORKER_TOKEN")
    attempt: int = Field(ge=1, le=1_000_000, description="the job's attempt (SCALAR_ATTEMPT)")


class NextCall(WorkerCall):
    wait_s: float = Field(default=20.0, ge=0, le=MAX_WAIT_S, description="how long to wait for a request")


class DeliveredRequest(_Model):
    id: str
    input: Any = None
    delivery: int = Field(description="the request's delivery attempt; echo it in the result")


class NextReply(_Model):
    request: DeliveredRequest | None = None
    stop: bool = False
    reason: str | None = None


class ResultCall(WorkerCall):
    request_id: str = Field(min_length=1, max_length=MAX_ID)
    delivery: int = Field(ge=1, le=1_000_000)
    output: Any = None
    error: str | None = Field(default=None, max_length=MAX_ERROR_CHARS)
    final: bool = Field(default=True, description="false: only stream chunks, the request goes on")
    stream: list[Any] = Field(default_factory=list, max_length=1000, description="values a generator yielded")
    stop_pod: bool = Field(default=False, description="RunPod's refresh_worker: stop this worker after it")


class ResultReply(_Model):
    accepted: bool
    reason: str | None = None


class FailedCall(WorkerCall):
    error: str = Field(min_length=1, max_length=MAX_ERROR_CHARS)
