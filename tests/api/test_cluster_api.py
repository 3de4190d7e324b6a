"""``/jobs/{id}/explain``, ``/nodes``, ``/blocks``, ``/autoscaler/status``, ``/costs`` over a real control plane.

Time is injected: the test drives the leader (``run_once``) and the executor itself, so a job can be held
PENDING at the exact step where the nodes were rejected and a purchase is in flight. A second process
on the same database that does not lead (a follower) answers from the store.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.api.app import create_app
from scalar.domain.money import round_micros
from scalar.runtime import ControlPlane
from tests.api.live_server import serve
from tests.runtime.helpers import Clock, drive, job, settings_for

PROBLEM_TYPE = "application/problem+json"


@dataclass
class Cluster:
    plane: ControlPlane
    clock: Clock
    http: httpx.Client
    db_url: str
    tmp_path: Path

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()

    def drive(self, seconds: int) -> None:
        drive([self.plane], self.clock, seconds)


@pytest.fixture
def cluster(db_url: str, tmp_path: Path) -> Iterator[Cluster]:
    clock = Clock()
    plane = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    plane.run_once()
    try:
        with serve(create_app(plane)) as url, httpx.Client(base_url=url, timeout=30) as http:
            yield Cluster(plane, clock, http, db_url, tmp_path)
    finally:
        plane.stop()


def running_small_job(c: Cluster) -> str:
    small = c.plane.submit_job(job(2, 60, vram_per_gpu_gb=40, name="small"))
    c.drive(20)
    assert c.plane.get_job(small.id).state == "RUNNING"  # type: ignore[union-attr]
    return str(small.id)


def test_explain_of_a_pending_job_counts_rejected_nodes_and_gives_the_purchase_eta(cluster: Cluster) -> None:
    c = cluster
    small = running_small_job(c)
    big = c.plane.submit_job(job(8, 60, vram_per_gpu_gb=40, name="big"))
    c.drive(1)  # one step: no node fits, a purchase is placed

    answer = c.get(f"/jobs/{big.id}/explain")

    assert answer["state"] == "PENDING" and answer["source"] == "leader"
    assert (answer["queue_position"], answer["queue_length"]) == (1, 1)
    placement = answer["placement"]
    assert placement["nodes_rejected"] >= 1
    assert sum(r["count"] for r in placement["rejections"]) == placement["nodes_rejected"]
    assert all(r["code"] and r["example"] for r in placement["rejections"])
    purchase = answer["purchase"]
    assert purchase["in_flight"] and purchase["for_jobs"] == [big.id]
    assert purchase["eta_at"] is not None and "median" in purchase["eta_basis"]  # from the first purchase
    assert purchase["deadline_at"] > purchase["placed_at"]
    text = "\n".join(answer["lines"])
    assert answer["summary"] == answer["lines"][0] and answer["summary"].startswith("PENDING: ")
    assert f"{placement['nodes_rejected']} nodes rejected" in text and "queue position 1 of 1" in text
    assert "capacity expected" in text
    assert answer["story"][0]["code"] == "submitted"

    # A follower (same database, not leading) answers from the store and says what it cannot know.
    follower = ControlPlane(settings_for(c.db_url, c.tmp_path), clock=c.clock)
    try:
        with serve(create_app(follower)) as url, httpx.Client(base_url=url, timeout=30) as http:
            seen = http.get(f"/jobs/{big.id}/explain").json()
            assert seen["source"] == "store" and seen["state"] == "PENDING"
            assert (seen["queue_position"], seen["queue_length"]) == (1, 1)
            assert seen["placement"] is None and "leader" in seen["notes"][0]
            assert seen["purchase"]["order_key"] == purchase["order_key"]
            assert http.get("/nodes").json()["totals"] == c.get("/nodes")["totals"]
            status = http.get("/autoscaler/status").json()
            assert status["source"] == "store" and status["last_routing"] is None and status["notes"]
            assert status["slice_totals"] == c.get("/autoscaler/status")["slice_totals"]
    finally:
        follower.stop()

    c.drive(20)
    ran = c.get(f"/jobs/{big.id}/explain")
    assert ran["state"] in ("RUNNING", "SUCCEEDED") and ran["queue_position"] is None
    assert not ran["purchase"]["in_flight"] and ran["purchase"]["eta_basis"] == "its nodes are READY"
    assert c.get(f"/jobs/{small}/explain")["waiting_s"] > 0


def test_nodes_blocks_autoscaler_and_costs_show_the_bought_capacity(cluster: Cluster) -> None:
    c = cluster
    small = running_small_job(c)

    nodes = c.get("/nodes")
    mine = [n for n in nodes["nodes"] if small in n["jobs"]]
    assert len(mine) == 1
    node = mine[0]
    assert node["state"] == "ready" and node["provider"] in ("sfcompute", "prime")
    slots = [g for g in node["gpus"] if small in g["job_ids"]]
    assert len(slots) == 2 and all(g["vram_used_gb"] == 40 for g in slots)
    assert len(node["gpus"]) == node["gpu_count"] == node["gpus_allocated"] + node["gpus_free"]
    assert node["expires_in_s"] > 0 and node["tier"] == "FAST"
    totals = nodes["totals"]
    assert (
        totals["gpus_allocated"] >= 2
        and totals["gpus_total"] == totals["gpus_allocated"] + totals["gpus_idle"]
    )
    assert 0 < totals["utilization"] <= 1 and 0 <= totals["fragmentation"] <= 1

    blocks = c.get("/blocks")
    assert blocks["count"] >= 1 and blocks["totals"]["open_blocks"] >= 1
    block = next(b for b in blocks["blocks"] if b["block_id"] == node["block_id"])
    assert block["status"] == "open" and Decimal(block["price_per_gpu_hour"]) > 0
    assert Decimal(block["accrued"]) > 0 and Decimal(block["committed"]) >= Decimal(block["accrued"])
    assert block["end_time"] > block["start_time"]
    assert c.get("/blocks", status="released")["count"] == 0

    status = c.get("/autoscaler/status")
    assert status["source"] == "leader" and status["slice_totals"]["ready"] >= 1
    assert set(status["slice_totals"]) >= {"requesting", "booting", "initializing", "ready", "failed"}
    assert any(g["slices"]["ready"] >= 1 for g in status["groups"])
    assert status["groups_total"] >= len(status["groups"])
    kinds = {a["kind"] for a in status["recent_actions"]}
    assert {"BuyCapacity", "StartWork"} <= kinds and len(status["recent_actions"]) <= 100

    costs = c.get("/costs", points=5)
    accrued = Decimal(costs["accrued"])
    assert accrued > 0 and costs["currency"] == "USD"
    assert sum(Decimal(p["accrued"]) for p in costs["by_provider"]) == accrued
    assert Decimal(costs["delivered_gpu_hours"]) > 0 and costs["cost_per_delivered_gpu_hour"] is not None
    assert Decimal(costs["idle_cost"]) <= accrued
    series = [Decimal(p["spend"]) for p in costs["series"]]
    assert len(series) == 5 and series == sorted(series) and series[0] == 0
    assert abs(series[-1] - accrued) <= Decimal("0.00001")
    tenant, idle = costs["by_tenant"]  # one tenant's job held GPUs; idle capacity is its own row
    assert (tenant["tenant"], idle["tenant"]) == ("default", "(idle)") and Decimal(tenant["gpu_hours"]) > 0
    assert_costs_add_up(costs)
    delivered = Decimal(costs["delivered_gpu_hours"])

    c.drive(80)  # the job finishes
    assert c.get("/nodes")["totals"]["gpus_allocated"] == 0
    after = c.get("/costs")
    assert Decimal(after["accrued"]) > accrued
    assert_costs_add_up(after)
    # What a finished job held stays delivered (it used to be recomputed from the job's lost placements).
    assert Decimal(after["delivered_gpu_hours"]) >= delivered
    job = c.get(f"/jobs/{small}")
    [span] = job["placement_history"]
    assert span["node_id"] == node["node_id"] and len(span["gpu_indices"]) == 2
    assert span["from"] <= span["to"] and job["placements"] == []


def assert_costs_add_up(costs: dict[str, Any]) -> None:
    """paid = delivered + idle, exactly, in the totals, per provider, per block and per tenant."""
    for line in [costs, *costs["by_provider"], *costs["by_block"]]:
        paid, delivered, idle = (
            Decimal(line[k]) for k in ("paid_gpu_hours", "delivered_gpu_hours", "idle_gpu_hours")
        )
        assert paid == delivered + idle and idle >= 0
        # net_cost = accrued + sold_back_cost - sold_back_revenue (engine/costs.py); what the resold hours
        # cost under their contracts (sold_back_cost) is not published: it is what net_cost adds to the
        # accrued less the proceeds, never negative, and nothing when nothing was resold
        accrued, proceeds, net = (Decimal(line[k]) for k in ("accrued", "sold_back_revenue", "net_cost"))
        sold_back_cost = net - accrued + proceeds
        assert sold_back_cost >= 0, line
        if not Decimal(line["sold_back_gpu_hours"]):
            assert sold_back_cost == 0, line
        if delivered:
            assert Decimal(line["cost_per_delivered_gpu_hour"]) == round_micros(net / delivered)
    for block in costs["by_block"]:
        assert sum(Decimal(t["gpu_hours"]) for t in block["by_tenant"]) == Decimal(block["paid_gpu_hours"])
        assert sum(Decimal(t["cost"]) for t in block["by_tenant"]) == Decimal(block["accrued"])
    assert sum(Decimal(t["gpu_hours"]) for t in costs["by_tenant"]) == Decimal(costs["paid_gpu_hours"])
    assert sum(Decimal(t["cost"]) for t in costs["by_tenant"]) == Decimal(costs["accrued"])
    for key in ("paid_gpu_hours", "delivered_gpu_hours", "idle_gpu_hours", "accrued", "sold_back_gpu_hours"):
        assert sum(Decimal(p[key]) for p in costs["by_provider"]) == Decimal(costs[key])


@pytest.mark.parametrize(
    ("path", "params", "status", "field"),
    [
        ("/jobs/no-such-job/explain", {}, 404, "job_id"),
        ("/jobs/" + "x" * 201 + "/explain", {}, 422, "job_id"),
        ("/blocks", {"status": "bogus"}, 422, "status"),
        ("/costs", {"points": "1"}, 422, "points"),
        ("/costs", {"points": "many"}, 422, "points"),
        ("/nodes", {"include_gone": "maybe"}, 422, "include_gone"),
        ("/autoscaler/status", {"all_groups": "2"}, 422, "all_groups"),
    ],
)
def test_bad_ids_and_parameters_are_problems(
    sqlite_url: str, tmp_path: Path, path: str, params: dict[str, str], status: int, field: str
) -> None:
    plane = ControlPlane(settings_for(sqlite_url, tmp_path), clock=Clock())
    try:
        with serve(create_app(plane)) as url:
            response = httpx.get(url + path, params=params, timeout=30)
    finally:
        plane.stop()
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_TYPE)
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_the_routes_are_in_the_openapi_description(sqlite_url: str, tmp_path: Path) -> None:
    plane = ControlPlane(settings_for(sqlite_url, tmp_path), clock=Clock())
    try:
        with serve(create_app(plane)) as url:
            spec = httpx.get(url + "/openapi.json", timeout=30).json()
            empty = {p: httpx.get(url + p, timeout=30).json() for p in ("/nodes", "/blocks", "/costs")}
    finally:
        plane.stop()
    for path in ("/jobs/{job_id}/explain", "/nodes", "/blocks", "/autoscaler/status", "/costs", "/metrics"):
        assert "get" in spec["paths"][path], path
    assert "ExplanationOut" in spec["components"]["schemas"]
    assert empty["/nodes"]["nodes"] == [] and empty["/nodes"]["totals"]["utilization"] == 0
    assert empty["/blocks"]["totals"]["accrued"] == "0.000000"
    assert empty["/costs"]["series"] == [] and empty["/costs"]["cost_per_delivered_gpu_hour"] is None


def test_status_and_the_cost_preview_of_a_job(cluster: Cluster) -> None:
    c = cluster
    small = running_small_job(c)
    status = c.get("/status")
    assert status["jobs_by_state"]["RUNNING"] == 1 and status["jobs_total"] == 1
    assert set(status["jobs_by_state"]) == {"PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED",
                                            "CANCELLED", "PREEMPTED", "REJECTED"}  # fmt: skip
    assert status["gpus"]["allocated"] == 2 and status["slices"]["ready"] >= 1
    assert Decimal(status["spend"]["accrued"]) > 0 and status["health"]["role"] == "leader"
    assert status["step_latency"]["count"] >= 20 and status["step_latency"]["max_s"] > 0
    jobs_before = len(c.plane.list_jobs())

    big = c.http.post("/jobs/preview", json={"tier": "FAST", "gpu_count": 8, "vram_per_gpu_gb": 80,
                                             "expected_duration_sec": 1800})  # fmt: skip
    assert big.status_code == 200, big.text
    preview = big.json()
    buy = preview["purchase"]
    assert preview["needs_purchase"] and preview["node"] is None
    assert buy["node_count"] * buy["gpus_per_node"] >= 8 and buy["offers_that_fit"] >= 1
    expected = Decimal(buy["price_per_gpu_hour"]) * 8 / 2  # 8 GPUs for half an hour
    assert abs(Decimal(preview["job_cost"]) - expected) <= Decimal("0.00001")
    assert Decimal(preview["new_commitment"]) == Decimal(buy["committed"]) > 0
    assert buy["provider"] in preview["reason"]

    node = next(n for n in c.get("/nodes")["nodes"] if small in n["jobs"])
    if node["gpus_free"] >= 1:  # the small job's node has room: a 1-GPU job fits there, no purchase
        fits = c.http.post(
            "/jobs/preview", json={"tier": "FAST", "gpu_count": 1, "vram_per_gpu_gb": 1}
        ).json()
        assert (
            not fits["needs_purchase"] and fits["new_commitment"] == "0.000000" and fits["node"] is not None
        )

    refused = c.http.post("/jobs/preview", json={"tier": "FAST", "gpu_count": 100000})
    assert refused.status_code == 422 and refused.json()["type"].endswith("job-rejected")
    typo = c.http.post("/jobs/preview", json={"tier": "FAST", "gpus": 1})
    assert typo.status_code == 422 and typo.json()["type"] == "urn:scalar:problem:invalid-request"
    assert {e["field"] for e in typo.json()["errors"]} == {"gpus", "gpu_count"}  # unknown; and missing
    assert len(c.plane.list_jobs()) == jobs_before  # a preview stores nothing


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)


def test_no_id_parameter_or_body_gives_a_500(sqlite_url: str, tmp_path: Path) -> None:
    clock = Clock()
    plane = ControlPlane(settings_for(sqlite_url, tmp_path), clock=clock)
    plane.run_once()
    plane.submit_job(job(2, 60, vram_per_gpu_gb=40))
    drive([plane], clock, 10)
    paths = ["/nodes", "/blocks", "/autoscaler/status", "/costs", "/status", "/metrics"]
    keys = ["include_gone", "status", "all_groups", "points", "state", "x"]
    try:
        with serve(create_app(plane)) as url, httpx.Client(base_url=url, timeout=30) as http:

            @settings(max_examples=60, deadline=None)
            @given(
                path=st.sampled_from(paths),
                key=st.sampled_from(keys),
                value=st.text(max_size=40),
                job_id=st.text(min_size=1, max_size=250),
                body=st.dictionaries(
                    st.sampled_from(["tier", "gpu_count", "vram_per_gpu_gb", "cpu_cores", "ram_gb",
                                     "expected_duration_sec", "gpu_models", "share_gpu", "name", "bogus"]),
                    JSON_VALUES,
                    max_size=6,
                ),
            )  # fmt: skip
            def probe(path: str, key: str, value: str, job_id: str, body: dict[str, Any]) -> None:
                assert http.get(path, params={key: value}).status_code < 500
                explained = http.get(f"/jobs/{quote(job_id, safe='')}/explain")
                assert explained.status_code in (200, 404, 422), explained.text
                previewed = http.post("/jobs/preview", json=body)
                assert previewed.status_code in (200, 422), previewed.text

            probe()
    finally:
        plane.stop()


def _walk_pages(c: Cluster, path: str, items: str, key: str, limit: int) -> list[list[str]]:
    pages, after = [], None
    while True:
        body = c.get(path, limit=limit, **({"after": after} if after else {}))
        pages.append([row[key] for row in body[items]])
        assert body["count"] == len(body[items]) <= limit
        after = body["next"]
        if after is None:
            return pages


def test_nodes_and_blocks_page_with_a_cursor_and_keep_whole_fleet_totals(cluster: Cluster) -> None:
    c = cluster
    wide = c.plane.submit_job(job(24, 60, vram_per_gpu_gb=40, name="wide"))
    c.drive(30)
    assert c.plane.get_job(wide.id).state == "RUNNING"  # type: ignore[union-attr]
    whole = c.get("/nodes", limit=1000)
    ids = [n["node_id"] for n in whole["nodes"]]
    assert len(ids) >= 3 and ids == sorted(ids) and whole["next"] is None

    pages = _walk_pages(c, "/nodes", "nodes", "node_id", 2)
    assert [i for p in pages for i in p] == ids and all(len(p) == 2 for p in pages[:-1])
    first = c.get("/nodes", limit=2)
    assert first["totals"] == whole["totals"]  # totals are the fleet's on every page
    second = c.get("/nodes", limit=2, after=first["next"])
    back = c.get("/nodes", limit=2, after=second["prev"])
    assert [n["node_id"] for n in back["nodes"]] == ids[:2] and back["prev"] is None

    blocks = [b["block_id"] for b in c.get("/blocks", limit=1000)["blocks"]]
    assert [i for p in _walk_pages(c, "/blocks", "blocks", "block_id", 1) for i in p] == blocks

    bad = c.http.get("/nodes", params={"after": first["next"], "include_gone": "true"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "after"
    too_many = c.http.get("/blocks", params={"limit": 1001})
    assert too_many.status_code == 422 and too_many.json()["errors"][0]["field"] == "limit"
