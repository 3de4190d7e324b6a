"""``/jobs/{id}/explain``, ``/nodes``, ``/blocks``, ``/autoscaler/status`` and ``/costs``: the cluster, read
from the store so any control-plane process (leader or follower) answers (runtime/views.py).

Registered by ``create_app`` when the control plane has these calls (``ClusterPort``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel

from scalar.api import paging
from scalar.api.access import USER
from scalar.api.auth import current_principal, tenant_filter
from scalar.api.problems import PARAMETER_FIXES, ApiProblem, ProblemRoute, problem_response, rejection_problem
from scalar.runtime.service import JobRejectedError
from scalar.wire.jobs import FieldProblem, HealthOut, JobSubmission, ProblemDetails
from scalar.wire.views import (
    AutoscalerOut,
    BlocksOut,
    CostsOut,
    ExplanationOut,
    NodesOut,
    PreviewOut,
    StatusOut,
)

_PROBLEM = {"model": ProblemDetails, "content": {"application/problem+json": {}}}
MAX_ID_LENGTH = 200
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
BlockStatus = Literal["open", "released", "ended"]
Paged = TypeVar("Paged", NodesOut, BlocksOut)


@runtime_checkable
class ClusterPort(Protocol):
    def explain(self, job_id: str) -> ExplanationOut | None: ...

    def nodes(
        self,
        include_gone: bool = False,
        limit: int | None = None,
        after: str | None = None,
        descending: bool = False,
    ) -> NodesOut: ...

    def blocks(
        self,
        status: str | None = None,
        limit: int | None = None,
        after: str | None = None,
        descending: bool = False,
    ) -> BlocksOut: ...

    def autoscaler_status(self, all_groups: bool = False) -> AutoscalerOut: ...

    def costs(self, points: int = 24) -> CostsOut: ...

    def preview_job(self, fields: Mapping[str, Any]) -> PreviewOut: ...

    def status(self) -> StatusOut: ...


def cluster_router(control_plane: ClusterPort) -> APIRouter:
    router = APIRouter(route_class=ProblemRoute, tags=["cluster"], dependencies=[USER])

    @router.get(
        "/jobs/{job_id}/explain",
        response_model=ExplanationOut,
        responses={404: {**_PROBLEM, "description": "no such job"}},
        summary="Why a job is where it is, with numbers",
    )
    def explain_job(job_id: str = Path(min_length=1, max_length=MAX_ID_LENGTH)) -> Any:
        """Its state and one-line reason, its place in the queue, the nodes its last placement rejected
        (grouped by reason and counted), its routing decision, the purchase made for it with an ETA, the
        explanation as sentences and its story (every decision about it, oldest first)."""
        answer = control_plane.explain(job_id)
        if answer is None:
            raise ApiProblem(
                404,
                "not-found",
                f"no job with id {job_id!r}",
                [
                    FieldProblem(
                        field="job_id", problem=f"no job has id {job_id!r}", fix=PARAMETER_FIXES["job_id"]
                    )
                ],
            )
        return answer

    @router.get(
        "/nodes",
        response_model=NodesOut,
        responses={422: {**_PROBLEM, "description": "a bad parameter"}},
        summary="The GPU slot map: every node's GPUs with the jobs on them",
    )
    def list_nodes(
        include_gone: bool = Query(False, description="also list terminated and failed nodes"),
        limit: int = Query(
            DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description=f"at most this many nodes (1 to {MAX_LIMIT})"
        ),
        after: str | None = Query(
            None, max_length=paging.MAX_CURSOR_LENGTH, description="a page's `next` or `prev`"
        ),
    ) -> Any:
        """Per node (in node id order, a page of ``limit``): provider, tier, state, expiry, and each GPU with
        its jobs and VRAM in use; totals over the whole fleet with GPUs allocated and idle, utilization and
        fragmentation. ``next``/``prev``: the cursors of the pages after and before."""
        listing = paging.fingerprint("nodes", include_gone=include_gone, tenant=tenant_filter())
        return _paged(
            lambda key, reverse, n: control_plane.nodes(include_gone, n, key, reverse),
            "nodes",
            "node_id",
            limit,
            after,
            listing,
        )

    @router.get(
        "/blocks",
        response_model=BlocksOut,
        responses={422: {**_PROBLEM, "description": "a bad parameter"}},
        summary="Contracts: price paid, start, expiry, committed and accrued",
    )
    def list_blocks(
        status: BlockStatus | None = Query(None, description="only blocks in this status"),
        limit: int = Query(
            DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description=f"at most this many blocks (1 to {MAX_LIMIT})"
        ),
        after: str | None = Query(
            None, max_length=paging.MAX_CURSOR_LENGTH, description="a page's `next` or `prev`"
        ),
    ) -> Any:
        """Contracts in block id order, a page of ``limit``; totals over every block in ``status``."""
        listing = paging.fingerprint("blocks", status=status, tenant=tenant_filter())
        return _paged(
            lambda key, reverse, n: control_plane.blocks(status, n, key, reverse),
            "blocks",
            "block_id",
            limit,
            after,
            listing,
        )

    @router.get(
        "/autoscaler/status",
        response_model=AutoscalerOut,
        summary="Routing, pending groups, unmet demand, slice lifecycle counts, recent actions",
    )
    def autoscaler_status(
        all_groups: bool = Query(False, description="also list groups with no slices and nothing in flight"),
    ) -> Any:
        """The last routing decision and its pending groups (from the leader; a follower says so in
        ``notes``), unmet demand with reasons, slice counts per scale group and state (requesting,
        booting, initializing, ready, failed, terminated), open purchases and the last 100 actions."""
        return control_plane.autoscaler_status(all_groups)

    @router.get(
        "/costs",
        response_model=CostsOut,
        responses={422: {**_PROBLEM, "description": "a bad parameter"}},
        summary="Spend by provider and over time, $ per delivered GPU-hour, idle $",
    )
    def costs(
        points: int = Query(24, ge=2, le=500, description="points in the spend-over-time series"),
    ) -> Any:
        return control_plane.costs(points)

    @router.get("/status", response_model=StatusOut, summary="Health, counts, GPUs, spend and slices at once")
    def status() -> Any:
        """What ``scalar status`` prints: the health, jobs by state, nodes by state, GPUs allocated and
        idle, spend, slices by lifecycle state and the leader's step latency."""
        answer = control_plane.status()
        if not current_principal().is_admin:  # the public health: no database, host or process
            public = HealthOut.model_validate(answer.health).model_dump(mode="json")
            answer = answer.model_copy(update={"health": public})
        return answer

    @router.post(
        "/jobs/preview",
        response_model=PreviewOut,
        responses={422: {**_PROBLEM, "description": "invalid or refused job: the errors name each field"}},
        summary="What a job would cost, and whether it needs a purchase (nothing is submitted)",
    )
    def preview_job(body: JobSubmission, request: Request) -> Any:
        """The body is ``POST /jobs``'s. Checked as a submission is; then the controller's own decision on
        the state its leader last published: the READY node it would run on now (no purchase; its share of
        that contract), or the purchase it would make for it, with the nodes, $/GPU-hour and what the
        contract would commit. ``scalar submit`` shows this before it submits."""
        try:
            return control_plane.preview_job(body.to_fields())
        except JobRejectedError as exc:
            return problem_response(rejection_problem(exc.reasons, request.url.path))

    return router


def _paged(
    read: Callable[[str | None, bool, int], Paged],
    items: str,
    key: str,
    limit: int,
    after: str | None,
    listing: str,
) -> Paged:
    """A page of a view whose ``items`` are in ``key`` order, with its totals and cursors."""
    cursor = paging.decode(after, listing)
    answers: list[Paged] = []

    def fetch(start: Any, reverse: bool, n: int) -> list[BaseModel]:
        answers.append(read(None if start is None else str(start), reverse, n))
        return list(getattr(answers[-1], items))

    found = paging.page(fetch, lambda row: str(getattr(row, key)), limit, cursor, listing)
    update = {"count": len(found.items), "limit": limit, "after": after or None}
    return answers[-1].model_copy(
        update={items: found.items, **update, "next": found.next, "prev": found.prev}
    )


def cluster_endpoints() -> list[str]:
    return [
        "/status",
        "/jobs/{id}/explain",
        "/jobs/preview",
        "/nodes",
        "/blocks",
        "/autoscaler/status",
        "/costs",
    ]


__all__ = ["ApiProblem", "ClusterPort", "cluster_endpoints", "cluster_router"]
