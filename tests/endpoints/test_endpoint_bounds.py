"""Bounds on serverless endpoints (issues 7 and 8), over real HTTP with authentication on.

Hostile specs, parameters and request bodies each get a 4xx problem naming the field and the fix (on
``/v2`` also RunPod's ``error``), never a 500, and nothing is stored; the worker list of an endpoint is
bounded (``workers_limit``, ``workers_count``, ``workers_truncated``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from scalar.store import endpoints as repo
from tests.endpoints.harness import spec
from tests.security.conftest import Secured, secured_api

_LONG_ID = "e" * 65


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Secured, httpx.Client, str]]:
    """One user token of team-a and one endpoint of its own (SQLite; the bounds do not depend on it)."""
    tmp: Path = tmp_path_factory.mktemp("bounds")
    with (
        secured_api(f"sqlite:///{tmp / 'bounds.db'}", tmp, rate_per_s=1e6, burst=1e6) as secured,
        secured.client(secured.token("team-a")) as client,
    ):
        created = client.post("/endpoints", json=spec("bounded"))
        assert created.status_code == 201, created.text
        yield secured, client, created.json()["id"]


def _problem(response: httpx.Response, status: int, field: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    fields = [e["field"] for e in body["errors"]]
    assert field in fields, (field, body)
    assert all(e["fix"] for e in body["errors"]), body
    return body


# (spec changes as raw JSON, the field the problem must name)
SPECS: list[tuple[str, str]] = [
    ('{"workersMax": 1000000}', "workersMax"),
    ('{"workersMin": 5000, "workersMax": 5000}', "workersMin"),
    ('{"scalerValue": 1e300}', "scalerValue"),
    ('{"scalerValue": NaN}', "scalerValue"),
    ('{"scalerValue": 1000000000}', "scalerValue"),
    ('{"gpuCount": 100000}', "gpuCount"),
    ('{"idleTimeout": Infinity}', "idleTimeout"),
    ('{"idleTimeout": 99999999999}', "idleTimeout"),
    ('{"executionTimeoutMs": 100000000000000000000}', "executionTimeoutMs"),
    ('{"executionTimeoutMs": -1}', "executionTimeoutMs"),
    (json.dumps({"gpus": ["ANY"] * 100}), "gpus"),
    (json.dumps({"gpus": ["x" * 1000]}), "gpus[0]"),
    (json.dumps({"cudaVersions": ["12.4"] * 100}), "cudaVersions"),
    (json.dumps({"locations": ["EU-RO-1"] * 100}), "locations"),
    (json.dumps({"locations": "x" * 5000}), "locations"),
    (json.dumps({"imageName": "i" * 5000}), "imageName"),
    (json.dumps({"handler": "m" * 300 + ":f"}), "handler"),
    (json.dumps({"gpuIds": "AMPERE_80," * 1000}), "gpuIds"),
    ('{"scalerType": "FASTEST"}', "scalerType"),
]


@pytest.mark.parametrize(("changes", "field"), SPECS)
def test_absurd_specs_are_refused_naming_the_field(
    api: tuple[Secured, httpx.Client, str], changes: str, field: str
) -> None:
    _, client, _ = api
    body = {**spec("absurd"), **json.loads(changes)}
    raw = json.dumps(body)  # NaN and Infinity stay what they were sent as
    response = client.post("/endpoints", content=raw, headers={"content-type": "application/json"})
    _problem(response, 422, field)
    assert [e["name"] for e in client.get("/endpoints").json()["endpoints"]] == ["bounded"]


def test_target_is_one_of_three(api: tuple[Secured, httpx.Client, str]) -> None:
    _, client, _ = api
    body = _problem(client.post("/endpoints", params={"target": "gcp"}, json=spec("t1")), 422, "target")
    assert "builtin, local or runpod" in body["errors"][0]["fix"]
    _problem(client.post("/endpoints", params={"target": "x" * 10_000}, json=spec("t2")), 422, "target")
    _problem(client.post("/endpoints", params={"target": "local"}, json=spec("t3")), 422, "handler")
    assert client.get("/endpoints").json()["count"] == 1
    schema = client.get("/openapi.json").json()  # the enum is in the documented schema
    params = schema["paths"]["/endpoints"]["post"]["parameters"]
    (target,) = [p for p in params if p["name"] == "target"]
    assert "runpod" in json.dumps(target["schema"]) and "Target" in json.dumps(schema["components"])


# (method, path template, query, the field the problem must name); {eid}: the fixture's endpoint
PARAMS: list[tuple[str, str, dict[str, Any] | None, str]] = [
    ("GET", "/endpoints", {"limit": 0}, "limit"),
    ("GET", "/endpoints", {"limit": 10**9}, "limit"),
    ("GET", "/endpoints", {"offset": -1}, "offset"),
    ("GET", "/endpoints", {"workers_limit": 5000}, "workers_limit"),
    ("GET", "/endpoints/{eid}", {"workers_limit": -1}, "workers_limit"),
    ("GET", f"/endpoints/{_LONG_ID}", None, "endpoint_id"),
    ("DELETE", f"/endpoints/{_LONG_ID}", None, "endpoint_id"),
    ("GET", "/endpoints/{eid}/logs", {"limit": 10**6}, "limit"),
    ("GET", f"/v2/{_LONG_ID}/health", None, "endpoint_id"),
    ("GET", "/v2/{eid}/status/" + "r" * 65, None, "request_id"),
    ("POST", "/v2/{eid}/cancel/" + "r" * 65, None, "request_id"),
    ("POST", "/v2/{eid}/runsync", {"wait": 10**9}, "wait"),
    ("POST", "/v2/{eid}/runsync", {"wait": -1}, "wait"),
    ("POST", "/v2/{eid}/runsync", {"wait": "NaN"}, "wait"),
]


@pytest.mark.parametrize(("method", "path", "query", "field"), PARAMS)
def test_parameters_have_both_ends(
    api: tuple[Secured, httpx.Client, str], method: str, path: str, query: dict[str, Any] | None, field: str
) -> None:
    _, client, eid = api
    body = {"input": {}} if method == "POST" and "/v2/" in path else None
    response = client.request(method, path.format(eid=eid), params=query, json=body)
    answer = _problem(response, 422, field)
    if path.startswith("/v2/"):
        assert answer["error"] == answer["detail"]  # RunPod clients read "error"
    assert client.get(f"/v2/{eid}/health").json()["jobs"]["inQueue"] == 0  # nothing queued


# (raw body of POST /v2/{eid}/run, status, the field the problem must name)
RUNS: list[tuple[str, int, str]] = [
    ("{}", 422, "input"),
    ('{"inputs": {}}', 422, "inputs"),
    ("[1, 2]", 422, "(body)"),
    ("not json", 400, "(body)"),
    ('{"input": {"x": NaN}}', 422, "input"),
    ('{"input": [Infinity]}', 422, "input"),
    ('{"input": ' + "[" * 100 + "]" * 100 + "}", 422, "input"),
    ('{"input": ' + "[" * 50_000 + "]" * 50_000 + "}", 422, "input"),
    (json.dumps({"input": {}, "webhook": "https://x/" + "a" * 3000}), 422, "webhook"),
    (json.dumps({"input": {}, "webhook": "ftp://example.com/hook"}), 422, "webhook"),
    (json.dumps({"input": {}, "webhook": 7}), 422, "webhook"),
    ('{"input": {}, "policy": {"executionTimeout": 1e300}}', 422, "policy.executionTimeout"),
    ('{"input": {}, "policy": {"executionTimeout": NaN}}', 422, "policy.executionTimeout"),
    ('{"input": {}, "policy": {"executionTimeout": 999999999999}}', 422, "policy.executionTimeout"),
    ('{"input": {}, "policy": {"ttl": 0}}', 422, "policy.ttl"),
    ('{"input": {}, "policy": {"ttl": -5}}', 422, "policy.ttl"),
    ('{"input": {}, "policy": {"lowPriority": "yes"}}', 422, "policy.lowPriority"),
    ('{"input": {}, "policy": {"retries": 3}}', 422, "policy.retries"),
    ('{"input": {}, "policy": 5}', 422, "policy"),
]


@pytest.mark.parametrize(("raw", "status", "field"), RUNS)
def test_run_bodies_are_bounded(
    api: tuple[Secured, httpx.Client, str], raw: str, status: int, field: str
) -> None:
    _, client, eid = api
    for route in ("run", "runsync?wait=0"):
        response = client.post(
            f"/v2/{eid}/{route}", content=raw, headers={"content-type": "application/json"}
        )
        answer = _problem(response, status, field)
        assert answer["error"] == answer["detail"]
    assert client.get(f"/v2/{eid}/health").json()["jobs"]["inQueue"] == 0


def test_an_input_past_the_size_limit_is_413(api: tuple[Secured, httpx.Client, str]) -> None:
    _, client, eid = api
    raw = json.dumps({"input": {"blob": "x" * (1024 * 1024)}})
    response = client.post(f"/v2/{eid}/run", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 413 and response.json()["errors"][0]["field"] == "(body)"
    assert client.get(f"/v2/{eid}/health").json()["jobs"]["inQueue"] == 0


def test_bounded_fields_within_range_are_accepted(api: tuple[Secured, httpx.Client, str]) -> None:
    _, client, eid = api
    body = {
        "input": {"nested": [[[1, 2.5, None, "x"]]]},
        "webhook": "https://example.com/hook",
        "policy": {"executionTimeout": 600_000, "ttl": 86_400_000, "lowPriority": False},
        "s3Config": {"bucketName": "b"},
    }
    accepted = client.post(f"/v2/{eid}/run", json=body)
    assert accepted.status_code == 200, accepted.text
    rid = accepted.json()["id"]
    assert client.get(f"/v2/{eid}/status/{rid}").json()["status"] == "IN_QUEUE"
    assert client.post(f"/v2/{eid}/cancel/{rid}").json()["status"] == "CANCELLED"
    at_edges = {**spec("edges"), "workersMax": 1000, "gpuCount": 64, "executionTimeoutMs": 604_800_000}
    created = client.post("/endpoints", json=at_edges)
    assert created.status_code == 201, created.text
    assert client.delete(f"/endpoints/{created.json()['id']}").status_code == 200


def test_the_worker_list_is_bounded(api: tuple[Secured, httpx.Client, str]) -> None:
    secured, client, _ = api
    eid = client.post("/endpoints", json=spec("crowded")).json()["id"]
    assert secured.cp.store is not None
    start = secured.clock()
    with secured.cp.store.write() as tx:  # more active workers than one answer shows
        for i in range(1005):
            repo.insert_worker(
                tx.conn,
                {
                    "id": f"wk-test-{i:05d}",
                    "endpoint_id": eid,
                    "state": "idle",
                    "gpu_count": 1,
                    "created_at": start + timedelta(seconds=i),
                },
            )
    view = client.get(f"/endpoints/{eid}").json()
    assert len(view["workers"]) == 1000 and view["workers_count"] == 1005 and view["workers_truncated"]
    assert view["workers"][0]["id"] == "wk-test-00000"  # oldest first
    few = client.get(f"/endpoints/{eid}", params={"workers_limit": 10}).json()
    assert [w["id"] for w in few["workers"]] == [f"wk-test-{i:05d}" for i in range(10)]
    assert few["health"]["workers"]["idle"] == 1005  # the counts cover every worker
    listed = client.get("/endpoints", params={"workers_limit": 0}).json()["endpoints"]
    assert all(e["workers"] == [] for e in listed)
    assert {e["workers_truncated"] for e in listed if e["id"] == eid} == {True}
    (bounded,) = [e["id"] for e in client.get("/endpoints").json()["endpoints"] if e["name"] == "bounded"]
    small = client.get(f"/endpoints/{bounded}").json()
    assert small["workers_truncated"] is False and small["workers_count"] == len(small["workers"])
