"""Typed answers pass the same redaction step as dicts: the runtime answers ``/status`` (and the other typed
views, and the serverless endpoints' answers) as pydantic models (``wire/views.py``,
``wire/endpoints_api.py``), and ``TenantScoped.as_caller_sees`` redacts a model as the JSON it is sent as,
then validates it back into its class. A user token sees another tenant's job ids and
name only as placeholders, an admin sees them whole; and over real HTTP a user's answer still hides what
it hid when the runtime answered dicts."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from scalar.api.auth import set_principal
from scalar.api.tenancy import scoped_class
from scalar.runtime.auth import OTHER_TENANT, OTHER_TENANT_NAME, Principal, redact_view
from scalar.wire.budgets import BudgetsOut
from scalar.wire.endpoints_api import (
    EndpointCostOut,
    EndpointOut,
    HealthOut,
    LatencyOut,
    RequestStatusOut,
    StreamOut,
    WorkerOut,
)
from scalar.wire.jobs import JobOut
from scalar.wire.views import (
    AutoscalerOut,
    BlocksOut,
    CostsOut,
    ExplanationOut,
    NodesOut,
    StatusOut,
)
from tests.runtime.helpers import drive
from tests.security.conftest import Secured

MINE = "job-20260101T000000-aaaaaa"
THEIRS = "job-20260101T000000-bbbbbb"
JOB = {"tier": "FAST", "gpu_count": 1, "expected_duration_sec": 600, "vram_per_gpu_gb": 10}


OWNERS = {MINE: "team-a", THEIRS: "team-b"}


class _Tokens:
    """Who owns which job: ``MINE`` is team-a's, ``THEIRS`` team-b's."""

    def foreign_job_ids(self, tenant: str, ids: Sequence[str]) -> set[str]:
        return {i for i in ids if OWNERS.get(i, tenant) != tenant}

    def other_tenants(self, tenant: str) -> set[str]:
        return set(OWNERS.values()) - {tenant}


def _status() -> StatusOut:
    zero = {"total": 0, "allocated": 0, "idle": 0, "utilization": 0.0}
    spend = {
        "currency": "USD",
        "accrued": "0",
        "by_provider": {},
        "committed": "0",
        "open_price_per_hour": "0",
    }
    return StatusOut.model_validate(
        {
            "at": None,
            "health": {"status": "degraded", "problem": f"{THEIRS} and {MINE} of tenant team-b stalled"},
            "jobs_by_state": {"RUNNING": 2},
            "jobs_total": 2,
            "nodes_by_state": {},
            "gpus": zero,
            "spend": spend,
            "slices": {},
            "orders_by_status": {},
            "actions_by_status": {},
            "inbox_pending": 0,
            "steps": 0,
            "step_latency": {"count": 0, "mean_s": None, "max_s": None},
        }
    )


def _costs() -> CostsOut:
    zero = {
        "blocks": 1,
        "committed": "2",
        "accrued": "1",
        "paid_gpu_hours": "1",
        "delivered_gpu_hours": "1",
        "idle_gpu_hours": "0",
        "idle_cost": "0",
        "sold_back_gpu_hours": "0",
        "sold_back_revenue": "0",
        "net_cost": "1",
        "cost_per_delivered_gpu_hour": "1",
        "utilization": 1.0,
    }
    tenants = [
        {"tenant": "team-a", "gpu_hours": "0.5", "cost": "0.5"},
        {"tenant": "team-b", "gpu_hours": "0.5", "cost": "0.5"},
    ]
    block = {**zero, "block_id": "blk-1", "provider": "aws", "status": f"open for {MINE} and {THEIRS}"}
    return CostsOut.model_validate(
        {
            **zero,
            "at": None,
            "currency": "USD",
            "by_provider": [{**zero, "provider": "aws"}],
            "by_block": [{**block, "by_tenant": tenants}],
            "by_tenant": tenants,
            "series": [],
        }
    )


def _nodes() -> NodesOut:
    gpus = [{"index": 0, "job_ids": [MINE, THEIRS], "vram_used_gb": 20.0, "vram_total_gb": 80.0}]
    node = {
        "node_id": "n0",
        **dict.fromkeys(["block_id", "group", "provider", "instance_type", "gpu_model", "tier", "state"]),
        **dict.fromkeys(["cpu_used", "cpu_total", "ram_used_gb", "ram_total_gb", "expires_at"]),
        **dict.fromkeys(["expires_in_s", "ready_at", "idle_since"]),
        "gpu_count": 1,
        "gpus_allocated": 1,
        "gpus_free": 0,
        "vram_per_gpu_gb": 80.0,
        "jobs": [MINE, THEIRS],
        "gpus": gpus,
    }
    totals = {
        "nodes": 1,
        "nodes_by_state": {"ready": 1},
        "ready_nodes": 1,
        **dict.fromkeys(["gpus_total", "gpus_allocated", "largest_free_node_gpus"], 1),
        **dict.fromkeys(["gpus_idle", "gpus_booting", "stranded_gpus"], 0),
        **dict.fromkeys(["utilization", "fragmentation", "vram_total_gb", "vram_used_gb"], 1.0),
    }
    return NodesOut.model_validate({"nodes": [node], "count": 1, "totals": totals, "at": None})


def _blocks() -> BlocksOut:
    block = {
        "block_id": "blk-1",
        "provider": "aws",
        "instance_type": None,
        "group": f"bought for {THEIRS} (team-b's)",
        "order_key": None,
        "status": "open",
        "node_ids": ["n0"],
        "node_count": 1,
        "gpus_per_node": 1,
        "gpu_count": 1,
        "price_per_gpu_hour": "2",
        "price_per_hour": "2",
        "start_time": None,
        "end_time": None,
        "expires_in_s": None,
        "committed": "2",
        "accrued": "1",
    }
    totals = {"blocks": 1, "open_blocks": 1, "open_gpus": 1, "open_price_per_hour": "2", "committed": "2"}
    return BlocksOut.model_validate(
        {"blocks": [block], "count": 1, "status": MINE, "totals": {**totals, "accrued": "1"}, "at": None}
    )


def _budgets() -> BudgetsOut:
    def limit(scope: str) -> dict[str, Any]:
        return {"scope": scope, "usd_per_hour": "5", "usd_per_period": None, "period": "day"}

    def usage(scope: str) -> dict[str, Any]:
        at = "2026-01-01T00:00:00+00:00"
        return {"scope": scope, "committed_usd_per_hour": "1", "period": "day", "period_start": at}

    scopes = ["global", "team-a", "team-b"]
    return BudgetsOut.model_validate(
        {
            "limits": [limit(s) for s in scopes],
            # a usage row's text naming both jobs, to show the redaction reaches every field
            "usage": [{**usage(s), "committed_usd_this_period": f"{MINE} {THEIRS}"} for s in scopes],
        }
    )


def _explanation() -> ExplanationOut:
    story = {"at": None, "code": "placed", "message": f"{MINE} shares n0 with {THEIRS}", "kind": None}
    purchase = {
        **dict.fromkeys(["status", "group", "provider", "instance_type", "node_count", "tier"]),
        **dict.fromkeys(["limit_price_per_gpu_hour", "placed_at", "block_id", "reason", "eta_at", "eta_s"]),
        "order_key": "ord-1",
        "in_flight": True,
        "node_states": [],
        "eta_basis": "no past purchase to estimate from; the deadline bounds it",
        "deadline_at": None,
        "for_jobs": [MINE, THEIRS],
    }
    return ExplanationOut.model_validate(
        {
            "job_id": MINE,
            "name": None,
            "state": "PENDING",
            "reason": f"waits behind {THEIRS} of tenant team-b",
            "reason_code": "no_capacity",
            "summary": "PENDING",
            "source": "store",
            "queue_position": 2,
            "queue_length": 2,
            "waiting_s": 1.0,
            "placement": None,
            "routing": None,
            "purchase": purchase,
            "validation": [],
            "lines": [f"bought together with {THEIRS}"],
            "story": [{**story, "from": "PENDING", "to": "RUNNING"}],
            "notes": [],
            "at": None,
        }
    )


def _autoscaler() -> AutoscalerOut:
    unmet = [{"job_ids": [MINE, THEIRS], "code": "no_offer", "message": f"{THEIRS} (team-b's) waits"}]
    order = {
        **dict.fromkeys(["status", "group", "provider", "instance_type", "node_count", "placed_at"]),
        **dict.fromkeys(["limit_price_per_gpu_hour", "reason"]),
        "order_key": "ord-1",
        "for_jobs": [MINE, THEIRS],
    }
    return AutoscalerOut.model_validate(
        {
            "source": "store",
            "at": None,
            "routed_at": None,
            "last_routing": None,
            "routing_lines": [f"{THEIRS} routed to gcp"],
            "pending_groups": [{"name": "g", "task_ids": [MINE, THEIRS]}],
            "unmet": unmet,
            "unmet_by_reason": [{"code": "no_offer", "jobs": 2, "example": None, "job_ids": [MINE, THEIRS]}],
            "groups": [],
            "groups_total": 0,
            "slice_totals": {},
            "open_orders": [order],
            "recent_actions": [],
            "notes": [],
        }
    )


def _endpoint() -> EndpointOut:
    """An endpoint of team-a whose worker waits behind team-b's job (the scheduler's reason names it)."""
    waiting = f"waits for GPUs: behind {THEIRS} of tenant team-b"
    zero = dict.fromkeys(["idle", "initializing", "ready", "running", "throttled", "unhealthy"], 0)
    return EndpointOut(
        id="ep-1",
        name="infer",
        tenant="team-a",
        state="active",
        target="builtin",
        spec={"name": "infer"},
        workers=[WorkerOut(id="wk-1", state="pending", job_id=MINE, reason=waiting)],
        workers_count=1,
        workers_truncated=False,
        health=HealthOut.model_validate(
            {
                "workers": zero,
                "jobs": dict.fromkeys(["completed", "failed", "inProgress", "inQueue", "retried"], 0),
            }
        ),
        latency_ms=LatencyOut(samples=0),
        cost=EndpointCostOut(worker_hours=0.0, cost_usd="0"),
        no_workers_reason=f"1 worker(s) {waiting}",
        scaling=[],
    )


def _request_status() -> RequestStatusOut:
    error = f"worker lost: {MINE} was preempted for {THEIRS} (tenant team-b)"
    return RequestStatusOut(id="req-1", status="IN_QUEUE", delayTime=0, error=error, attempts=1, retries=1)


def _stream() -> StreamOut:
    return StreamOut(id="req-1", status="IN_PROGRESS", stream=[], error=_request_status().error, delayTime=0)


TYPED: dict[str, Callable[[], BaseModel]] = {
    "get": _endpoint,
    "request_status": _request_status,
    "stream": _stream,
    "explain": _explanation,
    "autoscaler_status": _autoscaler,
    "budgets": _budgets,
    "status": _status,
    "costs": _costs,
    "nodes": _nodes,
    "blocks": _blocks,
}


# A control plane whose typed calls answer the models above.
_Plane = type("_Plane", (), {name: staticmethod(make) for name, make in TYPED.items()})


def _as(principal: Principal, call: Callable[[], Any]) -> Any:
    def run() -> Any:
        set_principal(principal)
        return call()

    return contextvars.copy_context().run(run)


@pytest.mark.parametrize("call", sorted(TYPED))
def test_a_typed_answer_is_redacted_for_a_user_and_whole_for_an_admin(call: str) -> None:
    plane = _Plane()
    scoped = scoped_class(plane)(plane, _Tokens())
    whole = getattr(plane, call)()
    assert THEIRS in whole.model_dump_json()  # the answer names the other tenant's job
    user = _as(Principal("tok_a", "team-a", "user"), getattr(scoped, call))
    admin = _as(Principal("tok_admin", "default", "admin"), getattr(scoped, call))
    assert type(user) is type(whole) and admin == whole
    seen = user.model_dump_json()
    assert THEIRS not in seen and "team-b" not in seen and MINE in seen, seen
    assert OTHER_TENANT in seen and OTHER_TENANT_NAME in seen
    if isinstance(user, NodesOut):  # capacity stays visible: the GPU is still held by two jobs
        assert user.nodes[0].gpus[0].job_ids == [MINE, OTHER_TENANT] and user.totals == whole.totals
    if isinstance(
        user, BudgetsOut
    ):  # the global rows and its own tenant's (the HTTP test: test_view_tenancy)
        assert [x.scope for x in user.limits] == [x.scope for x in user.usage] == ["global", "team-a"]
    if isinstance(user, CostsOut):  # another tenant's share of the contracts is not shown at all
        assert (
            [t.tenant for t in user.by_tenant] == [t.tenant for t in user.by_block[0].by_tenant] == ["team-a"]
        )
    # the same as redacting the JSON it is sent as
    plain = redact_view(json.loads(whole.model_dump_json()), "team-a", _Tokens().foreign_job_ids)
    assert json.loads(redact_view(whole, "team-a", _Tokens().foreign_job_ids).model_dump_json()) == plain


def test_a_list_of_typed_answers_is_redacted_item_by_item() -> None:
    both = [_status(), _status()]
    seen = redact_view(both, "team-a", _Tokens().foreign_job_ids, _Tokens().other_tenants)
    assert [type(s) for s in seen] == [StatusOut, StatusOut]
    assert all(THEIRS not in s.model_dump_json() and MINE in s.model_dump_json() for s in seen)


def test_a_users_costs_still_show_only_its_own_tenant(secured: Secured) -> None:
    api = secured
    with api.client(api.token("team-a")) as alice, api.client(api.token("team-b")) as bob:
        assert (
            alice.post("/jobs", json=JOB).status_code == 201
            and bob.post("/jobs", json=JOB).status_code == 201
        )
        drive([api.cp], api.clock, 60)
        with api.client(api.admin) as admin:
            whole = admin.get("/costs").json()
        mine = alice.get("/costs").json()
    assert {"team-a", "team-b"} <= {t["tenant"] for t in whole["by_tenant"]}, whole["by_tenant"]
    assert [t["tenant"] for t in mine["by_tenant"]] == ["team-a"]
    for block in mine["by_block"]:
        assert {t["tenant"] for t in block["by_tenant"]} <= {"team-a"}
    assert "team-b" not in json.dumps(mine)
    assert {k: v for k, v in mine.items() if k not in ("by_tenant", "by_block")} == {
        k: v for k, v in whole.items() if k not in ("by_tenant", "by_block")
    }


def test_a_users_status_still_hides_the_internal_health(secured: Secured) -> None:
    api = secured
    with api.client(api.token("team-a")) as alice, api.client(api.admin) as admin:
        assert alice.post("/jobs", json=JOB).status_code == 201
        drive([api.cp], api.clock, 5)
        mine, whole = alice.get("/status").json(), admin.get("/status").json()
    assert set(mine["health"]) <= {"status", "problem", "role", "last_step_at"}, mine["health"]
    assert whole["health"]["holder"] == api.cp.settings.holder
    assert {k: v for k, v in mine.items() if k != "health"} == {
        k: v for k, v in whole.items() if k != "health"
    }


def _job(job_id: str) -> JobOut:
    return JobOut.model_validate(
        {
            "id": job_id,
            "state": "PENDING",
            "reason": f"waits behind {THEIRS} (team-b's) for the same node",
            "tier": "FAST",
            "gpu_count": 1,
            "tenant": "team-a",
        }
    )


class _CountingTokens(_Tokens):
    """``_Tokens`` that counts the look-ups of whose jobs an answer names."""

    def __init__(self) -> None:
        self.lookups = 0

    def foreign_job_ids(self, tenant: str, ids: Sequence[str]) -> set[str]:
        self.lookups += 1
        return super().foreign_job_ids(tenant, ids)


class _JobPlane:
    """A control plane whose job calls answer ``JobOut``s naming the other tenant's job."""

    def get_job(self, job_id: str, tenant: str | None = None) -> JobOut:
        return _job(job_id)

    def list_jobs(self, *args: Any, **kwargs: Any) -> list[JobOut]:
        return [_job(MINE), _job(MINE.replace("aaaaaa", "cccccc"))]


def test_a_users_jobs_are_redacted_one_and_a_page_at_a_time() -> None:
    plane, tokens = _JobPlane(), _CountingTokens()
    scoped = scoped_class(plane)(plane, tokens)
    user, admin = Principal("tok_a", "team-a", "user"), Principal("tok_admin", "default", "admin")

    one = _as(user, lambda: scoped.get_job(MINE))
    assert isinstance(one, JobOut) and one.id == MINE
    assert one.reason == f"waits behind {OTHER_TENANT} ({OTHER_TENANT_NAME}'s) for the same node"
    assert tokens.lookups == 1

    page = _as(user, lambda: scoped.list_jobs())
    assert [type(j) for j in page] == [JobOut, JobOut]
    assert all(THEIRS not in j.model_dump_json() and OTHER_TENANT in (j.reason or "") for j in page)
    assert tokens.lookups == 2  # the page is redacted as one answer: one look-up, not one per job
    assert _as(admin, lambda: scoped.list_jobs()) == plane.list_jobs()  # an admin sees it whole
