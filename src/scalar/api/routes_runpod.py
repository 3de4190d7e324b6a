"""RunPod's serverless data plane, so RunPod clients work unchanged: ``/v2/{endpoint_id}/...``.

``POST run`` (async, returns an id), ``POST runsync`` (waits up to ``?wait=`` ms, default 90 000, then
answers the current status), ``GET status/{id}``, ``POST cancel/{id}``, ``GET health``. Answers keep
RunPod's shapes, errors included (``{"error": "..."}`` with the HTTP status), not problem documents.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from scalar.domain.endpoint_scaling import RequestStatus
from scalar.runtime.endpoints.service import EndpointNotFoundError, EndpointService, RequestNotFoundError
from scalar.wire.endpoints_api import HealthOut, RequestStatusOut, RunAccepted, RunRequest

MAX_BODY_BYTES = 10 * 1024 * 1024
RUNSYNC_WAIT_MS = 90_000
POLL_S = 0.05


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _unknown_endpoint(endpoint_id: str) -> JSONResponse:
    return _error(404, f"endpoint {endpoint_id} not found")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


async def _job_input(request: Request) -> tuple[Any, JSONResponse | None]:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        return None, _error(413, f"the request body is larger than {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw or b"null", parse_constant=_refuse_constant)
    except ValueError as exc:
        return None, _error(400, f'the body is not JSON ({exc}); send {{"input": {{...}}}}')
    if not isinstance(body, dict) or "input" not in body:
        return None, _error(400, 'the body must be a JSON object with an "input" field: {"input": {...}}')
    return body["input"], None


def runpod_router(service: EndpointService) -> APIRouter:
    router = APIRouter(prefix="/v2", tags=["runpod data plane"])

    @router.post(
        "/{endpoint_id}/run",
        response_model=RunAccepted,
        openapi_extra={
            "requestBody": {"content": {"application/json": {"schema": RunRequest.model_json_schema()}}}
        },
        summary="Queue a request (RunPod's run)",
    )
    async def run(endpoint_id: str, request: Request) -> Any:
        job_input, error = await _job_input(request)
        if error is not None:
            return error
        try:
            return service.submit_request(endpoint_id, job_input)
        except EndpointNotFoundError:
            return _unknown_endpoint(endpoint_id)

    @router.post(
        "/{endpoint_id}/runsync",
        response_model=RequestStatusOut,
        openapi_extra={
            "requestBody": {"content": {"application/json": {"schema": RunRequest.model_json_schema()}}}
        },
        summary="Queue a request and wait for its result (RunPod's runsync)",
    )
    async def runsync(
        endpoint_id: str, request: Request, wait: int = Query(RUNSYNC_WAIT_MS, ge=0, le=300_000)
    ) -> Any:
        job_input, error = await _job_input(request)
        if error is not None:
            return error
        try:
            accepted = service.submit_request(endpoint_id, job_input)
        except EndpointNotFoundError:
            return _unknown_endpoint(endpoint_id)
        deadline = time.monotonic() + wait / 1000
        while True:
            status = await anyio.to_thread.run_sync(service.request_status, endpoint_id, accepted["id"])
            if RequestStatus(status["status"]).terminal or time.monotonic() >= deadline:
                return status
            await anyio.sleep(POLL_S)

    @router.get(
        "/{endpoint_id}/status/{request_id}", response_model=RequestStatusOut, summary="A request's status"
    )
    def status(endpoint_id: str, request_id: str) -> Any:
        try:
            return service.request_status(endpoint_id, request_id)
        except RequestNotFoundError:
            return _error(404, f"request {request_id} not found on endpoint {endpoint_id}")

    @router.post(
        "/{endpoint_id}/cancel/{request_id}", response_model=RequestStatusOut, summary="Cancel a request"
    )
    def cancel(endpoint_id: str, request_id: str) -> Any:
        try:
            return service.cancel_request(endpoint_id, request_id)
        except RequestNotFoundError:
            return _error(404, f"request {request_id} not found on endpoint {endpoint_id}")

    @router.get("/{endpoint_id}/health", response_model=HealthOut, summary="Workers and requests by state")
    def health(endpoint_id: str) -> Any:
        try:
            return service.health(endpoint_id)
        except EndpointNotFoundError:
            return _unknown_endpoint(endpoint_id)

    return router
