"""HTTP shapes of serverless endpoints: ``/endpoints`` (Scalar's) and ``/v2`` (RunPod's data plane)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class WorkerOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    state: str = Field(description="pending, initializing, idle, busy, stopping, stopped or lost")
    job_id: str | None = None
    gpu_group: str | None = None
    reason: str | None = None


class ScalingDecisionOut(BaseModel):
    at: str
    action: str = Field(description="up, down or hold")
    code: str
    message: str
    workers_before: int
    workers_target: int


class EndpointOut(BaseModel):
    """An endpoint: its normalized spec, workers, RunPod-style health, latency, cost and scaling decisions."""

    model_config = ConfigDict(extra="allow")

    id: str
    name: str
    state: str
    target: str = Field(description="builtin (modeled service time), local (Python handler) or runpod")
    handler: str | None = None
    spec: dict[str, Any]
    workers: list[WorkerOut]
    health: dict[str, Any]
    latency_ms: dict[str, Any]
    cost: dict[str, Any]
    no_workers_reason: str | None = None
    scaling: list[ScalingDecisionOut]


class EndpointListOut(BaseModel):
    endpoints: list[EndpointOut]
    count: int


class LogLineOut(BaseModel):
    at: str | None
    kind: str
    code: str
    message: str


class EndpointLogsOut(BaseModel):
    id: str
    lines: list[LogLineOut]


class RunRequest(BaseModel):
    """RunPod's request body: ``{"input": {...}}`` (``webhook`` and ``policy`` are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")

    input: Any = Field(description="passed to the handler as job['input']")


class RunAccepted(BaseModel):
    id: str
    status: str


class RequestStatusOut(BaseModel):
    """RunPod's job status; times in milliseconds."""

    model_config = ConfigDict(extra="allow")

    id: str
    status: str
    delayTime: int | None = None
    executionTime: int | None = None
    workerId: str | None = None
    output: Any = None
    error: str | None = None
    attempts: int = 0
    retries: int = 0


class HealthOut(BaseModel):
    workers: dict[str, int]
    jobs: dict[str, int]
