"""The API over the real control plane and the built-in market, on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.runtime import ControlPlane
from tests.api.real_control_plane import real_api, wait_for
from tests.api.test_jobs_api import problem_of
from tests.api.test_orderbook_api import assert_seed_shape

JOB = {
    "tier": "FAST",
    "gpu_count": 2,
    "vram_per_gpu_gb": 40,
    "cpu_cores": 8,
    "ram_gb": 64,
    "expected_duration_sec": 3,
    "priority": 1,
    "name": "api-test",
}
FINISHED = {"SUCCEEDED", "FAILED", "CANCELLED", "REJECTED"}


@pytest.fixture
def real(db_url: str, tmp_path: Path) -> Iterator[tuple[httpx.Client, ControlPlane]]:
    """The API over a started control plane; every test runs on SQLite and on PostgreSQL."""
    with real_api(db_url, tmp_path) as (url, control_plane), httpx.Client(base_url=url, timeout=60) as client:
        yield client, control_plane


@pytest.fixture
def sqlite_real(sqlite_url: str, tmp_path: Path) -> Iterator[httpx.Client]:
    with real_api(sqlite_url, tmp_path) as (url, _), httpx.Client(base_url=url, timeout=60) as client:
        yield client


def test_a_job_is_accepted_pending_then_runs_and_succeeds(real: tuple[httpx.Client, ControlPlane]) -> None:
    client, _ = real
    response = client.post("/jobs", json=JOB)

    assert response.status_code == 201, response.text
    job = response.json()
    assert job["state"] == "PENDING"
    assert job["reason"]

    running, _ = wait_for(client, job["id"], lambda j: j["state"] in {"RUNNING"} | FINISHED)
    assert running["state"] in {"RUNNING", "SUCCEEDED"}, running
    assert running["started_at"] is not None

    finished, seen = wait_for(client, job["id"], lambda j: j["state"] in FINISHED)
    assert finished["state"] == "SUCCEEDED", (finished, seen)
    assert finished["finished_at"] is not None and finished["reason"]
    listed = client.get("/jobs", params={"state": "succeeded"}).json()
    assert [j["id"] for j in listed["jobs"]] == [job["id"]]
    health = client.get("/healthz").json()
    assert (health["status"], health["role"]) == ("ok", "leader")


def test_a_cancelled_job_ends_cancelled(real: tuple[httpx.Client, ControlPlane]) -> None:
    client, _ = real
    job = client.post("/jobs", json={**JOB, "expected_duration_sec": 3600}).json()

    response = client.delete(f"/jobs/{job['id']}")

    assert response.status_code == 202, response.text
    assert response.json()["cancel_requested"] is True
    finished, seen = wait_for(client, job["id"], lambda j: j["state"] in FINISHED)
    assert finished["state"] == "CANCELLED", (finished, seen)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"gpu_count": -1}, "gpu_count"),
        ({"tier": "ECONOMY"}, "tier"),
        ({"tier": None}, "tier"),
        ({"expected_duration_sec": -5}, "expected_duration_sec"),
    ],
)
def test_bad_input_is_422_naming_the_field_and_nothing_is_stored(
    sqlite_real: httpx.Client, change: dict[str, Any], field: str
) -> None:
    body = {k: v for k, v in {**JOB, **change}.items() if v is not None}

    problem = problem_of(sqlite_real.post("/jobs", json=body), 422)

    assert [e["field"] for e in problem["errors"]] == [field]
    assert sqlite_real.get("/jobs").json()["jobs"] == []


def test_a_job_larger_than_any_offer_is_refused_with_the_markets_numbers_and_not_stored(
    real: tuple[httpx.Client, ControlPlane],
) -> None:
    client, _ = real
    problem = problem_of(client.post("/jobs", json={**JOB, "gpu_count": 5000}), 422)

    assert problem["type"] == "urn:scalar:problem:job-rejected"
    (error,) = problem["errors"]
    assert (error["field"], error["code"], error["need"]) == ("gpu_count", "too_large", 5000)
    assert isinstance(error["have"], int) and 8 <= error["have"] < 5000
    assert error["fix"].startswith(f"ask for at most {error['have']} GPUs")
    assert client.get("/jobs").json()["jobs"] == []


def test_more_vram_than_any_gpu_is_refused_naming_vram(sqlite_real: httpx.Client) -> None:
    problem = problem_of(sqlite_real.post("/jobs", json={**JOB, "vram_per_gpu_gb": 4000}), 422)

    (error,) = problem["errors"]
    assert (error["field"], error["code"]) == ("vram_per_gpu_gb", "vram_too_large")
    assert sqlite_real.get("/jobs").json()["jobs"] == []


def test_an_unknown_job_is_a_404_problem(sqlite_real: httpx.Client) -> None:
    assert problem_of(sqlite_real.get("/jobs/job-nope"), 404)["errors"][0]["field"] == "job_id"
    assert problem_of(sqlite_real.delete("/jobs/job-nope"), 404)["errors"][0]["field"] == "job_id"


@pytest.mark.parametrize("instance_type", ["8xH100", "8xH200"])
def test_the_markets_orderbook_has_the_seeds_shape(sqlite_real: httpx.Client, instance_type: str) -> None:
    response = sqlite_real.get("/orderbook", params={"instance_type": instance_type, "node_count": 2})

    assert response.status_code == 200, response.text
    book = response.json()
    assert_seed_shape(book)
    assert book["instance_type"] == instance_type
    assert book["metadata"] == {"required_gpus": 16, "node_count": 2, "gpus_per_node": 8}
    prices = [a["price"] for a in book["asks"]]
    assert prices == sorted(prices)
    assert book["asks"][-1]["cumulative_quantity"] == book["total_ask_liquidity"]
    assert book["optimal_price"] in prices


def test_an_instance_type_without_a_book_is_a_404_problem(sqlite_real: httpx.Client) -> None:
    problem = problem_of(sqlite_real.get("/orderbook", params={"instance_type": "8xA100"}), 404)
    assert problem["errors"][0]["field"] == "instance_type"


valid_jobs = st.fixed_dictionaries(
    {
        "tier": st.sampled_from(["FAST", "FLEX", "fast", "Flex"]),
        "gpu_count": st.integers(min_value=0, max_value=100_000),
    },
    optional={
        "vram_per_gpu_gb": st.floats(min_value=0, max_value=10_000),
        "cpu_cores": st.floats(min_value=0, max_value=100_000),
        "ram_gb": st.floats(min_value=0, max_value=1_000_000),
        "expected_duration_sec": st.floats(min_value=0.001, max_value=366 * 86_400),
        "priority": st.integers(min_value=-(10**9), max_value=10**9),
        "name": st.text(min_size=1, max_size=200).filter(lambda s: s.isprintable() and s.strip()),
        "gpu_models": st.lists(
            st.sampled_from(["H100", "h100", "nvidia-a100-80gb", "B200", "TPU", "é"]), min_size=1, max_size=3
        ),
        "share_gpu": st.booleans(),
    },
)


def test_any_job_the_schema_allows_is_accepted_or_refused_never_a_500(sqlite_real: httpx.Client) -> None:
    @settings(max_examples=60)
    @given(valid_jobs)
    def post(body: dict[str, Any]) -> None:
        response = sqlite_real.post("/jobs", json=body)
        assert response.status_code in {201, 422}, (body, response.status_code, response.text)
        if response.status_code == 201:
            job = response.json()
            assert sqlite_real.get(f"/jobs/{job['id']}").json()["id"] == job["id"]
        else:
            assert response.json()["type"] == "urn:scalar:problem:job-rejected"

    post()
