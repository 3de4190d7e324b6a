"""Endpoints belong to the tenant that created them (issues 7 and 8), over HTTP with real tokens.

Two tenants each see only their own endpoints and requests; an admin sees all, each with its tenant;
another tenant's endpoint answers 404 word for word as a missing one on every route (``/endpoints/...`` and
``/v2/...``) and nothing changes; the endpoint's worker jobs are its owner's, so ``/costs`` charges it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.endpoints.harness import spec
from tests.runtime.helpers import drive
from tests.security.conftest import Secured, secured_api


@pytest.fixture
def api(db_url: str, tmp_path: Path) -> Iterator[Secured]:
    """Auth on, the leader driven by the test (injected time), no rate limit in the way of polling."""
    with secured_api(db_url, tmp_path, rate_per_s=1e6, burst=1e6) as secured:
        secured.cp.endpoints.worker_duration_s = 600  # the test market's contracts are short
        secured.cp.run_once()
        drive([secured.cp], secured.clock, 15)  # first prices collected
        yield secured


def _missing(client: httpx.Client, method: str, path: str, body: Any = None) -> httpx.Response:
    response = client.request(method, path, json=body)
    assert response.status_code == 404, f"{method} {path}: {response.status_code} {response.text}"
    return response


def test_each_tenant_sees_and_changes_only_its_own_endpoints(api: Secured) -> None:
    a, b = api.token("team-a"), api.token("team-b")
    with api.client(a) as alice, api.client(b) as bob, api.client(api.admin) as admin:
        created = alice.post("/endpoints", json=spec("infer"))
        assert created.status_code == 201, created.text
        ea = created.json()
        eb = bob.post("/endpoints", json=spec("infer")).json()  # names are unique per tenant only
        assert (ea["tenant"], eb["tenant"]) == ("team-a", "team-b")
        assert alice.post("/endpoints", json=spec("infer")).json()["errors"][0]["field"] == "name"

        assert [e["id"] for e in alice.get("/endpoints").json()["endpoints"]] == [ea["id"]]
        assert [e["id"] for e in bob.get("/endpoints").json()["endpoints"]] == [eb["id"]]
        everyone = admin.get("/endpoints").json()["endpoints"]
        assert {(e["id"], e["tenant"]) for e in everyone} == {(ea["id"], "team-a"), (eb["id"], "team-b")}
        assert admin.get(f"/endpoints/{ea['id']}").json()["tenant"] == "team-a"

        rid = alice.post(f"/v2/{ea['id']}/run", json={"input": {"n": 1}}).json()["id"]

        # bob, on every route of alice's endpoint: the 404 of an endpoint that does not exist
        eid = ea["id"]
        for target in (eid, "ep-does-not-exist"):
            routes = [
                ("GET", f"/endpoints/{target}", None),
                ("PATCH", f"/endpoints/{target}", {"workersMax": 9}),
                ("DELETE", f"/endpoints/{target}", None),
                ("GET", f"/endpoints/{target}/logs", None),
                ("POST", f"/v2/{target}/run", {"input": {"n": 2}}),
                ("POST", f"/v2/{target}/runsync?wait=0", {"input": {"n": 3}}),
                ("GET", f"/v2/{target}/status/{rid}", None),
                ("POST", f"/v2/{target}/cancel/{rid}", None),
                ("GET", f"/v2/{target}/health", None),
            ]
            for method, path, body in routes:
                answer = _missing(bob, method, path, body).json()
                assert answer["detail"] == f"no endpoint with id {target!r}", (path, answer)
                assert answer["errors"][0]["field"] == "endpoint_id"
                if path.startswith("/v2/"):
                    assert answer["error"] == answer["detail"]  # RunPod's key, same words
        # alice's request id on bob's own endpoint: no such request there (and nothing cancelled)
        for method in ("GET", "POST"):
            path = f"/v2/{eb['id']}/{'status' if method == 'GET' else 'cancel'}/{rid}"
            assert _missing(bob, method, path).json()["errors"][0]["field"] == "request_id"

        # nothing bob tried changed alice's endpoint or request
        mine = alice.get(f"/endpoints/{eid}").json()
        assert mine["state"] == "active" and mine["spec"]["workersMax"] == 3
        assert alice.get(f"/v2/{eid}/status/{rid}").json()["status"] == "IN_QUEUE"
        assert alice.get(f"/v2/{eid}/health").json()["jobs"]["inQueue"] == 1
        assert admin.get(f"/v2/{eid}/status/{rid}").json()["status"] == "IN_QUEUE"

        # the request is served; its worker is a job of team-a's, invisible to team-b
        for _ in range(240):
            if alice.get(f"/v2/{eid}/status/{rid}").json()["status"] == "COMPLETED":
                break
            drive([api.cp], api.clock, 1)
        done = alice.get(f"/v2/{eid}/status/{rid}").json()
        assert done["status"] == "COMPLETED" and done["output"]["echo"] == {"n": 1}, done
        job_ids = [w["job_id"] for w in alice.get(f"/endpoints/{eid}").json()["workers"]]
        assert job_ids and all(api.cp.job_service.get_document(j)["endpoint_id"] == eid for j in job_ids)  # type: ignore[index]
        assert {alice.get(f"/jobs/{j}").json()["tenant"] for j in job_ids} == {"team-a"}
        assert not set(job_ids) & {j["id"] for j in bob.get("/jobs").json()["jobs"]}
        assert (
            _missing(bob, "GET", f"/jobs/{job_ids[0]}").json()["detail"] == f"no job with id {job_ids[0]!r}"
        )

        # /costs charges the endpoint's owner for its worker's GPU-hours
        drive([api.cp], api.clock, 5)
        tenants = {t["tenant"]: t for t in admin.get("/costs").json()["by_tenant"]}
        assert "team-a" in tenants and float(tenants["team-a"]["gpu_hours"]) > 0, tenants
        assert "team-b" not in tenants

        # the dashboard's Endpoints page reads the API as its caller
        html = {"Accept": "text/html"}
        page = admin.get("/ui/endpoints", headers=html).text
        assert "tenant team-a" in page and "tenant team-b" in page
        page = bob.get("/ui/endpoints", headers=html).text
        assert eb["id"] in page and eid not in page and "tenant team-a" not in page

        # bob deletes his own endpoint; alice's keeps serving; alice deletes hers
        assert bob.delete(f"/endpoints/{eb['id']}").status_code == 200
        assert alice.get(f"/v2/{eid}/health").status_code == 200
        assert alice.post(f"/v2/{eid}/cancel/{rid}").json()["status"] == "COMPLETED"  # finished stays
        assert alice.delete(f"/endpoints/{eid}").json()["state"] == "deleted"
        deleted = admin.get("/endpoints", params={"include_deleted": True}).json()["endpoints"]
        assert {e["state"] for e in deleted} == {"deleted"} and len(deleted) == 2
