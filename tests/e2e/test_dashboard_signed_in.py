"""With API tokens required (as `scalar up` runs), a signed-in browser sees the dashboard's data: the
pages pass the browser's cookie on to the JSON API they read, on the first load and on every refresh."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from scalar.runtime.auth import ensure_local_admin_token
from tests.e2e.browser import ARTIFACTS, VIEWPORT, screenshot
from tests.e2e.conftest import Dashboard, _serve

pytestmark = pytest.mark.slow  # headless Chromium

COOKIE = "scalar_token"


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    yield from _serve(tmp_path_factory.mktemp("signed-in"), auth_required=True)


def test_the_dashboard_reads_the_api_as_the_signed_in_user(
    browser: Browser, dashboard: Dashboard, tmp_path: Path
) -> None:
    token = ensure_local_admin_token(dashboard.control_plane.tokens, tmp_path)
    assert token
    anonymous = dashboard.client.get("/ui/jobs", follow_redirects=False)
    assert anonymous.status_code in {303, 401}, "pages need a token like the API"
    headers = {"authorization": f"Bearer {token}"}

    context = browser.new_context(viewport=VIEWPORT)
    try:
        context.add_cookies([{"name": COOKIE, "value": token, "url": dashboard.url}])
        page = context.new_page()
        page.goto(dashboard.url + "/ui/jobs")
        assert "No jobs yet." in page.locator(".empty").inner_text()
        assert page.locator(".problem").count() == 0
        job = {"tier": "FAST", "gpu_count": 1, "name": "e2e-signed-in"}
        response = dashboard.client.post("/jobs", json=job, headers=headers)
        assert response.status_code == 201, response.text
        page.wait_for_selector(f"tr[data-job-id='{response.json()['id']}']", timeout=15_000)
        page.goto(dashboard.url + "/ui/")
        assert page.locator("#market-table tbody tr").count() > 0
        screenshot(page, ARTIFACTS / "signed-in-overview.png")
    finally:
        context.close()
