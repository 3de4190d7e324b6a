"""The dashboard's numbers without a browser: chart geometry, view models, formatting, nav."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

from hypothesis import given
from hypothesis import strategies as st

from scalar.web import charts, formatting, views
from scalar.web.nav import NAV, add_nav_item, nav_items
from scalar.web.router import wants_html

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
levels = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=1e4, allow_nan=False),
        st.floats(min_value=0, max_value=1e5, allow_nan=False),
    ),
    max_size=30,
)


def _coordinates(path: str) -> list[tuple[float, float]]:
    points = []
    for part in path.replace("Z", "").split():
        x, y = part[1:].split(",")
        points.append((float(x), float(y)))
    return points


@given(levels, levels, st.one_of(st.none(), st.floats(min_value=0, max_value=1e4)))
def test_depth_chart_stays_inside_its_box(
    asks: list[tuple[float, float]], bids: list[tuple[float, float]], optimal: float | None
) -> None:
    chart = charts.depth_chart(sorted(asks), sorted(bids, reverse=True), optimal, required_gpus=16)
    assert chart.empty == (not asks and not bids)
    for name in ("asks", "bids"):
        for x, y in _coordinates(chart.paths.get(name, "")):
            assert chart.left - 1e-6 <= x <= chart.right + 1e-6
            assert chart.top - 1e-6 <= y <= chart.bottom + 1e-6


def test_depth_chart_rises_by_each_level() -> None:
    chart = charts.depth_chart([(2.0, 8), (2.5, 24)], [(1.9, 16)], optimal_price=2.5, required_gpus=16)
    ys = [y for _, y in _coordinates(chart.paths["asks"])]
    # The area climbs to the whole book (32 GPUs, the tallest series, drawn at 1/1.05 of the height).
    assert min(ys) == round(chart.bottom - (chart.bottom - chart.top) / 1.05, 1)
    assert ys[0] == ys[-1] == chart.bottom
    assert [m["label"] for m in chart.markers] == ["optimal $2.50", "need 16 GPUs"]
    assert all(chart.left <= t.at <= chart.right for t in chart.x_ticks)


def test_orderbook_view_marks_the_optimal_row_and_scales_the_depth_bars() -> None:
    book = {
        "asks": [
            {"price": 2.0, "quantity_gpus": 8, "duration_hours": 24, "cumulative_quantity": 8},
            {"price": 2.2, "quantity_gpus": 24, "duration_hours": 24, "cumulative_quantity": 32},
        ],
        "bids": [{"price": 1.9, "quantity_gpus": 16, "duration_hours": 24}],
        "optimal_index": 1,
        "optimal_price": 2.2,
        "metadata": {"required_gpus": 16, "node_count": 2, "gpus_per_node": 8},
        "reason": {"code": "optimal_level", "message": "Bid $2.20/GPU-h"},
    }
    view = views.orderbook_view(book)
    assert [r["optimal"] for r in view["asks"]] == [False, True]
    assert [r["bar_pct"] for r in view["asks"]] == [25.0, 100.0]
    assert view["optimal_row"]["price"] == 2.2
    assert view["reason"] == "Bid $2.20/GPU-h"
    assert views.orderbook_view({})["asks"] == []


def _nodes_page(gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``GET /nodes`` answer: one node with ``gpus``."""
    from scalar.wire.views import NodeSlotsOut, NodeTotalsOut

    node: dict[str, Any] = {n: None for n, f in NodeSlotsOut.model_fields.items() if f.is_required()}
    node |= {"node_id": "n0", "gpu_count": len(gpus), "gpus_allocated": 3, "gpus_free": 1}
    node |= {"vram_per_gpu_gb": 80.0, "jobs": ["a", "b"], "expires_in_s": 60.0, "gpus": gpus}
    totals: dict[str, Any] = {name: 0 for name in NodeTotalsOut.model_fields} | {"nodes_by_state": {}}
    return {"nodes": [node], "count": 1, "totals": totals | {"utilization": 0.75}, "at": None, "next": "c2"}


def test_cluster_view_colors_each_job_alike_and_shades_vram() -> None:
    body = _nodes_page(
        [
            {"index": 0, "job_ids": ["a"], "vram_used_gb": 40, "vram_total_gb": 80},
            {"index": 1, "job_ids": ["b"], "vram_used_gb": 80, "vram_total_gb": 80},
            {"index": 2, "job_ids": ["a"], "vram_used_gb": 80, "vram_total_gb": 80},
            {"index": 3, "job_ids": [], "vram_used_gb": 0, "vram_total_gb": 80},
        ]
    )
    view = views.cluster_view(body, NOW)
    assert view is not None and view["totals"]["utilization"] == 0.75
    cells = view["nodes"][0]["cells"]
    assert [c["color"] for c in cells] == [0, 1, 0, None]
    assert [c["vram_pct"] for c in cells] == [50, 100, 100, 0]
    assert views.cluster_view({"nodes": "junk"}, NOW) is None


def test_block_rows_count_down_to_the_expiry_from_the_blocks_model() -> None:
    from scalar.wire.views import BlockOut

    block: dict[str, Any] = {n: None for n, f in BlockOut.model_fields.items() if f.is_required()}
    block |= {"block_id": "b1", "provider": "aws", "node_ids": [], "node_count": 0, "gpu_count": 8}
    block |= {"price_per_gpu_hour": "2", "price_per_hour": "16", "committed": "16", "accrued": "1"}
    block |= {"end_time": (NOW + timedelta(seconds=90)).isoformat()}
    totals = {
        "blocks": 1,
        "open_blocks": 1,
        "open_gpus": 8,
        "open_price_per_hour": "16",
        "committed": "16",
        "accrued": "1",
    }
    body = {"blocks": [block], "count": 1, "status": None, "totals": totals, "at": None}
    rows = views.block_rows(body, NOW)
    assert [(r["block_id"], r["expires_in_s"]) for r in rows] == [("b1", 90.0)]
    assert views.block_rows({"blocks": [block]}, NOW) == []  # not a blocks answer


def _group(name: str, slices: dict[str, int]) -> dict[str, Any]:
    from scalar.wire.views import GroupStatusOut

    group: dict[str, Any] = {n: None for n, f in GroupStatusOut.model_fields.items() if f.is_required()}
    return group | {"name": name, "slices": slices}


def _autoscaler(groups: list[dict[str, Any]], totals: dict[str, int]) -> dict[str, Any]:
    """A follower's ``GET /autoscaler/status`` answer with these ``groups`` and nothing else going on."""
    return {
        "source": "store",
        "at": NOW.isoformat(),
        "routed_at": None,
        "last_routing": None,
        "routing_lines": [],
        "pending_groups": [],
        "unmet": [],
        "unmet_by_reason": [],
        "groups": groups,
        "groups_total": len(groups),
        "slice_totals": totals,
        "open_orders": [],
        "recent_actions": [],
        "notes": [],
    }


def test_autoscaler_view_orders_badges_by_lifecycle_and_busy_groups_first() -> None:
    body = _autoscaler(
        [_group("idle", {"ready": 0}), _group("busy", {"booting": 1, "ready": 2, "terminated": 3})],
        {"requesting": 0, "booting": 1, "initializing": 0, "ready": 2, "failed": 0},
    )
    view = views.autoscaler_view(body)
    assert view is not None
    assert [g["name"] for g in view["active_groups"]] == ["busy"]
    assert view["groups"][0]["badges"][:5] == [
        ("requesting", 0),
        ("booting", 1),
        ("initializing", 0),
        ("ready", 2),
        ("failed", 0),
    ]
    assert ("terminated", 3) in view["groups"][0]["badges"]
    assert view["consolidation"] is None  # a follower does not know consolidation's decisions
    assert views.autoscaler_view({"groups": body["groups"]}) is None  # not an autoscaler answer


def _costs(series: list[dict[str, Any]], providers: list[str]) -> dict[str, Any]:
    """A ``GET /costs`` answer: nothing spent but in ``series``, and ``providers`` listed."""
    from decimal import Decimal

    from scalar.engine.costs import BlockAccount, cost_report
    from scalar.runtime.views_market import cost_answer

    accounts = [
        BlockAccount(f"blk-{p}", p, "open", Decimal(3600), {}, Decimal(i + 1), Decimal(3600))
        for i, p in enumerate(providers)
    ]
    return {"at": NOW.isoformat(), **cost_answer(cost_report(accounts)), "series": series}


def test_costs_view_charts_the_cumulative_spend() -> None:
    series = [
        {
            "at": (NOW + timedelta(seconds=i)).isoformat(),
            "spend": f"{i * 0.5:.6f}",
            "spend_in_interval": "0.5",
            "by_provider": {},
        }
        for i in range(5)
    ]
    view = views.costs_view(_costs(series, ["aws", "gcp"]))
    assert view is not None and view["chart"] is not None and view["chart"].paths["line"].startswith("M")
    assert [p["bar_pct"] for p in view["providers"]] == [50.0, 100.0]
    assert set(view["accounts"]) == {"blk-aws", "blk-gcp"}
    one = views.costs_view(_costs(series[:1], []))
    assert one is not None and one["chart"] is None and one["providers"] == []
    assert views.costs_view({"series": series}) is None  # not a costs answer


def test_jobs_wait_until_they_start() -> None:
    def job(job_id: str, state: str, submitted: str, started: str | None) -> dict[str, Any]:
        return {"id": job_id, "state": state, "tier": "FAST", "gpu_count": 1} | {
            "submitted_at": submitted,
            "started_at": started,
        }

    jobs: list[Any] = [
        job("a", "RUNNING", "2026-01-01T11:59:00Z", "2026-01-01T11:59:30Z"),
        job("b", "PENDING", "2026-01-01T11:58:00Z", None),
        {"id": "c", "state": "PENDING"},  # not a job: no tier, no GPUs
    ]
    rows = views.job_rows(jobs, NOW)
    assert [r["wait_s"] for r in rows] == [30.0, 120.0]
    assert rows[0]["submitted_at"] == "2026-01-01T11:59:00Z"  # as the API sent it
    assert views.state_counts(jobs) == [("PENDING", 1), ("RUNNING", 1)]


def test_price_sort_links_flip_the_order_of_the_current_column() -> None:
    urls = views.sort_urls({"sort": "price_per_gpu_hour", "descending": "", "gpu_model": "H100"})
    assert parse_qs(urls["price_per_gpu_hour"][1:]) == {
        "sort": ["price_per_gpu_hour"],
        "descending": ["true"],
        "gpu_model": ["H100"],
    }
    assert parse_qs(urls["provider"][1:]) == {"sort": ["provider"], "gpu_model": ["H100"]}


@given(st.one_of(st.none(), st.text(), st.floats(), st.integers(), st.booleans()))
def test_formatting_never_fails(value: object) -> None:
    for name, filter_ in formatting.FILTERS.items():
        assert isinstance(filter_(value), str), name


def test_formatting_examples() -> None:
    assert formatting.usd("2.346896") == "$2.35"
    assert formatting.per_gpu_hour(0.516875) == "$0.5169"
    assert formatting.duration(3905) == "1h05m"
    assert formatting.duration(None) == "-"
    assert formatting.percent(0.125, 1) == "12.5%"


def test_nav_is_one_list_other_pages_extend() -> None:
    before = list(NAV)
    try:
        add_nav_item("/ui/test-account", "Account", place="end")
        add_nav_item("/ui/test-account", "Account again", place="end")
        assert [i.title for i in nav_items("end") if i.path == "/ui/test-account"] == ["Account"]
        assert [i.title for i in nav_items("main")][:3] == ["Overview", "Orderbook", "Cluster"]
    finally:
        NAV[:] = before


def test_browsers_are_told_apart_from_json_clients() -> None:
    assert wants_html("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
    assert not wants_html("*/*")
    assert not wants_html("application/json")
    assert not wants_html("application/json, text/html")


def test_the_costs_page_shows_utilisation_delivered_idle_resold_and_tenants() -> None:
    import re
    from decimal import Decimal

    from scalar.engine.costs import BlockAccount, cost_report
    from scalar.runtime.views_market import cost_answer
    from scalar.web.router import POLL_MS, templates

    # 10 GPU-hours paid at $2/GPU-h; ml's jobs held 4 of them, web's 1: 5 delivered, 5 idle, 50%.
    account = BlockAccount(
        "blk-1",
        "sfcompute",
        "open",
        Decimal(36_000),
        {"ml": Decimal(14_400), "web": Decimal(3_600)},
        Decimal(20),
        Decimal(336),
    )
    body = {"at": NOW.isoformat(), **cost_answer(cost_report([account])), "series": []}
    html = templates.env.get_template("costs.html").render(
        fragment=False,
        path="/ui/costs",
        rendered_at=NOW.isoformat(),
        now=NOW,
        poll_ms=POLL_MS,
        static="/ui/static",
        title="Costs",
        view=views.costs_view(body),
        problem="",
        blocks=[],
        blocks_problem="",
    )
    stats = dict(
        re.findall(r'<span class="stat-label">([^<]+)</span><span class="stat-value">([^<]+)</span>', html)
    )
    assert stats["Utilisation"] == "50.0%"
    assert (stats["Paid GPU-h"], stats["Delivered GPU-h"], stats["Idle GPU-h"]) == ("10", "5", "5")
    assert (stats["Idle $"], stats["Resold GPU-h"], stats["Resale revenue"]) == ("$10.00", "0", "$0.00")
    assert stats["$ per delivered GPU-h"].startswith("$4.00")
    tenants = re.findall(
        r"<tr><td>([^<]+)</td><td class=\"num\">([^<]+)</td><td class=\"num\">([^<]+)</td></tr>", html
    )
    assert tenants == [("ml", "4", "$8.00"), ("web", "1", "$2.00"), ("(idle)", "5", "$10.00")]


def test_the_overview_counts_jobs_from_the_status_model() -> None:
    from scalar.wire.views import StatusOut

    assert views.jobs_by_state({}) == {} and views.jobs_by_state({"title": "a problem"}) == {}
    empty: dict[str, Any] = {name: None for name in StatusOut.model_fields}
    assert views.jobs_by_state({**empty, "jobs_by_state": {"PENDING": 1}}) == {}  # not a status: none counted
    zero = {"total": 0, "allocated": 0, "idle": 0, "utilization": 0.0}
    spend = {
        "currency": "USD",
        "accrued": "0",
        "by_provider": {},
        "committed": "0",
        "open_price_per_hour": "0",
    }
    body: dict[str, Any] = {
        "at": None,
        "health": {"status": "ok"},
        "jobs_by_state": {"PENDING": 1, "RUNNING": 2},
        "jobs_total": 3,
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
    assert views.jobs_by_state(body) == {"PENDING": 1, "RUNNING": 2}
