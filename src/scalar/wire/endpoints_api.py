"""HTTP shapes of serverless endpoints: ``/endpoints`` (Scalar's) and ``/v2`` (RunPod's data plane)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from scalar.domain.endpoint_scaling import RequestStatus, WorkerState
from scalar.wire.jobs import FieldProblem, one_of

MAX_ID_LENGTH = 64
"""Endpoint, request and worker ids are at most this long (the store's id columns)."""
MAX_WORKERS_SHOWN = 1000
"""``GET /endpoints/{id}`` shows at most this many active workers (``workers_limit``)."""
MAX_POLICY_MS = 7 * 24 * 3600 * 1000
"""RunPod's longest ``policy.executionTimeout`` and ``policy.ttl``: 7 days, in milliseconds."""
MAX_WEBHOOK_LENGTH = 2048
ENDPOINT_STATES = ("active", "deleted")
"""An endpoint is active until ``DELETE /endpoints/{id}`` (the store's ``endpoints.state``)."""
REQUEST_STATUSES = tuple(s.value for s in RequestStatus)


def _unknown(value: Any) -> bool:
    """A field RunPod leaves out of an answer until it is known."""
    return value is None


class WorkerOut(BaseModel):
    """One of an endpoint's workers (a job of the control plane that serves its requests)."""

    id: str
    state: str = Field(
        description="pending, initializing, idle, busy, stopping, stopped or lost",
        json_schema_extra=one_of(s.value for s in WorkerState),
    )
    job_id: str | None = None
    gpu_group: str | None = None
    reason: str | None = None
    gpu_model: str | None = Field(default=None, description="the GPU model of the node it runs on")
    node_id: str | None = None
    served: int = Field(default=0, description="how many requests it has finished")
    created_at: str | None = None
    started_at: str | None = None
    ready_at: str | None = None
    stopped_at: str | None = None


class ScalingDecisionOut(BaseModel):
    at: str
    action: str = Field(description="up, down or hold")
    code: str
    message: str
    workers_before: int
    workers_target: int


class WorkerCountsOut(BaseModel):
    """RunPod's ``/health`` workers: ``ready`` is idle plus running; ``throttled`` wait for GPUs;
    ``unhealthy`` were lost in the last ten minutes."""

    idle: int
    initializing: int
    ready: int
    running: int
    throttled: int
    unhealthy: int


class RequestCountsOut(BaseModel):
    """RunPod's ``/health`` jobs: ``failed`` counts timed-out requests too."""

    completed: int
    failed: int
    inProgress: int
    inQueue: int
    retried: int


class HealthOut(BaseModel):
    workers: WorkerCountsOut
    jobs: RequestCountsOut


class LatencyOut(BaseModel):
    """Milliseconds from submission to completion over the latest completed requests."""

    p50: float | None = None
    p99: float | None = None
    samples: int


class EndpointCostOut(BaseModel):
    """Worker-hours and their cost (the node's price per GPU-hour times the worker's GPUs), exact."""

    worker_hours: float
    cost_usd: str
    cost_per_1000_requests_usd: str | None = None


class StartErrorOut(BaseModel):
    """The latest worker that failed to start (its handler did not load, its process ended early)."""

    at: str
    worker_id: str | None = None
    error: str
    message: str
    retry_after: str


class EndpointOut(BaseModel):
    """An endpoint: its normalized spec, workers, RunPod-style health, latency, cost and scaling decisions."""

    id: str
    name: str
    tenant: str = Field(description="the tenant that created it; only that tenant (and admins) see it")
    state: str = Field(json_schema_extra=one_of(ENDPOINT_STATES))
    target: str = Field(description="builtin (modeled service time), local (Python handler) or runpod")
    handler: str | None = None
    spec: dict[str, Any]
    workers: list[WorkerOut] = Field(description="active workers, oldest first, at most workers_limit")
    workers_count: int = Field(description="how many active workers there are in all")
    workers_truncated: bool = Field(description="true when workers shows only the first workers_limit")
    health: HealthOut
    latency_ms: LatencyOut
    cost: EndpointCostOut
    no_workers_reason: str | None = None
    scaling: list[ScalingDecisionOut]
    # after the fields above, in the order the answer has always had them
    remote_id: str | None = Field(default=None, description="the endpoint's id at RunPod (target runpod)")
    created_at: str | None = None
    updated_at: str | None = None
    start_error: StartErrorOut | None = None


class EndpointListOut(BaseModel):
    """A page of endpoints in creation order; ``next``/``prev``: the cursors of the pages around it."""

    endpoints: list[EndpointOut]
    count: int
    limit: int
    offset: int
    after: str | None = Field(default=None, description="the cursor this page starts after")
    next: str | None = Field(default=None, description="pass as `after` for the next page; null: the last")
    prev: str | None = Field(default=None, description="pass as `after` for the page before; null: the first")


class LogLineOut(BaseModel):
    at: str | None
    kind: str
    code: str
    message: str


class EndpointLogsOut(BaseModel):
    id: str
    lines: list[LogLineOut]


class RunPolicy(BaseModel):
    """RunPod's execution policy: ``executionTimeout`` replaces the endpoint's ``executionTimeoutMs`` for
    this request; ``ttl`` ends the request TIMED_OUT if it is unfinished that long after submission;
    ``lowPriority`` is accepted and ignored."""

    model_config = ConfigDict(extra="forbid")

    executionTimeout: StrictInt | None = Field(
        None, ge=1, le=MAX_POLICY_MS, description="milliseconds, at most 7 days"
    )
    ttl: StrictInt | None = Field(None, ge=1, le=MAX_POLICY_MS, description="milliseconds, at most 7 days")
    lowPriority: StrictBool | None = None


class RunRequest(BaseModel):
    """RunPod's request body: ``{"input": {...}}``, ``webhook`` (gets the final status by POST), ``policy``;
    ``s3Config`` is checked and ignored (docs/endpoints.md). Any other field is refused, naming it."""

    model_config = ConfigDict(extra="forbid")

    input: Any = Field(description="passed to the handler as job['input']; any JSON value")
    webhook: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_WEBHOOK_LENGTH,
        pattern=r"^https?://\S+$",
        description="POSTed the final status (retried with backoff)",
    )
    policy: RunPolicy | None = None
    s3Config: dict[str, str] | None = Field(None, max_length=16, description="accepted and ignored")


class RunPodProblem(BaseModel):
    """An error of the ``/v2`` data plane: a problem document that also carries RunPod's ``error``, and no
    ``status`` member (on ``/v2`` a ``status`` is a job's; RunPod's clients read it as one). The HTTP
    status is the response's own."""

    type: str = Field(description="a URI naming the kind of problem, e.g. urn:scalar:problem:invalid-request")
    title: str
    detail: str
    instance: str | None = None
    errors: list[FieldProblem] = Field(default_factory=list)
    error: str = Field(description="the detail, under the key RunPod clients read")


class RunAccepted(BaseModel):
    id: str
    status: str = Field(json_schema_extra=one_of(REQUEST_STATUSES))


class RequestStatusOut(BaseModel):
    """RunPod's job status; times in milliseconds."""

    id: str
    status: str = Field(json_schema_extra=one_of(REQUEST_STATUSES))
    delayTime: int | None = None
    executionTime: int | None = None
    workerId: str | None = None
    output: Any = None
    error: str | None = None
    attempts: int = 0
    retries: int = 0


class StreamChunk(BaseModel):
    model_config = ConfigDict(extra="allow")

    output: Any = None


class StreamOut(BaseModel):
    """RunPod's stream answer: the status and the chunks not returned before (each exactly once).
    ``delayTime``, ``executionTime`` and ``workerId`` are sent only once known (as RunPod does)."""

    id: str
    status: str
    stream: list[StreamChunk] = Field(description="always present; empty when nothing new came")
    error: str | None = None
    delayTime: int | None = Field(default=None, exclude_if=_unknown)
    executionTime: int | None = Field(default=None, exclude_if=_unknown)
    workerId: str | None = Field(default=None, exclude_if=_unknown)


class PurgeOut(BaseModel):
    removed: int = Field(description="how many queued requests were cancelled")
    status: str


class MetricsOut(HealthOut):
    readyWorkers: list[str]
    initializingWorkers: list[str]
    throttledWorkers: list[str]
