"""The autoscaler page follows a slice through its lifecycle, live (the market at 60x: a boot takes seconds)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.browser import submit
from tests.e2e.conftest import BrowserPage, Dashboard, _serve

pytestmark = pytest.mark.slow  # headless Chromium, a slice's whole lifecycle

LIFECYCLE = ["requesting", "booting", "initializing", "ready"]

# Records, after every live refresh, which slice states the page shows with a count above zero.
RECORD = """() => {
  window.__slices = [];
  const snap = () => {
    const seen = [...document.querySelectorAll('#slice-totals .slices [data-slice-state]')]
      .filter(b => Number(b.dataset.count) > 0).map(b => b.dataset.sliceState);
    const last = window.__slices[window.__slices.length - 1];
    if (JSON.stringify(seen) !== JSON.stringify(last)) window.__slices.push(seen);
  };
  snap();
  document.addEventListener('scalar:updated', snap);
}"""


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    yield from _serve(tmp_path_factory.mktemp("autoscaler"), time_scale=60.0)


def test_a_slice_moves_through_its_states(browser_page: BrowserPage, dashboard: Dashboard) -> None:
    page = browser_page.open("/ui/autoscaler")
    assert "No slices yet." in page.locator("#groups").inner_text()
    browser_page.shot("before")
    page.evaluate(RECORD)

    submit(dashboard.client, {"tier": "FAST", "gpu_count": 8, "vram_per_gpu_gb": 80, "name": "e2e-slice"})
    page.wait_for_function(
        "() => window.__slices.some(s => s.includes('booting') || s.includes('initializing'))", timeout=30_000
    )
    browser_page.shot("coming-up")
    page.wait_for_function("() => window.__slices.some(s => s.includes('ready'))", timeout=30_000)
    browser_page.shot("ready")

    snapshots: list[list[str]] = page.evaluate("window.__slices")
    # Each snapshot's furthest state; the page saw the slice before READY, then READY, never going back.
    stages = [max(LIFECYCLE.index(s) for s in snap if s in LIFECYCLE) for snap in snapshots if snap]
    assert stages == sorted(stages), snapshots
    assert stages[0] < LIFECYCLE.index("ready") and stages[-1] == LIFECYCLE.index("ready"), snapshots
    assert len(set(stages)) >= 2, snapshots
    group = page.locator("#groups tr[data-group]").first
    assert group.locator("[data-slice-state='ready']").count() == 1
    assert page.locator("#actions tbody tr", has_text="BuyCapacity").count() >= 1
