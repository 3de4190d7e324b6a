"""``/jobs``: submit a job, list jobs, read one job, cancel one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Query, Request, Response

from scalar.api import paging
from scalar.api.access import USER
from scalar.api.auth import tenant_filter
from scalar.api.ports import ControlPlanePort
from scalar.api.problems import (
    PARAMETER_FIXES,
    ApiProblem,
    ProblemRoute,
    problem_response,
    rejection_problem,
)
from scalar.runtime.service import JobRejectedError
from scalar.wire.jobs import (
    JOB_STATES,
    FieldProblem,
    JobListOut,
    JobOrder,
    JobOut,
    JobSubmission,
    ProblemDetails,
    one_of,
)

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_OFFSET = 1_000_000_000
MAX_ID_LENGTH = 200

_PROBLEM = {"model": ProblemDetails, "content": {"application/problem+json": {}}}


def _not_found(job_id: str) -> ApiProblem:
    return ApiProblem(
        404,
        "not-found",
        f"no job with id {job_id!r}",
        [FieldProblem(field="job_id", problem=f"no job has id {job_id!r}", fix=PARAMETER_FIXES["job_id"])],
    )


def _state_filter(state: str | None) -> str | None:
    if state is None or not state.strip():
        return None
    wanted = state.strip().upper()
    if wanted not in JOB_STATES:
        raise ApiProblem(
            422,
            "invalid-request",
            f"state: unknown job state {state!r}",
            [
                FieldProblem(
                    field="state", problem=f"is not a job state, got {state!r}", fix=PARAMETER_FIXES["state"]
                )
            ],
        )
    return wanted


def jobs_router(control_plane: ControlPlanePort) -> APIRouter:
    router = APIRouter(route_class=ProblemRoute, tags=["jobs"], dependencies=[USER])

    @router.post(
        "/jobs",
        status_code=201,
        response_model=JobOut,
        responses={422: {**_PROBLEM, "description": "invalid or refused job: the errors name each field"}},
        summary="Submit a job",
    )
    def submit_job(body: JobSubmission, request: Request, response: Response) -> Any:
        """Validate the job at once (its fields, then against the configuration and the offers on the
        market) and queue it. Returns the job with its ``id`` and state ``PENDING``."""
        try:
            job = control_plane.submit_job(body.to_fields())
        except JobRejectedError as exc:
            return problem_response(rejection_problem(exc.reasons, request.url.path))
        response.headers["Location"] = f"/jobs/{job.id}"
        return job

    @router.get(
        "/jobs",
        response_model=JobListOut,
        responses={422: {**_PROBLEM, "description": "a bad filter or page"}},
        summary="List jobs",
    )
    def list_jobs(
        state: str | None = Query(
            None,
            max_length=20,
            description="only jobs in this state: " + ", ".join(JOB_STATES),
            json_schema_extra=one_of(JOB_STATES),
        ),
        limit: int = Query(
            DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description=f"at most this many jobs (1 to {MAX_LIMIT})"
        ),
        offset: int = Query(0, ge=0, le=MAX_OFFSET, description="skip this many jobs first (prefer `after`)"),
        order: JobOrder = Query("newest", description="newest first (default) or oldest (submission order)"),
        after: str | None = Query(
            None, max_length=paging.MAX_CURSOR_LENGTH, description="a page's `next` or `prev` cursor"
        ),
    ) -> Any:
        wanted = _state_filter(state)
        newest = order == "newest"
        listing = paging.fingerprint("jobs", state=wanted, order=order, tenant=tenant_filter())
        cursor = paging.decode_with_offset(after, listing, offset)

        def fetch(key: Any, reverse: bool, n: int) -> list[JobOut]:
            return control_plane.list_jobs(
                state=wanted, limit=n, offset=offset, newest_first=newest != reverse, after=key
            )

        found = paging.page(fetch, lambda j: j.id, limit, cursor, listing)
        jobs = list(found.items)
        return JobListOut(
            jobs=jobs,
            count=len(jobs),
            limit=limit,
            offset=offset,
            state=wanted,
            order=order,
            after=after or None,
            next=found.next,
            prev=found.prev,
        )

    @router.get(
        "/jobs/{job_id}",
        response_model=JobOut,
        responses={404: {**_PROBLEM, "description": "no such job"}},
        summary="Read one job: its state and why",
    )
    def get_job(job_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH)) -> Any:
        job = control_plane.get_job(job_id)
        if job is None:
            raise _not_found(job_id)
        return job

    @router.delete(
        "/jobs/{job_id}",
        status_code=202,
        response_model=JobOut,
        responses={404: {**_PROBLEM, "description": "no such job"}},
        summary="Cancel a job",
    )
    def cancel_job(job_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH)) -> Any:
        """Ask for the job to be cancelled. The request is durable; the job shows CANCELLED once the
        controller has acted on it. A finished job stays as it is: asking again is accepted (202) and
        changes nothing, so a retried cancel is safe."""
        try:
            return control_plane.cancel_job(job_id)
        except KeyError:
            raise _not_found(job_id) from None

    return router
