"""Endpoint rows <-> what the API shows (``wire/endpoints_api.py``): a worker, a scaling decision, a request's
RunPod status, the health counts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from scalar.domain.endpoint_scaling import RequestStatus, WorkerState
from scalar.domain.endpoints import ServerlessEndpoint
from scalar.wire.endpoints import EndpointSpecFile, HandlerConfigSpec
from scalar.wire.endpoints_api import (
    HealthOut,
    RequestCountsOut,
    RequestStatusOut,
    ScalingDecisionOut,
    WorkerCountsOut,
    WorkerOut,
)

TARGETS = ("builtin", "local", "runpod")
MAX_STREAM_CHUNKS = 10_000
"""A request's stream holds at most this many chunks; a handler yielding more has the rest refused."""
UNHEALTHY_WINDOW_S = 600.0
"""A lost worker counts as unhealthy in ``/health`` for this long."""


WORKER_FIELDS = ("handler", "handlerConfig", "command", "workdir", "env")
"""Stored spec fields about how a worker runs, beside the seed's normalized spec."""


def spec_from_row(row: dict[str, Any]) -> ServerlessEndpoint:
    data = dict(row["spec"])
    for key in WORKER_FIELDS:
        data.pop(key, None)
    return EndpointSpecFile.model_validate(data).to_domain()


def worker_command(row: dict[str, Any]) -> list[str] | None:
    """A command endpoint's worker argv (a RunPod worker), or ``None``."""
    command = row["spec"].get("command") if row["target"] == "local" else None
    return None if not command else [str(a) for a in command]


def handler_flags(row: dict[str, Any]) -> list[str]:
    """The handler process's flags for the endpoint's ``handlerConfig`` (RunPod's start() options)."""
    config = row["spec"].get("handlerConfig")
    return [] if not config else HandlerConfigSpec.model_validate(config).flags()


def iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def ms_between(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return max(0, round((end - start).total_seconds() * 1000))


def request_status(row: dict[str, Any], now: datetime) -> RequestStatusOut:
    """RunPod's job status: ``id, status, delayTime, executionTime, output, error, workerId`` (ms), plus
    Scalar's ``attempts`` and ``retries``. A FAILED request shows ``output`` too when its worker sent one
    with the error (tetra-rp reads a failed function's ``stdout`` there). The fields not known yet are left
    unset (``webhook_body`` leaves them out)."""
    status = RequestStatus(row["status"])
    started = row["started_at"]
    queued_until = started if started is not None else (row["finished_at"] or now)
    known: dict[str, Any] = {}
    if started is not None:
        known["executionTime"] = ms_between(started, row["finished_at"] or now)
    if row["worker_id"] is not None:
        known["workerId"] = row["worker_id"]
    if status is RequestStatus.COMPLETED or (status is RequestStatus.FAILED and row["output"] is not None):
        known["output"] = row["output"]  # a failed request keeps what its worker sent beside the error
    if row["error"]:
        known["error"] = row["error"]
    return RequestStatusOut(
        id=row["id"],
        status=status.value,
        delayTime=ms_between(row["created_at"], queued_until),
        attempts=row["attempts"],
        retries=row["retries"],
        **known,
    )


WEBHOOK_KEYS = (
    "id",
    "status",
    "delayTime",
    "attempts",
    "retries",
    "executionTime",
    "workerId",
    "output",
    "error",
)
"""A webhook's body: the status's known fields, in the order webhooks have always had them."""


def webhook_body(status: RequestStatusOut) -> dict[str, Any]:
    """The final status as a webhook is POSTed it: the fields known (set), in ``WEBHOOK_KEYS``' order."""
    known = status.model_dump(exclude_unset=True)
    return {key: known[key] for key in WEBHOOK_KEYS if key in known}


def health_counts(workers: list[dict[str, Any]], counts: dict[str, int], now: datetime) -> HealthOut:
    """RunPod's ``/health``: ``workers {idle, initializing, ready, running, throttled, unhealthy}``,
    ``jobs {completed, failed, inProgress, inQueue, retried}``."""
    by_state: dict[str, int] = {}
    unhealthy = 0
    for worker in workers:
        by_state[worker["state"]] = by_state.get(worker["state"], 0) + 1
        stopped = worker["stopped_at"]
        if worker["state"] == WorkerState.LOST.value and stopped is not None:
            if (now - stopped).total_seconds() <= UNHEALTHY_WINDOW_S:
                unhealthy += 1
    idle = by_state.get(WorkerState.IDLE.value, 0)
    busy = by_state.get(WorkerState.BUSY.value, 0)
    return HealthOut(
        workers=WorkerCountsOut(
            idle=idle,
            initializing=by_state.get(WorkerState.INITIALIZING.value, 0),
            ready=idle + busy,
            running=busy,
            throttled=by_state.get(WorkerState.PENDING.value, 0),
            unhealthy=unhealthy,
        ),
        jobs=RequestCountsOut(
            completed=counts.get(RequestStatus.COMPLETED.value, 0),
            failed=counts.get(RequestStatus.FAILED.value, 0) + counts.get(RequestStatus.TIMED_OUT.value, 0),
            inProgress=counts.get(RequestStatus.IN_PROGRESS.value, 0),
            inQueue=counts.get(RequestStatus.IN_QUEUE.value, 0),
            retried=counts.get("retried", 0),
        ),
    )


def worker_out(row: dict[str, Any]) -> WorkerOut:
    return WorkerOut(
        id=row["id"],
        state=row["state"],
        job_id=row["job_id"],
        gpu_group=row["gpu_group"],
        gpu_model=row["gpu_model"],
        node_id=row["node_id"],
        served=row["served"],
        reason=row["reason"],
        created_at=iso(row["created_at"]),
        started_at=iso(row["started_at"]),
        ready_at=iso(row["ready_at"]),
        stopped_at=iso(row["stopped_at"]),
    )


def scaling_out(row: dict[str, Any]) -> ScalingDecisionOut:
    return ScalingDecisionOut(
        at=row["at"].isoformat(),
        action=row["action"],
        code=row["code"],
        message=row["message"],
        workers_before=row["workers_before"],
        workers_target=row["workers_target"],
    )
