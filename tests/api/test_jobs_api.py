"""POST/GET/DELETE /jobs over real HTTP, served over a real control plane on a fresh SQLite database.

The plane is opened but not started (``tests/api/real_control_plane.py``): an accepted job stays PENDING
until a test makes the controller step (``cp.run_once()``), and what a submission wrote is read back from
the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import make_url

from scalar.api.app import create_app
from scalar.engine.lifecycle import JobState
from scalar.runtime import ControlPlane, load_settings
from scalar.wire.jobs import JOB_STATES
from tests.api.live_server import serve
from tests.api.real_control_plane import opened_api, stored_jobs

PROBLEM = "application/problem+json"

JOB = {
    "tier": "FAST",
    "gpu_count": 4,
    "vram_per_gpu_gb": 40,
    "cpu_cores": 16,
    "ram_gb": 128,
    "expected_duration_sec": 1800,
    "priority": 5,
}


def problem_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["type"].startswith("urn:scalar:problem:")
    assert body["title"] and body["detail"]
    assert "Traceback" not in response.text
    return body


def fields_of(body: dict[str, Any]) -> list[str]:
    return [e["field"] for e in body["errors"]]


def test_a_submitted_job_comes_back_201_pending_with_its_id_and_can_be_read(
    client: httpx.Client, cp: ControlPlane
) -> None:
    response = client.post("/jobs", json={**JOB, "name": "finetune", "gpu_models": ["H100"]})

    assert response.status_code == 201, response.text
    job = response.json()
    assert job["state"] == "PENDING"
    assert job["id"]
    assert response.headers["location"] == f"/jobs/{job['id']}"
    assert (job["gpu_count"], job["name"], job["gpu_models"], job["priority"]) == (4, "finetune", ["H100"], 5)
    (stored,) = stored_jobs(cp)
    assert stored["id"] == job["id"]
    assert {k: stored[k] for k in (*JOB, "name", "gpu_models", "share_gpu")} == {
        **JOB, "name": "finetune", "gpu_models": ["H100"], "share_gpu": False
    }  # fmt: skip

    read = client.get(f"/jobs/{job['id']}")
    assert read.status_code == 200
    assert read.json()["state"] == "PENDING"
    assert read.json()["reason_code"] == "accepted" and read.json()["reason"]


def test_restartable_is_stored_as_given_and_defaults_to_false(client: httpx.Client, cp: ControlPlane) -> None:
    yes = client.post("/jobs", json={**JOB, "restartable": True})
    no = client.post("/jobs", json={**JOB, "restartable": False})
    default = client.post("/jobs", json=JOB)

    assert [r.status_code for r in (yes, no, default)] == [201, 201, 201]
    assert [r.json()["restartable"] for r in (yes, no, default)] == [True, False, False]
    assert [j["restartable"] for j in stored_jobs(cp)] == [True, False, False]


def test_defaults_fill_the_optional_fields_and_tier_is_case_insensitive(
    client: httpx.Client, cp: ControlPlane
) -> None:
    response = client.post("/jobs", json={"tier": "flex", "gpu_count": 1})

    assert response.status_code == 201, response.text
    defaults = {
        "tier": "FLEX",
        "gpu_count": 1,
        "vram_per_gpu_gb": 0.0,
        "cpu_cores": 0.0,
        "ram_gb": 0.0,
        "expected_duration_sec": 3600.0,
        "priority": 0,
        "share_gpu": False,
        "restartable": False,
        "name": None,
        "gpu_models": None,
    }
    (stored,) = stored_jobs(cp)
    assert {k: stored[k] for k in defaults} == defaults
    assert {k: response.json()[k] for k in defaults} == defaults


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"gpu_count": -2}, "gpu_count"),
        ({"tier": "SLOW"}, "tier"),
        ({"gpu_count": 1.5}, "gpu_count"),
        ({"gpu_count": True}, "gpu_count"),
        ({"gpu_count": "4"}, "gpu_count"),
        ({"expected_duration_sec": 0}, "expected_duration_sec"),
        ({"vram_per_gpu_gb": -1}, "vram_per_gpu_gb"),
        ({"priority": 10**12}, "priority"),
        ({"name": ""}, "name"),
        ({"name": "a\x00b"}, "name"),
        ({"gpu_models": []}, "gpu_models"),
        ({"gpu_models": [""]}, "gpu_models[0]"),
        ({"share_gpu": "yes"}, "share_gpu"),
        ({"restartable": "yes"}, "restartable"),
    ],
)
def test_bad_fields_are_422_problems_naming_the_field_and_nothing_is_stored(
    client: httpx.Client, cp: ControlPlane, change: dict[str, Any], field: str
) -> None:
    body = problem_of(client.post("/jobs", json={**JOB, **change}), 422)

    assert (body["type"], body["title"]) == ("urn:scalar:problem:invalid-request", "Invalid request")
    assert fields_of(body) == [field]
    assert body["errors"][0]["problem"] and body["errors"][0]["fix"]
    assert body["detail"].startswith(f"{field}: ")
    assert stored_jobs(cp) == []
    assert client.get("/jobs").json()["jobs"] == []


def test_a_bad_value_says_what_was_wrong_and_how_to_fix_it(client: httpx.Client) -> None:
    # the wording is the feature here: the value given, the bound, and a fix
    body = problem_of(client.post("/jobs", json={**JOB, "gpu_count": -2}), 422)

    assert body["errors"] == [
        {"field": "gpu_count", "problem": "must be >= 0, got -2", "fix": body["errors"][0]["fix"]}
    ]
    assert "whole number of GPUs" in body["errors"][0]["fix"]


def test_a_missing_field_is_named_with_how_to_give_it(client: httpx.Client) -> None:
    body = problem_of(client.post("/jobs", json={"gpu_count": 2}), 422)

    assert body["errors"] == [
        {
            "field": "tier",
            "problem": "is required",
            "fix": "use FAST (capacity is bought now) or FLEX (waits for capacity under the FLEX price cap)",
        }
    ]


def test_unknown_fields_are_refused_with_the_field_they_probably_meant(client: httpx.Client) -> None:
    body = problem_of(client.post("/jobs", json={"tier": "FAST", "gpus": 2, "id": "mine"}), 422)

    by_field = {e["field"]: e for e in body["errors"]}
    assert set(by_field) == {"gpu_count", "gpus", "id"}
    assert by_field["gpus"]["problem"] == "is not a known field"
    assert "did you mean 'gpu_count'?" in by_field["gpus"]["fix"]
    assert "the server chooses job ids" in by_field["id"]["fix"]
    assert body["detail"] == "gpu_count: is required (and 2 more problems)"


@pytest.mark.parametrize(
    "raw", [b"{not json", b"[1, 2]", b'"a job"', b"", b'{"tier": "FAST", "gpu_count": NaN}']
)
def test_a_body_that_is_not_a_job_object_is_a_422_problem(client: httpx.Client, raw: bytes) -> None:
    response = client.post("/jobs", content=raw, headers={"content-type": "application/json"})

    body = problem_of(response, 422)
    assert body["errors"], body


def test_a_job_larger_than_any_offer_is_refused_with_the_reason_and_its_numbers(
    client: httpx.Client, cp: ControlPlane
) -> None:
    gpus = problem_of(client.post("/jobs", json={**JOB, "gpu_count": 4096}), 422)
    vram_body = problem_of(client.post("/jobs", json={**JOB, "vram_per_gpu_gb": 5000}), 422)

    for body in (gpus, vram_body):
        assert (body["type"], body["title"]) == ("urn:scalar:problem:job-rejected", "Job refused")
    (too_large,) = gpus["errors"]
    (vram,) = vram_body["errors"]
    # the numbers come from the built-in market's offers and the scale groups: what is asked and what fits
    assert (too_large["code"], too_large["field"], too_large["need"]) == ("too_large", "gpu_count", 4096)
    assert 0 < too_large["have"] < 4096
    assert too_large["fix"].startswith(f"ask for at most {too_large['have']} GPUs")
    assert (vram["code"], vram["field"], vram["need"]) == ("vram_too_large", "vram_per_gpu_gb", 5000)
    assert 0 < vram["have"] < 5000
    assert f"{vram['have']:g} GB" in vram["fix"]
    assert stored_jobs(cp) == []


def test_an_unknown_job_is_a_404_problem_on_read_and_on_cancel(client: httpx.Client) -> None:
    for response in (client.get("/jobs/job-9999"), client.delete("/jobs/job-9999")):
        body = problem_of(response, 404)
        assert body["type"] == "urn:scalar:problem:not-found"
        assert fields_of(body) == ["job_id"]
        assert "job-9999" in body["detail"]


def test_cancel_answers_202_and_the_job_is_cancelled_once_the_controller_steps(
    client: httpx.Client, cp: ControlPlane
) -> None:
    job_id = client.post("/jobs", json=JOB).json()["id"]

    accepted = client.delete(f"/jobs/{job_id}")
    assert accepted.status_code == 202, accepted.text
    assert (accepted.json()["id"], accepted.json()["state"]) == (job_id, "PENDING")  # the request is durable

    cp.run_once()
    assert client.get(f"/jobs/{job_id}").json()["state"] == "CANCELLED"

    # a finished job stays as it is: cancelling it again is accepted and changes nothing
    again = client.delete(f"/jobs/{job_id}")
    assert again.status_code == 202 and again.json()["state"] == "CANCELLED"
    cp.run_once()
    assert client.get(f"/jobs/{job_id}").json()["state"] == "CANCELLED"


def test_list_filters_by_state_case_insensitively_and_pages(client: httpx.Client, cp: ControlPlane) -> None:
    ids = [client.post("/jobs", json={**JOB, "name": f"j{i}"}).json()["id"] for i in range(5)]
    client.delete(f"/jobs/{ids[1]}")
    cp.run_once()  # the controller acts on the cancellation

    everything = client.get("/jobs", params={"order": "oldest"}).json()
    assert [j["id"] for j in everything["jobs"]] == ids
    assert (everything["count"], everything["limit"], everything["offset"]) == (5, 100, 0)
    assert everything["next"] is None and everything["prev"] is None

    pending = client.get("/jobs", params={"state": "pending", "order": "oldest"}).json()
    assert pending["state"] == "PENDING"
    assert [j["id"] for j in pending["jobs"]] == [ids[0], *ids[2:]]

    page = client.get("/jobs", params={"limit": 2, "offset": 1, "order": "oldest"}).json()
    assert [j["id"] for j in page["jobs"]] == ids[1:3]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"state": "DONE"}, "state"),
        ({"limit": 0}, "limit"),
        ({"limit": 5000}, "limit"),
        ({"offset": -1}, "offset"),
        ({"limit": "ten"}, "limit"),
    ],
)
def test_bad_list_parameters_are_422_problems_naming_them(
    client: httpx.Client, params: dict[str, Any], field: str
) -> None:
    body = problem_of(client.get("/jobs", params=params), 422)
    assert fields_of(body) == [field]
    assert body["errors"][0]["fix"].startswith("give ")


def test_an_unexpected_error_is_a_500_problem_without_internals(
    client: httpx.Client, cp: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fields: Any) -> dict[str, Any]:
        raise RuntimeError("secret internal detail /etc/passwd")

    monkeypatch.setattr(cp, "submit_job", broken)  # a fault inside the real plane, as a bug would raise
    response = client.post("/jobs", json=JOB)

    body = problem_of(response, 500)
    assert body["type"] == "urn:scalar:problem:internal-error"
    assert "secret" not in response.text
    assert "RuntimeError" not in response.text


def test_unknown_paths_and_methods_are_problems_too(client: httpx.Client) -> None:
    assert problem_of(client.get("/nothing-here"), 404)["type"] == "urn:scalar:problem:not-found"
    assert problem_of(client.put("/jobs"), 405)["type"] == "urn:scalar:problem:method-not-allowed"


def with_password(url: str, password: str) -> str:
    """The URL with a password (the test server trusts loopback, so any password connects)."""
    return make_url(url).set(password=password).render_as_string(hide_password=False)


def test_healthz_answers_ok_and_names_no_database(pg_url: str, tmp_path: Path) -> None:
    database_url = with_password(pg_url, "hunter2")
    with opened_api(database_url, tmp_path) as (url, cp), httpx.Client(base_url=url, timeout=30) as client:
        cp.run_once()  # takes the lease: this process leads
        response = client.get("/healthz")

        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["status"], body["role"], body["problem"]) == ("ok", "leader", None)
        assert "hunter2" not in response.text and "127.0.0.1" not in response.text
        assert "database" not in body

        details = client.get("/healthz/details")  # (authentication is off here: the caller is an admin)
        assert details.json()["database"] == make_url(database_url).render_as_string(hide_password=True)
        assert ":***@127.0.0.1" in details.json()["database"]
        assert "hunter2" not in details.text


def test_healthz_is_a_503_with_retry_after_when_the_database_cannot_be_opened(
    pg_url: str, tmp_path: Path
) -> None:
    missing = make_url(pg_url).set(database=f"{make_url(pg_url).database}_missing", password="hunter2")
    settings = load_settings(
        None,
        {"data_dir": tmp_path, "database_url": missing.render_as_string(hide_password=False)},
        {},
    )
    with serve(create_app(ControlPlane(settings), auth_required=False)) as url:
        degraded = httpx.get(url + "/healthz", timeout=30)
        details = httpx.get(url + "/healthz/details", timeout=30)

    assert degraded.status_code == 503 and int(degraded.headers["retry-after"]) >= 1
    assert (degraded.json()["status"], degraded.json()["problem"]) == ("degraded", "database-unavailable")
    assert "hunter2" not in degraded.text and "hunter2" not in details.text


def test_openapi_documents_the_endpoints_and_problem_details(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()

    assert {"/healthz", "/orderbook", "/jobs", "/jobs/{job_id}"} <= set(spec["paths"])
    post = spec["paths"]["/jobs"]["post"]
    assert "201" in post["responses"]
    problem_schema = post["responses"]["422"]["content"]["application/problem+json"]["schema"]
    assert problem_schema["$ref"].endswith("/ProblemDetails")
    assert client.get("/docs").status_code == 200


def test_the_wire_job_states_are_the_engines() -> None:
    assert set(JOB_STATES) == {s.value for s in JobState}


def test_jobs_list_newest_first_by_default(client: httpx.Client) -> None:
    ids = [
        client.post("/jobs", json={"tier": "FAST", "gpu_count": 1, "name": f"n{i}"}).json()["id"]
        for i in range(3)
    ]
    oldest = client.get("/jobs", params={"order": "oldest"}).json()
    newest = client.get("/jobs").json()
    assert [j["id"] for j in oldest["jobs"]] == ids and oldest["order"] == "oldest"
    assert [j["id"] for j in newest["jobs"]] == ids[::-1] and newest["order"] == "newest"
    assert [j["id"] for j in client.get("/jobs", params={"order": "newest", "limit": 1}).json()["jobs"]] == [
        ids[-1]
    ]
    bad = client.get("/jobs", params={"order": "random"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "order"
    assert "oldest" in bad.json()["errors"][0]["fix"]


def _walk(client: httpx.Client, params: dict[str, Any]) -> list[list[str]]:
    pages, after = [], None
    while True:
        got = client.get("/jobs", params={**params, **({"after": after} if after else {})})
        assert got.status_code == 200, got.text
        body = got.json()
        pages.append([j["id"] for j in body["jobs"]])
        after = body["next"]
        if after is None:
            return pages


@pytest.mark.parametrize("order", ["newest", "oldest"])
def test_jobs_page_with_a_cursor_through_every_job_once(client: httpx.Client, order: str) -> None:
    ids = [client.post("/jobs", json={**JOB, "name": f"c{i}"}).json()["id"] for i in range(7)]
    pages = _walk(client, {"limit": 3, "order": order})
    assert [len(p) for p in pages] == [3, 3, 1]
    want = ids[::-1] if order == "newest" else ids
    assert [i for p in pages for i in p] == want

    first = client.get("/jobs", params={"limit": 3, "order": order}).json()
    second = client.get("/jobs", params={"limit": 3, "order": order, "after": first["next"]}).json()
    assert second["after"] == first["next"] and second["prev"] is not None
    back = client.get("/jobs", params={"limit": 3, "order": order, "after": second["prev"]}).json()
    assert [j["id"] for j in back["jobs"]] == want[:3] and back["prev"] is None

    # a job submitted while paging does not shift the pages already handed out
    client.post("/jobs", json={**JOB, "name": "late"})
    again = client.get("/jobs", params={"limit": 3, "order": order, "after": first["next"]}).json()
    assert [j["id"] for j in again["jobs"]] == want[3:6]


def test_a_cursor_with_an_offset_is_a_problem_naming_offset(client: httpx.Client) -> None:
    for i in range(2):
        client.post("/jobs", json={**JOB, "name": f"o{i}"})
    after = client.get("/jobs", params={"limit": 1}).json()["next"]
    body = problem_of(client.get("/jobs", params={"limit": 1, "after": after, "offset": 1}), 422)
    assert body["type"] == "urn:scalar:problem:invalid-request"
    assert fields_of(body) == ["offset"]


@pytest.mark.parametrize("after", ["not a cursor!", "eyJ4IjoxfQ", "x" * 1001])  # eyJ4IjoxfQ: {"x":1}
def test_a_bad_cursor_is_a_problem_naming_after(client: httpx.Client, after: str) -> None:
    body = problem_of(client.get("/jobs", params={"after": after}), 422)

    assert body["type"] == "urn:scalar:problem:invalid-request"
    assert fields_of(body) == ["after"]
    assert body["errors"][0]["fix"]


def test_a_cursor_that_is_not_one_says_so(client: httpx.Client) -> None:
    body = problem_of(client.get("/jobs", params={"after": "not a cursor!"}), 422)

    assert "not a cursor" in body["errors"][0]["problem"]


def test_a_cursor_of_another_listing_is_refused(client: httpx.Client) -> None:
    for i in range(3):
        client.post("/jobs", json={**JOB, "name": f"x{i}"})
    cursor = client.get("/jobs", params={"limit": 1}).json()["next"]
    assert cursor is not None
    other = problem_of(client.get("/jobs", params={"limit": 1, "after": cursor, "state": "RUNNING"}), 422)
    assert fields_of(other) == ["after"]
    assert "another listing" in other["detail"]  # says why a well-formed cursor does not apply here
    both = problem_of(client.get("/jobs", params={"limit": 1, "after": cursor, "offset": 1}), 422)
    assert fields_of(both) == ["offset"]


def test_a_limit_above_the_maximum_is_refused_not_clamped(client: httpx.Client) -> None:
    body = problem_of(client.get("/jobs", params={"limit": 1001}), 422)
    assert fields_of(body) == ["limit"]
    assert "1000" in body["errors"][0]["fix"]  # the fix names the maximum
