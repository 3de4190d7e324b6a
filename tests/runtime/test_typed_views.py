"""The typed cluster views: each model in ``wire/views.py`` is the one declaration of its answer's fields.
A key the runtime's view builder fills without the model declaring it would be dropped from every surface
(the API, ``scalar``'s commands and the dashboard all read the model), so the keys must match, nested rows
included, over a cluster with jobs, nodes and contracts in it."""

from __future__ import annotations

import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from scalar.runtime import budgets as budgets_mod
from scalar.runtime import preview as job_preview
from scalar.runtime import views_market
from scalar.runtime.plane.access import AccessService
from scalar.runtime.plane.cluster import ClusterService
from scalar.runtime.plane.core import PlaneCore
from scalar.runtime.plane.jobs import JobService
from scalar.wire.budgets import BudgetsOut
from scalar.wire.jobs import JobOut
from scalar.wire.views import (
    AutoscalerOut,
    BlocksOut,
    CostsOut,
    ExplanationOut,
    NodesOut,
    PreviewOut,
    StatusOut,
)
from tests.runtime.helpers import Clock, job, settings_for


@pytest.fixture
def driven(sqlite_url: str, tmp_path: Path) -> Iterator[PlaneCore]:
    """A core that bought capacity and runs two jobs (one of each tenant)."""
    core = PlaneCore(settings_for(sqlite_url, tmp_path), clock=Clock(), live_env={})
    try:
        jobs = JobService(core, AccessService(core).secret_box)
        jobs.submit_job({**job(1, 600), "tenant": "team-a"})
        jobs.submit_job({**job(1, 600), "tenant": "team-b"})
        assert isinstance(core.clock, Clock)
        for _ in range(30):
            core.clock.advance(1)
            core.run_once()
            while core.run_executor_once():
                pass
        yield core
    finally:
        core.stop()


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (itself, in a list, or optional), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


# Keys the runtime fills that a model may leave out (none: every key the runtime fills is declared).
UNDECLARED: dict[str, list[str]] = {}


def assert_declared(
    answer: Any, model: type[BaseModel], where: str = "", unfilled: Sequence[str] = ()
) -> int:
    """``answer``'s keys are ``model``'s fields (sent in the model's order), recursively (but ``UNDECLARED``,
    and the top level's ``unfilled`` fields, which another layer fills); returns how many rows it checked."""
    assert isinstance(answer, dict), (where, answer)
    names = [f.serialization_alias or f.alias or name for name, f in model.model_fields.items()]
    names = [n for n in names if n not in unfilled]
    assert sorted(answer) == sorted(names + UNDECLARED.get(where, [])), where
    checked = 1
    for name, field in model.model_fields.items():
        inner = _model_of(field.annotation)
        value = answer.get(field.serialization_alias or field.alias or name)
        if inner is None or value is None:
            continue
        for row in value if isinstance(value, list) else [value]:
            checked += assert_declared(row, inner, f"{where}.{name}")
    return checked


def test_the_status_model_declares_every_key_the_runtime_fills(driven: PlaneCore) -> None:
    cluster = ClusterService(driven)
    answer = views_market.status_summary(cluster.views(), driven.health())
    assert answer["jobs_total"] == 2
    assert assert_declared(answer, StatusOut) == 5  # the status, its GPUs, spend, slices and step latency
    typed = cluster.status()
    assert isinstance(typed, StatusOut)
    assert typed.model_dump(mode="json") == answer


def test_the_costs_model_declares_every_key_the_runtime_fills(driven: PlaneCore) -> None:
    cluster = ClusterService(driven)
    answer = views_market.costs(cluster.views(), 4)
    assert {t["tenant"] for t in answer["by_tenant"]} >= {"team-a", "team-b"}
    # the costs, a provider, a block and its tenants, the costs' tenants, the series' points
    assert assert_declared(answer, CostsOut) >= 1 + 1 + 1 + 2 + 2 + 4
    typed = cluster.costs(4)
    assert isinstance(typed, CostsOut) and typed.model_dump(mode="json") == answer


def test_the_nodes_and_blocks_models_declare_every_key_the_runtime_fills(driven: PlaneCore) -> None:
    cluster = ClusterService(driven)
    # the page's paging fields are the API's (routes_cluster.py), filled after the runtime answered
    paging = ["limit", "after", "next", "prev"]
    nodes = cluster.views().nodes()
    assert nodes["count"] >= 1 and any(n["jobs"] for n in nodes["nodes"])
    # the page, each node and its GPUs, the totals
    assert assert_declared(nodes, NodesOut, unfilled=paging) >= 1 + nodes["count"] * 2 + 1
    blocks = cluster.views().blocks()
    assert assert_declared(blocks, BlocksOut, unfilled=paging) == 1 + blocks["count"] + 1
    typed_nodes, typed_blocks = cluster.nodes(), cluster.blocks()
    assert isinstance(typed_nodes, NodesOut) and isinstance(typed_blocks, BlocksOut)
    assert typed_nodes.model_dump(mode="json", exclude=set(paging)) == nodes
    assert typed_blocks.model_dump(mode="json", exclude=set(paging)) == blocks


def test_the_budgets_model_declares_every_key_the_runtime_fills(driven: PlaneCore) -> None:
    access = AccessService(driven)
    limits = [
        {"scope": "team-a", "usd_per_hour": "2"},
        {"scope": "global", "usd_per_period": "9", "period": "month"},
    ]
    typed = access.put_budgets(limits, actor="test")
    store, _ = driven.opened()
    answer = budgets_mod.get_limits(store, driven.clock())
    assert assert_declared(answer, BudgetsOut) == 1 + 2 + 2  # the answer, two limits, two scopes' usage
    assert (
        isinstance(typed, BudgetsOut)
        and typed.model_dump(mode="json") == answer == access.budgets().model_dump()
    )


def test_the_explanation_model_declares_every_key_the_runtime_fills(driven: PlaneCore) -> None:
    cluster = ClusterService(driven)
    store, _ = driven.opened()
    with store.read() as tx:
        job_ids = [r.id for r in tx.list_projection("jobs", None, limit=10)]
    checked = 0
    for job_id in job_ids:
        answer = cluster.views().explain(job_id)
        assert answer is not None and answer["story"], job_id
        # the answer, its placement and rejections, routing, purchase and its story's entries
        checked += assert_declared(answer, ExplanationOut)
        typed = cluster.explain(job_id)
        assert isinstance(typed, ExplanationOut)
        assert typed.model_dump(mode="json", by_alias=True) == answer
    assert checked >= len(job_ids) * 3  # each with a story of at least two decisions
    assert cluster.explain("job-none") is None


def test_the_autoscaler_model_declares_every_key_the_runtime_fills(driven: PlaneCore) -> None:
    cluster = ClusterService(driven)
    for all_groups in (False, True):
        answer = views_market.autoscaler_status(cluster.views(), all_groups)
        assert answer["source"] == "leader" and answer["groups"] and answer["recent_actions"]
        # the answer, its groups and their slices, the slice totals, the actions, consolidation
        assert assert_declared(answer, AutoscalerOut) >= 1 + 2 * len(answer["groups"]) + 1 + 1
        typed = cluster.autoscaler_status(all_groups)
        assert isinstance(typed, AutoscalerOut)
        # the model's order is the API's (the runtime fills consolidation before unmet_by_reason)
        assert typed.model_dump(mode="json") == answer


@pytest.mark.parametrize(
    "fields",
    [
        job(1, 600),  # fits on a READY node
        {**job(8, 600), "vram_per_gpu_gb": 80},  # needs a purchase
    ],
)
def test_the_preview_model_declares_every_key_the_runtime_fills(
    driven: PlaneCore, fields: dict[str, Any]
) -> None:
    jobs = JobService(driven, AccessService(driven).secret_box)
    spec, problems = job_preview.checked_spec(
        fields, driven.settings, jobs._validation_offers(driven.clock()), driven.clock()
    )
    assert spec is not None and not problems
    store, _ = driven.opened()
    answer = job_preview.preview(store, driven.settings, spec, driven.clock())
    assert answer["node"] is not None or answer["purchase"] is not None, answer["reason"]
    assert assert_declared(answer, PreviewOut) == 2  # the preview and its node or purchase
    typed = jobs.preview_job(fields)
    assert isinstance(typed, PreviewOut)
    assert typed.model_dump(mode="json") == job_preview.preview(store, driven.settings, spec, driven.clock())


# Keys of a stored job document the API never shows: the serverless endpoint a worker's job runs for (the
# endpoints read the documents, plane/jobs.py's JobDocuments).
INTERNAL_JOB_KEYS = ("endpoint_id",)
# JobOut's fields that other calls fill: cancel_job's cancel_requested, get_job's allocated_ports (the agent's),
# and ports, stored only when a job asks for some.
FILLED_BY_OTHER_CALLS = ("cancel_requested", "allocated_ports", "ports")


def test_the_job_model_declares_every_key_the_runtime_fills(driven: PlaneCore) -> None:
    jobs = JobService(driven, AccessService(driven).secret_box)
    pending = jobs.submit_document({**job(1, 60), "name": "queued"})  # accepted, not stepped yet
    documents = [pending, *(jobs.get_document(j.id) for j in jobs.list_jobs())]
    assert {d["state"] for d in documents if d is not None} >= {"PENDING", "RUNNING"}
    for document in documents:
        assert document is not None
        shown = {k: v for k, v in document.items() if k not in INTERNAL_JOB_KEYS}
        assert assert_declared(shown, JobOut, unfilled=FILLED_BY_OTHER_CALLS) >= 1
        typed = jobs.get_job(document["id"])
        assert isinstance(typed, JobOut) and typed == JobOut.model_validate(document)
    running = next(d for d in documents if d is not None and d["state"] == "RUNNING")
    rows = 1 + len(running["placements"]) + len(running["placement_history"])
    shown = {k: v for k, v in running.items() if k not in INTERNAL_JOB_KEYS}
    assert running["placements"] and assert_declared(shown, JobOut, unfilled=FILLED_BY_OTHER_CALLS) == rows
