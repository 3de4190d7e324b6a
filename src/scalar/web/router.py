"""The dashboard's pages under ``/ui``: server-rendered HTML built from the JSON API, refreshed live.

Each page reads the JSON routes in-process (``reader.ApiReader``) and renders a Jinja2 template. The
page's script (static/dashboard.js) asks for the same URL every ~2 s with ``X-Scalar-Fragment: 1`` and
swaps in the live part (``#live``), so the numbers on screen follow the API without a reload.

Query strings are read raw and handed to the API, which validates them: a bad value shows the API's
problem on the page (with a 200 or the problem's 4xx), never a 500.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from scalar.web import views
from scalar.web.formatting import FILTERS
from scalar.web.nav import PREFIX, nav_items
from scalar.web.reader import ApiAnswer, ApiReader

HERE = Path(__file__).resolve().parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"
FRAGMENT_HEADER = "x-scalar-fragment"
POLL_MS = 2000
# Pages that read the whole market (thousands of offers) refresh less often.
SLOW_POLL_MS = 5000
INSTANCE_TYPES = ("8xH100", "8xH200")
# Rows per page of the paged lists (the API's cursors: next/prev links).
JOBS_PAGE = 50
NODES_PAGE = 50

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
templates.env.filters.update(FILTERS)
templates.env.globals["nav_items"] = nav_items
templates.env.globals["PREFIX"] = PREFIX


def render(request: Request, template: str, http_status: int = 200, **context: Any) -> HTMLResponse:
    """Render ``template`` (the whole page, or only its live part when the script asks for it)."""
    now = datetime.now(UTC)
    page = {
        "fragment": request.headers.get(FRAGMENT_HEADER) == "1",
        "path": request.url.path,
        "rendered_at": now.isoformat().replace("+00:00", "Z"),
        "now": now,
        "poll_ms": POLL_MS,
        "static": f"{PREFIX}/static",
        **context,
    }
    return templates.TemplateResponse(request, template, page, status_code=http_status)


def _param(request: Request, name: str, default: str = "", max_length: int = 200) -> str:
    return request.query_params.get(name, default).strip()[:max_length]


def _unavailable(answer: ApiAnswer, what: str) -> str:
    if answer.missing:
        return f"This server does not serve {answer.path} yet, so there is no {what} to show."
    return answer.problem()


def dashboard_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get(PREFIX)
    async def ui_root() -> Response:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    @router.get(f"{PREFIX}/")
    async def overview(request: Request) -> Response:
        api = ApiReader(request)
        health, providers, status, market = await asyncio.gather(
            api.get("/healthz"), api.get("/providers"), api.get("/status"), api.get("/market")
        )
        by_state = views.jobs_by_state(status.json())  # counted by the store, not a page of jobs
        return render(
            request,
            "overview.html",
            title="Overview",
            poll_ms=SLOW_POLL_MS,
            health=health.body if isinstance(health.body, dict) else {},
            health_ok=health.ok,
            providers=views.provider_states(providers.json()),
            providers_problem=_unavailable(providers, "provider state"),
            counts=views.ordered_counts(by_state),
            job_total=sum(by_state.values()),
            models=market.json().get("gpu_models", []),
            market_problem=_unavailable(market, "market"),
        )

    @router.get(f"{PREFIX}/orderbook")
    async def orderbook(request: Request) -> Response:
        instance_type = _param(request, "instance_type", INSTANCE_TYPES[0], 64) or INSTANCE_TYPES[0]
        node_count = _param(request, "node_count", "1", 12) or "1"
        answer = await ApiReader(request).get(
            "/orderbook", {"instance_type": instance_type, "node_count": node_count}
        )
        book = answer.json()
        return render(
            request,
            "orderbook.html",
            title="Orderbook",
            instance_type=instance_type,
            node_count=node_count,
            instance_types=INSTANCE_TYPES,
            book=book,
            view=views.orderbook_view(book) if book else None,
            problem=answer.problem(),
        )

    @router.get(f"{PREFIX}/cluster")
    async def cluster(request: Request) -> Response:
        after = _param(request, "after", "", 1000)
        answer = await ApiReader(request).get("/nodes", {"limit": NODES_PAGE, "after": after})
        page = answer.json()
        return render(
            request,
            "cluster.html",
            title="Cluster",
            cluster=views.cluster_view(page, datetime.now(UTC)) if answer.ok else None,
            next_url=views.page_url(f"{PREFIX}/cluster", {}, page.get("next")),
            prev_url=views.page_url(f"{PREFIX}/cluster", {}, page.get("prev")),
            first_url=f"{PREFIX}/cluster" if after else None,
            problem=_unavailable(answer, "GPU slot map"),
        )

    @router.get(f"{PREFIX}/jobs")
    async def jobs(request: Request) -> Response:
        state = _param(request, "state", "", 20)
        after = _param(request, "after", "", 1000)
        answer = await ApiReader(request).get(
            "/jobs", {"state": state, "limit": JOBS_PAGE, "order": "newest", "after": after}
        )
        page = answer.json()
        job_list = page.get("jobs", [])
        return render(
            request,
            "jobs.html",
            title="Jobs",
            state=state.upper(),
            states=views.JOB_STATES,
            jobs=views.job_rows(job_list, datetime.now(UTC)),
            counts=views.state_counts(job_list),
            page_size=JOBS_PAGE,
            next_url=views.page_url(f"{PREFIX}/jobs", {"state": state}, page.get("next")),
            prev_url=views.page_url(f"{PREFIX}/jobs", {"state": state}, page.get("prev")),
            first_url=views.list_url(f"{PREFIX}/jobs", {"state": state}) if after else None,
            problem=answer.problem(),
        )

    @router.get(f"{PREFIX}/jobs/{{job_id:path}}")
    async def job(request: Request, job_id: str) -> Response:
        api = ApiReader(request)
        found, explain = None, None
        if 0 < len(job_id) <= 200 and "/" not in job_id:
            quoted = quote(job_id, safe="")
            found, explain = await asyncio.gather(
                api.get(f"/jobs/{quoted}"), api.get(f"/jobs/{quoted}/explain")
            )
        rows = views.job_rows([found.json()], datetime.now(UTC)) if found is not None else []
        if found is None or explain is None or not found.ok or not rows:
            return render(
                request,
                "job.html",
                http_status=404,
                title="Job not found",
                job_id=job_id,
                job=None,
                problem=found.problem() if found is not None else f"no job has id {job_id!r}",
            )
        return render(
            request,
            "job.html",
            title=f"Job {job_id}",
            job_id=job_id,
            job=rows[0],
            explain=views.explain_view(explain.json()) if explain.ok else None,
            explain_problem=_unavailable(explain, "explanation"),
        )

    @router.get(f"{PREFIX}/autoscaler")
    async def autoscaler(request: Request) -> Response:
        answer = await ApiReader(request).get("/autoscaler/status")
        return render(
            request,
            "autoscaler.html",
            title="Autoscaler",
            view=views.autoscaler_view(answer.json()) if answer.ok else None,
            legend=views.SLICE_LEGEND,
            problem=_unavailable(answer, "autoscaler status"),
        )

    @router.get(f"{PREFIX}/prices")
    async def prices(request: Request) -> Response:
        api = ApiReader(request)
        filters = {
            "gpu_model": _param(request, "gpu_model", "", 64),
            "provider": _param(request, "provider", "", 64),
            "source": _param(request, "source", "", 16),
            "sort": _param(request, "sort", "price_per_gpu_hour", 32) or "price_per_gpu_hour",
            "descending": "true"
            if _param(request, "descending", "", 8).lower() in {"1", "true", "yes"}
            else "",
        }
        answer, providers = await asyncio.gather(api.get("/prices", filters), api.get("/providers"))
        offers = answer.json().get("offers", [])
        return render(
            request,
            "prices.html",
            title="Prices",
            poll_ms=SLOW_POLL_MS,
            filters=filters,
            sort_urls=views.sort_urls(filters),
            offers=views.price_rows(offers),
            offer_total=len(offers),
            providers=views.provider_states(providers.json()),
            problem=answer.problem(),
        )

    @router.get(f"{PREFIX}/costs")
    async def costs(request: Request) -> Response:
        api = ApiReader(request)
        answer, blocks = await asyncio.gather(api.get("/costs"), api.get("/blocks"))
        return render(
            request,
            "costs.html",
            title="Costs",
            view=views.costs_view(answer.json()) if answer.ok else None,
            problem=_unavailable(answer, "spend"),
            blocks=views.block_rows(blocks.json(), datetime.now(UTC)) if blocks.ok else [],
            blocks_problem=_unavailable(blocks, "contract"),
        )

    return router


STATIC_PATH = f"{PREFIX}/static"


def mount_dashboard(app: FastAPI, dependencies: Sequence[Any] = ()) -> None:
    """Serve the dashboard's pages under /ui (each with ``dependencies``: who may see them) and its script
    and styles under /ui/static (``STATIC_PATH``: public, no data)."""
    app.include_router(dashboard_router(), dependencies=list(dependencies))
    for name in templates.env.list_templates():  # warm start: compiled now, not on the first page view
        templates.env.get_template(name)
    app.mount(STATIC_PATH, StaticFiles(directory=str(STATIC_DIR)), name="dashboard-static")


def wants_html(accept: str) -> bool:
    """A browser's ``Accept`` (text/html before JSON); curl's ``*/*`` and JSON clients get JSON."""
    accept = accept.lower()
    if "text/html" not in accept:
        return False
    return "application/json" not in accept or accept.index("text/html") < accept.index("application/json")
