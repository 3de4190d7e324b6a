"""The JSON API's answers over the snapshot scenario: the main read routes and a few refusals."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from scalar.api.app import create_app
from tests.snapshots.conftest import Snapshot
from tests.snapshots.normalise import normalise_json
from tests.snapshots.scenario import Scenario


@pytest.fixture(scope="module")
def api(scenario: Scenario) -> Iterator[TestClient]:
    with TestClient(create_app(scenario.plane)) as client:
        yield client


def _answer(response: Any) -> dict[str, Any]:
    return {"status": response.status_code, "body": response.json()}


GETS = {
    "jobs": "/jobs",
    "jobs_running": "/jobs?state=running&limit=2",
    "jobs_newest": "/jobs?order=newest&limit=3",
    "job": "/jobs/{train-a}",
    "job_cancelled": "/jobs/{long-e}",
    "job_pending": "/jobs/{queued-f}",
    "job_explain": "/jobs/{train-a}/explain",
    "job_explain_pending": "/jobs/{queued-f}/explain",
    "nodes": "/nodes",
    "nodes_paged": "/nodes?limit=2",
    "blocks": "/blocks",
    "status": "/status",
    "costs": "/costs",
    "autoscaler_status": "/autoscaler/status",
    "prices": "/prices?gpu_model=V100&sort=price_per_gpu_hour",
    "prices_all_count": "/prices",
    "providers": "/providers",
    "orderbook": "/orderbook?instance_type=8xH100&node_count=1",
    "endpoints": "/endpoints",
    "budgets": "/budgets",
    "healthz": "/healthz",
    # refusals: each answers a problem document that names the field and how to fix it
    "error_unknown_job": "/jobs/job-20990101T000000-000000",
    "error_bad_state": "/jobs?state=SLEEPING",
    "error_bad_limit": "/jobs?limit=0",
    "error_bad_sort": "/prices?sort=colour",
    "error_unknown_instance_type": "/orderbook?instance_type=9xZ999&node_count=1",
    "error_unknown_route": "/no/such/route",
}


@pytest.mark.parametrize("name", sorted(GETS))
def test_get(name: str, api: TestClient, scenario: Scenario, snapshot: Snapshot) -> None:
    path = GETS[name].format(**scenario.job_ids)
    body = _answer(api.get(path))
    if name == "prices_all_count":  # over a hundred offers: their count and the first three
        offers = body["body"]["offers"]
        body["body"] = {"count": body["body"]["count"], "first": offers[:3]}
    snapshot(f"api/{name}.json", normalise_json(body, tmp_dir=scenario.tmp_dir))


BAD_SUBMISSIONS = {
    "error_submit_negative_gpus": {"tier": "FAST", "gpu_count": -1, "expected_duration_sec": 60},
    "error_submit_unknown_field": {"tier": "FAST", "gpu_count": 1, "expected_duration_sec": 60, "colour": 1},
    "error_submit_bad_tier": {"tier": "TURBO", "gpu_count": 1, "expected_duration_sec": 60},
    "error_submit_too_big": {"tier": "FAST", "gpu_count": 4096, "expected_duration_sec": 60},
}


@pytest.mark.parametrize("name", sorted(BAD_SUBMISSIONS))
def test_refused_submission(name: str, api: TestClient, scenario: Scenario, snapshot: Snapshot) -> None:
    answer = _answer(api.post("/jobs", json=BAD_SUBMISSIONS[name]))
    assert answer["status"] >= 400  # a refusal writes nothing: the scenario stays as it is
    snapshot(f"api/{name}.json", normalise_json(answer, tmp_dir=scenario.tmp_dir))


def test_refused_budget(api: TestClient, scenario: Scenario, snapshot: Snapshot) -> None:
    answer = _answer(api.put("/budgets", json={"limits": [{"scope": "global", "usd_per_hour": "-5"}]}))
    assert answer["status"] >= 400
    snapshot("api/error_budget_negative.json", normalise_json(answer, tmp_dir=scenario.tmp_dir))
