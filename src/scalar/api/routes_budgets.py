"""``GET /budgets`` and ``PUT /budgets``: spend limits per tenant and global (docs/budgets.md).

``GET`` is for any token, ``PUT`` for admins (declared on the routes: ``api/access.py``). Registered by ``create_app`` when the control plane
has these calls (``BudgetsPort``).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from scalar.api.access import ADMIN, USER
from scalar.api.auth import require_admin
from scalar.api.problems import ApiProblem, ProblemRoute
from scalar.domain.errors import InvalidSpecError
from scalar.wire.budgets import BudgetsOut
from scalar.wire.jobs import FieldProblem, ProblemDetails

_PROBLEM = {"model": ProblemDetails, "content": {"application/problem+json": {}}}
_AMOUNT = r"^\d{1,12}(\.\d{1,6})?$"


@runtime_checkable
class BudgetsPort(Protocol):
    def budgets(self) -> BudgetsOut: ...

    def put_budgets(self, limits: Any, *, actor: str = "(local)") -> BudgetsOut: ...


class LimitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: str = Field("global", min_length=1, max_length=64, description="'global' or a tenant's name")
    usd_per_hour: str | None = Field(None, pattern=_AMOUNT, description="committed USD per hour; null: none")
    usd_per_period: str | None = Field(None, pattern=_AMOUNT, description="USD per period; null: none")
    period: Literal["day", "month"] = Field("day", description="the period of usd_per_period (UTC)")


class BudgetsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limits: list[LimitBody] = Field(
        max_length=1000,
        description="every limit (replaces them all); required: an explicit [] removes every limit",
    )


def budgets_router(control_plane: BudgetsPort) -> APIRouter:
    router = APIRouter(route_class=ProblemRoute, tags=["budgets"], dependencies=[USER])

    @router.get(
        "/budgets", response_model=BudgetsOut, summary="Spend limits, and what is committed against each"
    )
    def get_budgets() -> Any:
        """``limits`` (scope, usd_per_hour, usd_per_period, period) and ``usage`` per scope:
        ``committed_usd_per_hour`` and ``committed_usd_this_period`` (spent + due until the period ends)."""
        return control_plane.budgets()

    @router.put(
        "/budgets",
        response_model=BudgetsOut,
        summary="Replace every spend limit (admin)",
        dependencies=[ADMIN],
        responses={422: {**_PROBLEM, "description": "a limit is invalid"}},
    )
    def put_budgets(body: BudgetsBody) -> Any:
        """The limits apply from the controller's next step; a purchase that would break one waits with
        reason ``budget_exceeded``. Scopes not listed have no limit. ``limits`` is required (``{}`` is
        refused): ``[]`` removes every limit. Audit-logged (``budgets.replace``, ``budgets.clear``)."""
        try:
            return control_plane.put_budgets(
                [lim.model_dump() for lim in body.limits], actor=require_admin().token_id
            )
        except InvalidSpecError as err:
            fix = err.hint or "give amounts >= 0 in USD and one limit per scope"
            raise ApiProblem(
                422,
                "invalid-request",
                f"{err.field}: {err.problem}",
                [FieldProblem(field=err.field, problem=err.problem, fix=fix)],
            ) from None

    return router
