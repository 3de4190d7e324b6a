"""Shared by the browser tests and the docs screenshot script: Chromium, the pages, a demo workload."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, FloatRect, Page, Playwright, ViewportSize

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
ARTIFACTS = REPO / "test-artifacts" / "e2e"
VIEWPORT: ViewportSize = {"width": 1360, "height": 900}

# (name, path): every dashboard page, as the docs and the tests visit them.
PAGES = [
    ("overview", "/ui/"),
    ("orderbook", "/ui/orderbook?instance_type=8xH100&node_count=4"),
    ("cluster", "/ui/cluster"),
    ("jobs", "/ui/jobs"),
    ("autoscaler", "/ui/autoscaler"),
    ("prices", "/ui/prices"),
    ("costs", "/ui/costs"),
]

# A small mixed workload: enough to buy a few nodes, run some jobs and leave one waiting.
DEMO_JOBS: list[dict[str, Any]] = [
    {
        "tier": "FAST",
        "gpu_count": 8,
        "vram_per_gpu_gb": 80,
        "cpu_cores": 16,
        "ram_gb": 256,
        "expected_duration_sec": 600,
        "priority": 3,
        "name": "train-llama-8b",
    },
    {
        "tier": "FAST",
        "gpu_count": 4,
        "vram_per_gpu_gb": 40,
        "cpu_cores": 8,
        "ram_gb": 128,
        "expected_duration_sec": 600,
        "priority": 2,
        "name": "finetune-mistral",
    },
    {
        "tier": "FAST",
        "gpu_count": 2,
        "vram_per_gpu_gb": 24,
        "cpu_cores": 4,
        "ram_gb": 64,
        "expected_duration_sec": 600,
        "priority": 5,
        "name": "inference-a",
    },
    {
        "tier": "FAST",
        "gpu_count": 1,
        "vram_per_gpu_gb": 24,
        "cpu_cores": 2,
        "ram_gb": 32,
        "expected_duration_sec": 600,
        "priority": 5,
        "name": "inference-b",
    },
    {
        "tier": "FLEX",
        "gpu_count": 8,
        "vram_per_gpu_gb": 80,
        "cpu_cores": 16,
        "ram_gb": 256,
        "expected_duration_sec": 1800,
        "priority": 1,
        "name": "batch-eval",
    },
]


def launch(playwright: Playwright) -> Browser:
    """Headless Chromium (Debian's package, installed by `make sysdeps`)."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: run `make sysdeps` to install Chromium")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def submit(client: httpx.Client, job: dict[str, Any]) -> str:
    response = client.post("/jobs", json=job)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def wait_until(check: Any, timeout_s: float = 60.0, what: str = "condition") -> Any:
    """Poll ``check()`` every 0.1 s until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.1)


def screenshot(page: Page, path: Path, max_height: int | None = None) -> Path:
    """The whole page, or its top ``max_height`` pixels."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if max_height is None:
        page.screenshot(path=str(path), full_page=True)
    else:
        height = min(max_height, int(page.evaluate("document.documentElement.scrollHeight")))
        clip: FloatRect = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": height}
        page.screenshot(path=str(path), full_page=True, clip=clip)
    return path
