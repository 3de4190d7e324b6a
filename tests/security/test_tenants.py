"""Tenants see, change and cancel only their own jobs; another tenant's job is 404, as if it did not exist."""

from __future__ import annotations

from tests.runtime.helpers import drive
from tests.security.conftest import Secured

JOB = {"tier": "FAST", "gpu_count": 1, "expected_duration_sec": 60}


def test_a_tenant_cannot_see_or_cancel_another_tenants_job(secured: Secured) -> None:
    a, b = secured.token("team-a"), secured.token("team-b")
    with secured.client(a) as alice, secured.client(b) as bob, secured.client(secured.admin) as admin:
        mine = [alice.post("/jobs", json={**JOB, "name": f"a{i}"}).json() for i in range(3)]
        theirs = bob.post("/jobs", json={**JOB, "name": "b0"}).json()
        assert {j["tenant"] for j in mine} == {"team-a"} and theirs["tenant"] == "team-b"

        ids = sorted(j["id"] for j in mine)  # listings are in id order (newest first by default)
        assert [j["id"] for j in alice.get("/jobs").json()["jobs"]] == ids[::-1]
        page = alice.get("/jobs", params={"limit": 2, "offset": 1, "order": "oldest"}).json()["jobs"]
        assert [j["id"] for j in page] == ids[1:]
        pending = alice.get("/jobs", params={"state": "PENDING", "order": "oldest"}).json()["jobs"]
        assert [j["id"] for j in pending] == ids
        assert [j["id"] for j in bob.get("/jobs").json()["jobs"]] == [theirs["id"]]

        ghost = theirs["id"][:-6] + ("000000" if not theirs["id"].endswith("000000") else "111111")
        for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/explain"), ("GET", "/logs")):
            # another tenant's job (and its sub-resources) answers as a job that does not exist would
            hidden = alice.request(method, f"/jobs/{theirs['id']}{suffix}")
            unknown = alice.request(method, f"/jobs/{ghost}{suffix}")
            assert hidden.status_code == unknown.status_code == 404, hidden.text
            assert hidden.json()["type"] == "urn:scalar:problem:not-found"
            assert [e["field"] for e in hidden.json()["errors"]] == ["job_id"]
            assert hidden.text.replace(theirs["id"], ghost) == unknown.text
        assert bob.get(f"/jobs/{theirs['id']}/explain").status_code == 200
        assert admin.get(f"/jobs/{theirs['id']}/explain").status_code == 200
        assert bob.get(f"/jobs/{theirs['id']}").json()["cancel_requested"] is False
        assert bob.delete(f"/jobs/{theirs['id']}").status_code == 202
        assert alice.get(f"/jobs/{mine[0]['id']}").status_code == 200

        everyone = admin.get("/jobs").json()["jobs"]
        assert {j["tenant"] for j in everyone} == {"team-a", "team-b"}
        assert admin.get(f"/jobs/{theirs['id']}").status_code == 200

    # the inbox holds only bob's cancellation: alice's attempt wrote nothing
    assert secured.cp.store is not None
    with secured.cp.store.read() as tx:
        cancels = [i.entity_id for i in tx.pending_inbox(theirs["id"]) if i.kind == "cancel"]
    assert cancels == [theirs["id"]]


def test_the_tenant_survives_the_controller(secured_sqlite: Secured) -> None:
    """The controller's projection of a job (rewritten at every step) keeps its tenant."""
    api = secured_sqlite
    a = api.token("team-a")
    with api.client(a) as alice:
        job = alice.post("/jobs", json=JOB).json()
        drive([api.cp], api.clock, 5)
        seen = alice.get(f"/jobs/{job['id']}").json()
        assert seen["tenant"] == "team-a"
        assert seen["reason_code"] != "accepted"  # the controller has rewritten it
        assert [j["id"] for j in alice.get("/jobs").json()["jobs"]] == [job["id"]]
    with api.client(api.token("team-b")) as bob:
        assert bob.get(f"/jobs/{job['id']}").status_code == 404


def test_a_job_body_cannot_choose_its_tenant(secured_sqlite: Secured) -> None:
    with secured_sqlite.client(secured_sqlite.token("team-a")) as alice:
        response = alice.post("/jobs", json={**JOB, "tenant": "team-b"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "tenant"
