"""``/docs`` (Swagger UI) renders in headless Chromium from this server alone: every request
the browser makes stays on loopback (anything else is aborted and fails the test), and the page shows the
API's operations. Tokens are required, as `scalar up` runs; the docs need none."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Route

from tests.e2e.browser import ARTIFACTS, VIEWPORT, screenshot
from tests.e2e.conftest import Dashboard, _serve

pytestmark = pytest.mark.slow  # headless Chromium

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    yield from _serve(tmp_path_factory.mktemp("api-docs"), auth_required=True)


def test_swagger_ui_renders_offline(browser: Browser, dashboard: Dashboard) -> None:
    requested: list[str] = []
    outside: list[str] = []
    errors: list[str] = []

    def guard(route: Route) -> None:
        target = urlsplit(route.request.url)
        requested.append(route.request.url)
        if target.scheme in {"data", "blob"} or target.hostname in LOOPBACK:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context = browser.new_context(viewport=VIEWPORT)  # no cookie, no token
    try:
        context.route("**/*", guard)
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(dashboard.url + "/docs")
        page.wait_for_selector(".swagger-ui .opblock")
        assert "Scalar" in page.locator(".swagger-ui .info .title").inner_text()
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        assert any("/jobs" in p for p in paths) and any("/endpoints" in p for p in paths)
        assert page.locator(".swagger-ui .errors-wrapper").count() == 0, "the document renders cleanly"
        screenshot(page, ARTIFACTS / "api-docs.png", max_height=2400)
    finally:
        context.close()
    assert not outside, f"requests left the machine: {outside}"
    assert not errors, errors
    assert any(u.endswith("/docs/assets/swagger-ui-bundle.js") for u in requested)
    assert any(u.endswith("/openapi.json") for u in requested)
