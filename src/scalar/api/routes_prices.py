"""``/prices``, ``/providers``, ``/quote`` and ``/market``: one view of the market (built-in and live offers).

Registered by ``create_app`` when the control plane has these calls (``PricesPort``).
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from fastapi import APIRouter, Query

from scalar.api.access import USER
from scalar.api.problems import ApiProblem, ProblemRoute
from scalar.domain.arbitrage import NoSuitableInstanceError, WorkloadRequirements
from scalar.domain.errors import InvalidSpecError
from scalar.wire.jobs import FieldProblem, ProblemDetails
from scalar.wire.market import MarketOut, OfferRowOut, PricesOut
from scalar.wire.providers import ProvidersOut, ProviderStatusOut
from scalar.wire.quote import RequirementsFile, SourcedQuoteOut

_PROBLEM = {"model": ProblemDetails, "content": {"application/problem+json": {}}}
SortKey = Literal["price_per_gpu_hour", "price_per_hour", "provider", "gpu_model", "age_s"]


@runtime_checkable
class PricesPort(Protocol):
    def prices(
        self,
        gpu_model: str | None = None,
        provider: str | None = None,
        spot: bool | None = None,
        sort: str = "price_per_gpu_hour",
        descending: bool = False,
        source: str | None = None,
    ) -> list[OfferRowOut]: ...

    def provider_status(self) -> list[ProviderStatusOut]: ...

    def quote(self, requirements: WorkloadRequirements, scorer: str = "default") -> SourcedQuoteOut: ...

    def market_view(self, gpu_model: str | None = None) -> MarketOut: ...


def no_match_problem(exc: NoSuitableInstanceError) -> ApiProblem:
    """422 with one entry per filter that removed offers: the rule, how many it removed, what to relax."""
    errors = []
    for f in exc.removed_by:
        if f.removed == 0:
            continue
        fix = next((s for s in exc.suggestions if f.name in s), None)
        errors.append(
            FieldProblem(
                field=f.name,
                problem=f"requires {f.rule}: removed {f.removed} of {exc.considered} offers",
                fix=fix or f"relax {f.name}",
                code="filtered_out",
                have=f.removed,
                limit=exc.considered,
            )
        )
    if not errors:
        errors.append(
            FieldProblem(
                field="(market)",
                problem="no offers are known yet",
                fix="wait for the first prices to be collected (GET /providers shows each provider's state)",
                code="no_offers",
                have=0,
            )
        )
    return ApiProblem(422, "no-suitable-offer", exc.message, errors, title="No suitable offer")


def prices_router(control_plane: PricesPort) -> APIRouter:
    router = APIRouter(route_class=ProblemRoute, tags=["market"], dependencies=[USER])

    @router.get(
        "/prices",
        response_model=PricesOut,
        summary="Every offer, built-in and live, with $/GPU-hour and freshness",
    )
    def prices(
        gpu_model: str | None = Query(None, max_length=64, description='canonical GPU model, e.g. "H100"'),
        provider: str | None = Query(None, max_length=64, description='e.g. "runpod"'),
        spot: bool | None = Query(None, description="true: spot only; false: on-demand only"),
        source: Literal["builtin", "live"] | None = Query(None, description="builtin or live offers only"),
        sort: SortKey = Query("price_per_gpu_hour", description="sort key (ascending)"),
        descending: bool = Query(False, description="sort descending"),
    ) -> PricesOut:
        """Offers as ``{"offers": [...]}``: each with ``source`` (builtin|live), ``fetched_at``, ``age_s``,
        ``stale``. Offers without GPUs sort last by $/GPU-hour."""
        rows = control_plane.prices(gpu_model, provider, spot, sort, descending, source)
        return PricesOut(count=len(rows), offers=rows)

    @router.get(
        "/providers",
        response_model=ProvidersOut,
        summary="Each real provider's state, last fetch, offer count and last error",
    )
    def providers() -> ProvidersOut:
        """``state`` is ok, stale (the last fetch failed or is old: its last good offers are kept), error
        (never fetched successfully), disabled (with ``disabled_reason``) or pending (first fetch running)."""
        return ProvidersOut(providers=control_plane.provider_status())

    @router.post(
        "/quote",
        response_model=SourcedQuoteOut,
        summary="Seed 002's placement over every offer, built-in and live",
        responses={422: {**_PROBLEM, "description": "invalid requirements, or no offer fits"}},
    )
    def quote(
        body: RequirementsFile,
        scorer: Literal["default", "seed"] = Query("default", description="the placement scorer"),
    ) -> SourcedQuoteOut:
        """The body is seed 002's ``WorkloadRequirements`` (camelCase); the answer is ``scalar quote
        --json``'s decision with ``source``/``stale`` on the pick and its alternatives."""
        try:
            return control_plane.quote(body.to_requirements(), scorer)
        except NoSuitableInstanceError as exc:
            raise no_match_problem(exc) from None
        except InvalidSpecError as exc:
            raise ApiProblem(
                422,
                "invalid-request",
                f"{exc.field}: {exc.problem}",
                [FieldProblem(field=exc.field, problem=exc.problem, fix=exc.hint or "fix this field")],
            ) from None

    @router.get("/market", response_model=MarketOut, summary="One ask book per GPU model across providers")
    def market(
        gpu_model: str | None = Query(None, max_length=64, description='only this GPU model, e.g. "H100"'),
    ) -> MarketOut:
        """``{"gpu_models": [{gpu_model, best_price_per_gpu_hour, total_gpus, providers, levels}]}``; a level
        is a $/GPU-hour price with the GPUs offered there (one instance per offer) and who offers them."""
        return control_plane.market_view(gpu_model)

    return router
