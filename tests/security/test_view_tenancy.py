"""Cluster-wide views and tenants (issue 8): a user token sees other tenants' job ids in ``/nodes``,
``/blocks``, ``/autoscaler/status``, ``/status`` and ``/costs`` only as ``other-tenant`` (counts and GPU maps
kept), its own ids as they are; an admin sees everything. Real HTTP, two tenants, a driven controller."""

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
