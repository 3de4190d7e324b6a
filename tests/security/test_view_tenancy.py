"""Views and tenants (issues 8 and 14): a user token sees other tenants' job ids in ``/nodes``, ``/blocks``,
``/autoscaler/status``, ``/status`` and ``/costs``, and inside reasons, explanations and stories, only as
``another tenant's job`` (counts and GPU maps kept), other tenants' names and limits not at all; its own
as they are; an admin sees everything. Real HTTP, two tenants, a driven controller."""

from __future__ import annotations

import json
from typing import Any

from scalar.runtime.auth import OTHER_TENANT, redact_view
from tests.runtime.helpers import drive
from tests.security.conftest import Secured

VIEWS = ["/nodes", "/blocks", "/autoscaler/status", "/status", "/costs", "/metrics"]
JOB = {"tier": "FAST", "gpu_count": 1, "expected_duration_sec": 600, "vram_per_gpu_gb": 10}


def _gpu_jobs(nodes: dict[str, Any]) -> list[str]:
    return sorted(j for n in nodes["nodes"] for g in n.get("gpus", []) for j in g.get("job_ids", []))


def test_a_user_sees_other_tenants_jobs_only_as_a_placeholder(secured: Secured) -> None:
    api = secured
    with api.client(api.token("team-a")) as alice, api.client(api.token("team-b")) as bob:
        a_job = alice.post("/jobs", json=JOB).json()["id"]
        b_job = bob.post("/jobs", json=JOB).json()["id"]
        # Held pending for one step: the purchase for both is in flight (open orders name them).
        drive([api.cp], api.clock, 1)
        with api.client(api.admin) as admin:
            pending_admin = admin.get("/autoscaler/status").text
        assert a_job in pending_admin and b_job in pending_admin, pending_admin
        pending_alice = alice.get("/autoscaler/status").text
        assert a_job in pending_alice and b_job not in pending_alice and OTHER_TENANT in pending_alice
        drive([api.cp], api.clock, 30)
        with api.client(api.admin) as admin:
            admin_views = {v: admin.get(v).text for v in VIEWS}
        assert a_job in admin_views["/nodes"] and b_job in admin_views["/nodes"], admin_views["/nodes"]
        assert sorted([a_job, b_job]) == _gpu_jobs(json.loads(admin_views["/nodes"]))

        for me, mine, theirs in ((alice, a_job, b_job), (bob, b_job, a_job)):
            for view in VIEWS:
                response = me.get(view)
                assert response.status_code == 200, (view, response.text)
                assert theirs not in response.text, (view, response.text)
            nodes = me.get("/nodes").json()
            # Capacity is still visible: the same GPUs in use, the other tenant's as a placeholder.
            assert _gpu_jobs(nodes) == sorted([mine, OTHER_TENANT])
            admin_nodes = json.loads(admin_views["/nodes"])
            assert nodes["totals"] == admin_nodes["totals"]
            assert me.get("/status").json()["jobs_total"] == json.loads(admin_views["/status"])["jobs_total"]
            assert theirs not in json.dumps(me.get("/autoscaler/status").json())


def test_redact_view_keeps_own_ids_counts_and_only_own_tenant_costs() -> None:
    payload = {
        "nodes": [{"gpus": [{"job_ids": ["j-a", "j-b"], "vram": 3}], "jobs": ["j-b"]}],
        "unmet_by_reason": [{"jobs": 2, "example": "j-b", "job_ids": ["j-b", "j-a"]}],
        "routing_lines": ["j-b waits for j-a; j-bb is not a job here"],
        "by_tenant": {"team-a": "1.00", "team-b": "2.00"},
        "tenants": [{"tenant": "team-a", "cost": "1"}, {"tenant": "team-b", "cost": "2"}],
        "recent_actions": [{"subject": "block-1"}],
    }

    def foreign(tenant: str, ids: Any) -> set[str]:
        owners = {"j-a": "team-a", "j-b": "team-b"}
        return {i for i in ids if i in owners and owners[i] != tenant}

    seen = redact_view(payload, "team-a", foreign)
    assert seen["nodes"][0]["gpus"][0] == {"job_ids": ["j-a", OTHER_TENANT], "vram": 3}
    assert seen["nodes"][0]["jobs"] == [OTHER_TENANT]
    assert seen["unmet_by_reason"][0] == {
        "jobs": 2,
        "example": OTHER_TENANT,
        "job_ids": [OTHER_TENANT, "j-a"],
    }
    assert seen["routing_lines"] == [f"{OTHER_TENANT} waits for j-a; j-bb is not a job here"]
    assert seen["by_tenant"] == {"team-a": "1.00"}
    assert seen["tenants"] == [{"tenant": "team-a", "cost": "1"}]
    assert seen["recent_actions"] == [{"subject": "block-1"}]
    assert payload["nodes"][0]["jobs"] == ["j-b"]  # the input is not changed


def test_reasons_explanations_and_budgets_name_no_other_tenant(secured: Secured) -> None:
    api = secured
    flex = {**JOB, "tier": "FLEX"}
    with (
        api.client(api.token("team-a")) as alice,
        api.client(api.token("team-b")) as bob,
        api.client(api.admin) as admin,
    ):
        limits = [
            {"scope": "global", "usd_per_hour": "1000"},
            {"scope": "team-a", "usd_per_hour": "100"},
            {"scope": "team-b", "usd_per_hour": "7"},
        ]
        assert admin.put("/budgets", json={"limits": limits}).status_code == 200
        b_job = bob.post("/jobs", json=flex).json()["id"]
        a_job = alice.post("/jobs", json=flex).json()["id"]
        drive([api.cp], api.clock, 1)
        # what an admin reads about team-a's job names team-b's job (the two wait together) ...
        assert b_job in admin.get(f"/jobs/{a_job}/explain").text
        # ... and a user of team-a reads it as another tenant's job
        explained = alice.get(f"/jobs/{a_job}/explain")
        assert explained.status_code == 200
        assert b_job not in explained.text and OTHER_TENANT in explained.text
        for view in [
            f"/jobs/{a_job}",
            "/jobs",
            "/autoscaler/status",
            "/status",
            "/nodes",
            "/costs",
            "/budgets",
        ]:
            seen = alice.get(view)
            assert seen.status_code == 200, (view, seen.text)
            assert b_job not in seen.text and "team-b" not in seen.text, (view, seen.text)
        budgets = alice.get("/budgets").json()
        assert [x["scope"] for x in budgets["limits"]] == ["global", "team-a"]
        assert {x["scope"] for x in budgets["usage"]} == {"global", "team-a"}
        assert [x["scope"] for x in admin.get("/budgets").json()["limits"]] == ["global", "team-a", "team-b"]


def test_one_redaction_step_covers_ids_in_text_and_tenant_names() -> None:
    mine, theirs = "job-20260101T000000-aaaaaa", "job-20260101T000000-bbbbbb"
    payload = {
        "reason": f"same needs as job {theirs}, which no node fits now",
        "story": [{"message": f"packed after {theirs} and {mine}"}],
        "budget": "spend limits now: global $50.00/h; tenant team-b $7.00/h; tenant team-a $1.00/h",
        "why": "over tenant team-b's limit (team-b's)",
        "tenant": "team-b",
        "limits": [{"scope": "global"}, {"scope": "team-b"}, {"scope": "team-a"}],
    }

    def foreign(tenant: str, ids: Any) -> set[str]:
        return {i for i in ids if i == theirs}

    seen = redact_view(payload, "team-a", foreign, lambda tenant: {"team-a", "team-b"})
    assert seen["reason"] == f"same needs as {OTHER_TENANT}, which no node fits now"
    assert seen["story"] == [{"message": f"packed after {OTHER_TENANT} and {mine}"}]
    assert seen["budget"] == (
        "spend limits now: global $50.00/h; another tenant $7.00/h; tenant team-a $1.00/h"
    )
    assert seen["why"] == "over another tenant's limit (another tenant's)"
    assert seen["tenant"] == "another tenant"
    assert seen["limits"] == [{"scope": "global"}, {"scope": "team-a"}]


def test_the_endpoints_answers_pass_the_same_redaction(secured_sqlite: Secured) -> None:
    """A worker's reason repeats its job's, which may name another tenant's job: the endpoints' answers go
    through the same step. Shown with an endpoint whose name is another tenant's job id."""
    api = secured_sqlite
    with api.client(api.token("team-a")) as alice, api.client(api.token("team-b")) as bob:
        b_job = bob.post("/jobs", json=JOB).json()["id"]
        spec = {"name": b_job, "imageName": "example/infer:1", "gpus": ["AMPERE_80"], "workersMax": 1}
        created = alice.post("/endpoints", json=spec)
        assert created.status_code == 201, created.text
        assert b_job not in created.text and OTHER_TENANT in created.text
        listed = alice.get("/endpoints")
        assert b_job not in listed.text and OTHER_TENANT in listed.text
    with api.client(api.admin) as admin:
        assert b_job in admin.get("/endpoints").text
