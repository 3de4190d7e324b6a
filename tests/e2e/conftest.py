"""Browser tests: a real control plane served on loopback, driven by headless Chromium (Playwright).

One browser and one control plane per test module (SQLite, its own data dir and free port, so the suite
is xdist-safe); each test gets a fresh browser context. Every page a test visits is saved as a screenshot
under test-artifacts/e2e/ (gitignored). Any 5xx answer the browser sees fails the test.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, Response, sync_playwright

from scalar.runtime import ControlPlane
from tests.api.real_control_plane import real_api
from tests.dbfixtures import fresh_database
from tests.e2e.browser import ARTIFACTS, VIEWPORT, launch, screenshot


@dataclass
class Dashboard:
    url: str
    control_plane: ControlPlane
    client: httpx.Client


@dataclass
class BrowserPage:
    """A page with its dashboard; ``errors`` collects 5xx answers and script errors."""

    page: Page
    dashboard: Dashboard
    name: str
    errors: list[str] = field(default_factory=list)
    shots: int = 0

    def open(self, path: str) -> Page:
        self.page.goto(self.dashboard.url + path)
        return self.page

    def shot(self, label: str) -> Path:
        self.shots += 1
        return screenshot(self.page, ARTIFACTS / f"{self.name}-{self.shots:02d}-{label}.png")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


def _serve(tmp: Path, **overrides: object) -> Iterator[Dashboard]:
    with (
        fresh_database("sqlite", tmp) as url,
        real_api(url, tmp, **overrides) as (base, control_plane),
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        yield Dashboard(base, control_plane, client)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """A started control plane with the built-in market 600x faster, served on a free loopback port."""
    yield from _serve(tmp_path_factory.mktemp("dashboard"))


@pytest.fixture
def browser_page(
    browser: Browser, dashboard: Dashboard, request: pytest.FixtureRequest
) -> Iterator[BrowserPage]:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(20_000)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    wrapped = BrowserPage(page, dashboard, name)

    def on_response(response: Response) -> None:
        if response.status >= 500:
            wrapped.errors.append(f"{response.status} from {response.url}")

    page.on("response", on_response)
    page.on("pageerror", lambda exc: wrapped.errors.append(f"script error: {exc}"))
    try:
        yield wrapped
        if wrapped.shots == 0:
            wrapped.shot("end")
    finally:
        context.close()
    assert not wrapped.errors, wrapped.errors
