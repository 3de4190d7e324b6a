"""Every dashboard page renders the control plane's real data in headless Chromium, and stays live."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from scalar.web.formatting import percent, quantity, usd
from tests.e2e.browser import submit, wait_until
from tests.e2e.conftest import BrowserPage, Dashboard

pytestmark = pytest.mark.slow  # headless Chromium

JOB = {
    "tier": "FAST",
    "gpu_count": 4,
    "vram_per_gpu_gb": 40,
    "cpu_cores": 8,
    "ram_gb": 64,
    "expected_duration_sec": 600,
    "name": "e2e-finetune",
}


def _running_job(dashboard: Dashboard) -> str:
    job_id = submit(dashboard.client, JOB)
    wait_until(
        lambda: dashboard.client.get(f"/jobs/{job_id}").json()["state"] == "RUNNING",
        timeout_s=60,
        what=f"job {job_id} RUNNING",
    )
    return job_id


def _number(text: str) -> float:
    return float(re.sub(r"[^0-9.\-]", "", text))


def test_every_page_renders_real_data(browser_page: BrowserPage, dashboard: Dashboard) -> None:
    api = dashboard.client
    job_id = _running_job(dashboard)
    page = browser_page.page

    browser_page.open("/ui/")
    assert page.locator(".stat.ok .stat-value").first.inner_text() == "ok"
    assert page.locator("#market-table tbody tr").count() == len(api.get("/market").json()["gpu_models"])
    assert page.locator("#providers-table tbody tr").count() == len(api.get("/providers").json()["providers"])
    browser_page.shot("overview")

    browser_page.open("/ui/orderbook?instance_type=8xH100&node_count=2")
    book = api.get("/orderbook", params={"instance_type": "8xH100", "node_count": 2}).json()
    assert page.locator("#asks tbody tr").count() > 0
    assert page.locator("#bids tbody tr").count() > 0
    optimal = page.locator("#optimal-row")
    assert optimal.count() == 1
    # The highlighted row is the optimal one: its price is the optimal price shown above the book.
    assert optimal.locator(".price").inner_text() in page.locator(".stat.optimal").inner_text()
    assert page.locator(".stat", has_text="Needed").inner_text().endswith("16 GPUs (2 × 8)")
    assert page.locator("#depth-chart path.asks-area").get_attribute("d")
    assert book["asks"], "the built-in market sells 8xH100"
    browser_page.shot("orderbook")

    browser_page.open("/ui/cluster")
    nodes = api.get("/nodes").json()
    assert page.locator("tr[data-node-id]").count() == nodes["count"] > 0
    hosting = page.locator(f".gpu[title*='{job_id}']")
    assert hosting.count() == JOB["gpu_count"]
    assert "job-" in (hosting.first.get_attribute("class") or "")
    assert page.locator("#cluster-totals .utilization .stat-value").inner_text().endswith("%")
    assert page.locator("#cluster-totals .fragmentation .stat-value").inner_text().endswith("%")
    assert page.locator("[data-expires]").count() >= 1
    browser_page.shot("cluster")

    browser_page.open("/ui/jobs")
    row = page.locator(f"tr[data-job-id='{job_id}']")
    assert row.get_attribute("data-state") == "RUNNING"
    assert "runs on" in row.locator(".reason-cell").inner_text()
    browser_page.shot("jobs")

    browser_page.open("/ui/autoscaler")
    assert int(page.locator("#slice-totals [data-slice-state='ready']").get_attribute("data-count") or 0) >= 1
    for state in ("requesting", "booting", "initializing", "ready", "failed"):
        assert page.locator(f"#slice-totals .legend-list .slice-{state}").count() == 1
    assert page.locator("#actions tbody tr").count() >= 1
    browser_page.shot("autoscaler")

    browser_page.open("/ui/prices")
    offers = api.get("/prices").json()["offers"]
    assert page.locator("#prices-table tbody tr").count() == min(200, len(offers))
    prices = [_number(t) for t in page.locator("#prices-table tbody td.price").all_inner_texts()]
    assert prices == sorted(prices)
    page.locator("a.sort[data-sort='price_per_gpu_hour']").click()
    page.wait_for_url(re.compile(r"descending=true"))
    prices = [_number(t) for t in page.locator("#prices-table tbody td.price").all_inner_texts()]
    assert prices == sorted(prices, reverse=True)
    browser_page.shot("prices")

    browser_page.open("/ui/costs")
    _assert_cost_tiles_are_the_api_answer(browser_page)
    costs = api.get("/costs").json()
    assert page.locator("#by-provider tbody tr").count() == len(costs["by_provider"]) > 0
    assert page.locator("svg.chart.spend path.line").count() == 1
    assert page.locator("#blocks tbody tr").count() == min(100, api.get("/blocks").json()["count"])
    browser_page.shot("costs")


# The totals tiles of the costs page that are /costs' fields, with the page's formatting (costs.html).
COST_TILES: dict[str, Callable[[dict[str, Any]], str]] = {
    "Utilisation": lambda c: "-" if c["utilization"] is None else percent(c["utilization"], 1),
    "Paid GPU-h": lambda c: quantity(c["paid_gpu_hours"]),
    "Delivered GPU-h": lambda c: quantity(c["delivered_gpu_hours"]),
    "Idle GPU-h": lambda c: quantity(c["idle_gpu_hours"]),
    "Idle $": lambda c: usd(c["idle_cost"]),
    "Resold GPU-h": lambda c: quantity(c["sold_back_gpu_hours"]),
    "Resale revenue": lambda c: usd(c["sold_back_revenue"]),
}
READ_TILES = """() => Object.fromEntries([...document.querySelectorAll('#cost-totals .stat')].map(
    s => [s.querySelector('.stat-label').textContent.trim(), s.querySelector('.stat-value').textContent.trim()]))"""


def _assert_cost_tiles_are_the_api_answer(browser_page: BrowserPage, timeout_s: float = 60.0) -> None:
    """The costs page's tiles show what ``GET /costs`` answers for the same state. The answer moves while a
    contract is open (its GPU-hours accrue to the second, the utilisation with them, ever more slowly as
    the job runs on), so the page is rendered between two reads of the API until both read the same as
    formatted: the page, rendered in between, must then show exactly that."""
    api, page = browser_page.dashboard.client, browser_page.page
    deadline = time.monotonic() + timeout_s
    while True:
        before = {label: show(api.get("/costs").json()) for label, show in COST_TILES.items()}
        page.reload()
        tiles = page.evaluate(READ_TILES)
        after = {label: show(api.get("/costs").json()) for label, show in COST_TILES.items()}
        if before == after:
            assert {label: tiles.get(label) for label in COST_TILES} == after, tiles
            assert after["Utilisation"].endswith("%"), after  # a contract was paid for: not "-"
            return
        assert time.monotonic() < deadline, (
            f"GET /costs never read the same around a render: {before}, {after}"
        )
        time.sleep(0.5)


def test_orderbook_inputs_recompute_the_optimal_row(browser_page: BrowserPage, dashboard: Dashboard) -> None:
    page = browser_page.open("/ui/orderbook?instance_type=8xH100&node_count=1")
    page.evaluate("window.__notReloaded = true")
    first = page.locator("#optimal-row")
    cumulative = _number(first.locator("td").nth(4).inner_text())
    total = _number(page.locator(".stat", has_text="Ask liquidity").locator(".stat-value").inner_text())
    # More nodes than the first optimal level covers, within the book: the optimal row must move down.
    nodes = int(cumulative // 8) + 1
    assert nodes * 8 <= total, "the built-in book is deep enough for this test"

    page.fill("#node_count", str(nodes))
    page.wait_for_function(
        "n => (document.querySelector('.stat-value') && [...document.querySelectorAll('.stat')]"
        ".some(s => s.textContent.includes('Needed') && s.textContent.includes(n + ' GPUs')))",
        arg=str(nodes * 8),
    )
    assert page.evaluate("window.__notReloaded") is True, "the page updated in place"
    assert f"node_count={nodes}" in page.url
    # The book moves with the market, so check what must hold whatever it did: the highlighted row now
    # covers the larger need (the first one could not), and the optimal price shown is that row's price.
    moved = page.locator("#optimal-row")
    assert _number(moved.locator("td").nth(4).inner_text()) >= nodes * 8 > cumulative
    assert moved.locator(".price").inner_text() in page.locator(".stat.optimal").inner_text()
    assert page.locator("#asks tr.optimal").count() == 1
    browser_page.shot("more-nodes")

    page.fill("#instance_type", "8xH200")
    page.wait_for_selector("#depth-chart[aria-label='depth chart of 8xH200']")
    assert page.locator("#optimal-row").count() == 1
    assert "instance_type=8xH200" in page.url
    browser_page.shot("h200")

    page.fill("#node_count", "0")
    problem = page.wait_for_selector(".problem")
    assert problem is not None and "node_count" in problem.inner_text()
    browser_page.shot("bad-input")


def test_a_new_job_appears_and_its_explanation_opens(browser_page: BrowserPage, dashboard: Dashboard) -> None:
    page = browser_page.open("/ui/jobs")
    page.evaluate("window.__notReloaded = true")
    job_id = submit(dashboard.client, {**JOB, "name": "e2e-appears", "gpu_count": 2})
    row = page.wait_for_selector(f"tr[data-job-id='{job_id}']", timeout=15_000)
    assert page.evaluate("window.__notReloaded") is True, "the job appeared without a reload"
    assert row is not None and "e2e-appears" in row.inner_text()
    browser_page.shot("jobs")

    page.click(f"tr[data-job-id='{job_id}'] a.job-link")
    page.wait_for_url(re.compile(re.escape(f"/ui/jobs/{job_id}")))
    summary = page.locator("#explain-summary").inner_text()
    explain = dashboard.client.get(f"/jobs/{job_id}/explain").json()
    assert summary.split(":")[0] in {"PENDING", "SCHEDULED", "RUNNING"}
    assert page.locator("#explain-lines li").count() >= 1
    page.wait_for_selector("#story tbody tr")  # the story starts once the controller has taken the job
    assert "submitted" in page.locator("#story").inner_text()
    assert explain["job_id"] == job_id
    browser_page.shot("explanation")


def test_the_jobs_page_lists_the_newest_first_and_filters_by_state(
    browser_page: BrowserPage, dashboard: Dashboard
) -> None:
    ids: list[str] = []
    for i in range(3):  # job ids carry the submission second: one second apart, their order is known
        if ids:
            time.sleep(1.05)
        ids.append(submit(dashboard.client, {**JOB, "name": f"e2e-order-{i}", "gpu_count": 1}))
    cancelled = dashboard.client.delete(f"/jobs/{ids[1]}")
    assert cancelled.status_code == 202, cancelled.text
    wait_until(
        lambda: dashboard.client.get(f"/jobs/{ids[1]}").json()["state"] == "CANCELLED",
        what=f"job {ids[1]} CANCELLED",
    )
    page = browser_page.open("/ui/jobs")
    page.wait_for_selector(f"tr[data-job-id='{ids[-1]}']")
    shown = page.locator("#jobs-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.jobId)")
    assert shown == sorted(shown, reverse=True), "newest first (ids sort by submission time)"
    assert [shown.index(i) for i in reversed(ids)] == sorted(shown.index(i) for i in ids)
    assert "Newest first" in page.locator("#jobs-table caption").inner_text()
    browser_page.shot("jobs-newest-first")

    page.click("nav.filters a[href$='state=CANCELLED']")
    page.wait_for_url(re.compile(r"state=CANCELLED"))
    page.wait_for_selector(f"tr[data-job-id='{ids[1]}']")
    states = page.locator("#jobs-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.state)")
    assert set(states) == {"CANCELLED"}
    assert page.locator(f"tr[data-job-id='{ids[0]}']").count() == 0
    assert page.locator("nav.filters a[aria-current='page']").inner_text().lower() == "cancelled"
    browser_page.shot("jobs-cancelled")


def test_empty_states_and_unknown_job_read_well(browser_page: BrowserPage, dashboard: Dashboard) -> None:
    page = browser_page.open("/ui/jobs?state=preempted")
    assert "No preempted jobs." in page.locator(".empty").inner_text()
    response = page.goto(dashboard.url + "/ui/jobs/no-such-job")
    assert response is not None and response.status == 404
    assert "no job with id 'no-such-job'" in page.locator(".problem").inner_text()
    browser_page.shot("unknown-job")


# Pages that read query parameters get every odd value in every parameter; the others one odd query.
QUERY_PAGES = ["/ui/orderbook", "/ui/jobs", "/ui/prices"]
OTHER_PAGES = ["/ui/", "/ui/cluster", "/ui/autoscaler", "/ui/costs"]
ODD_VALUES = [
    "",
    "0",
    "-1",
    "1e309",
    "NaN",
    "abc",
    "true",
    "%00",
    "<script>alert(1)</script>",
    "ü" * 300,
    "x" * 5000,
]
PARAMS = [
    "instance_type",
    "node_count",
    "state",
    "sort",
    "descending",
    "gpu_model",
    "provider",
    "source",
    "after",
    "x",
]


def test_no_page_answers_500_on_any_query_string(dashboard: Dashboard) -> None:
    client = dashboard.client
    cases = [(path, value) for path in QUERY_PAGES for value in ODD_VALUES]
    cases += [(path, value) for path in OTHER_PAGES for value in ("<script>alert(1)</script>", "x" * 5000)]
    for path, value in cases:
        response = client.get(path, params={p: value for p in PARAMS}, headers={"accept": "text/html"})
        assert response.status_code < 500, (path, value, response.text[:500])
        assert response.headers["content-type"].startswith("text/html")
        assert "<script>alert(1)</script>" not in response.text
    fragment = client.get("/ui/jobs", params={"state": "bogus"}, headers={"x-scalar-fragment": "1"})
    assert fragment.status_code == 200 and fragment.text.startswith('<div id="live-fragment"')
    assert "unknown job state" in fragment.text and "fix: give one of PENDING" in fragment.text
    for job_id in ["%2F", "x" * 500, "ü", "job-1%2Fexplain", "a b", "%00"]:
        response = client.get(f"/ui/jobs/{job_id}")
        assert response.status_code == 404, (job_id, response.status_code)
    assert client.get("/ui", follow_redirects=False).headers["location"] == "/ui/"


def test_browsers_get_the_dashboard_at_the_root_and_json_clients_the_index(dashboard: Dashboard) -> None:
    browser_accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    response = dashboard.client.get("/", headers={"accept": browser_accept}, follow_redirects=False)
    assert response.status_code == 307 and response.headers["location"] == "/ui/"
    for accept in ["application/json", "*/*", "application/json, text/html"]:
        index = dashboard.client.get("/", headers={"accept": accept})
        assert index.json()["dashboard"] == "/ui/", accept
    static = dashboard.client.get("/ui/static/dashboard.js")
    assert static.status_code == 200 and "X-Scalar-Fragment" in static.text


def test_the_jobs_and_cluster_pages_link_to_the_next_and_previous_pages(
    dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    import html
    import re as re_mod

    from scalar.web import router

    monkeypatch.setattr(router, "JOBS_PAGE", 2)
    client = dashboard.client
    for i in range(5):
        submit(client, {"tier": "FAST", "gpu_count": 1, "name": f"pager-{i}", "expected_duration_sec": 60})
    seen: list[str] = []
    url: str | None = "/ui/jobs"
    first = client.get("/ui/jobs", headers={"accept": "text/html"}).text
    assert 'rel="prev"' not in first and 'rel="next"' in first
    pages = 0
    while url is not None and pages < 100:
        text = client.get(url, headers={"accept": "text/html"}).text
        ids = re_mod.findall(r'data-job-id="([^"]+)"', text)
        assert len(ids) <= 2
        seen += ids
        found = re_mod.search(r'rel="next" href="([^"]+)"', text)
        url = html.unescape(found.group(1)) if found else None
        pages += 1
        if url is not None:
            assert "after=" in url
    assert len(seen) == len(set(seen)) >= 5  # every job once, newest first
    assert seen == sorted(seen, reverse=True)
    bad = client.get("/ui/jobs", params={"after": "nonsense"}, headers={"accept": "text/html"})
    assert bad.status_code < 500 and "after" in bad.text
    assert client.get("/ui/cluster", headers={"accept": "text/html"}).status_code == 200
