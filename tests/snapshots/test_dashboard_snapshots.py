"""The dashboard over the snapshot scenario: the view models its templates render (``scalar.web.views``,
fed the API's JSON as the pages feed them) and the HTML of its pages, with the wall clock frozen at the
scenario's instant."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from scalar.api.app import create_app
from scalar.web import views
from tests.snapshots.conftest import Snapshot
from tests.snapshots.normalise import normalise_json, normalise_text
from tests.snapshots.scenario import Scenario, frozen_now


@pytest.fixture(scope="module")
def api(scenario: Scenario) -> Iterator[TestClient]:
    with TestClient(create_app(scenario.plane)) as client:
        yield client


def plain(value: Any) -> Any:
    """A view model as JSON values (its dataclasses as dicts, tuples as lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


ViewOf = Callable[[TestClient, Scenario], Any]
VIEWS: dict[str, ViewOf] = {
    "overview_counts": lambda c, s: views.ordered_counts(c.get("/status").json()["jobs_by_state"]),
    "orderbook": lambda c, s: views.orderbook_view(
        c.get("/orderbook", params={"instance_type": "8xH100", "node_count": 1}).json()
    ),
    "cluster": lambda c, s: views.cluster_view(c.get("/nodes").json(), s.now),
    "jobs": lambda c, s: views.job_rows(c.get("/jobs?order=newest").json()["jobs"], s.now),
    "job_state_counts": lambda c, s: views.state_counts(c.get("/jobs").json()["jobs"]),
    "job_explain": lambda c, s: views.explain_view(c.get(f"/jobs/{s.job_ids['train-a']}/explain").json()),
    "autoscaler": lambda c, s: views.autoscaler_view(c.get("/autoscaler/status").json()),
    "costs": lambda c, s: views.costs_view(c.get("/costs").json()),
    "blocks": lambda c, s: views.block_rows(c.get("/blocks").json(), s.now),
    "prices": lambda c, s: views.price_rows(c.get("/prices?gpu_model=V100").json()["offers"]),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view(name: str, api: TestClient, scenario: Scenario, snapshot: Snapshot) -> None:
    view = plain(VIEWS[name](api, scenario))
    snapshot(f"web/view_{name}.json", normalise_json(view, tmp_dir=scenario.tmp_dir))


PAGES = {
    "overview": "/ui/",
    "jobs": "/ui/jobs",
    "job": "/ui/jobs/{train-a}",
    "job_unknown": "/ui/jobs/job-20990101T000000-000000",
    "cluster": "/ui/cluster",
    "autoscaler": "/ui/autoscaler",
    "costs": "/ui/costs",
    "prices": "/ui/prices?gpu_model=V100",
    "orderbook": "/ui/orderbook?instance_type=8xH100&node_count=1",
    "jobs_bad_state": "/ui/jobs?state=SLEEPING",
}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_page(
    name: str, api: TestClient, scenario: Scenario, snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    with frozen_now(monkeypatch, scenario.now):
        page = api.get(PAGES[name].format(**scenario.job_ids), headers={"accept": "text/html"})
    text = f"status {page.status_code}\n{page.text}\n"
    snapshot(f"web/page_{name}.html", normalise_text(text, tmp_dir=scenario.tmp_dir))
