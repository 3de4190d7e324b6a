"""Save a screenshot of every dashboard page to docs/screenshots/ (run: python -m tests.e2e.screenshots).

Starts a real control plane on a temporary SQLite database with the built-in market 60x faster (as
`make run`), submits a small mixed workload, waits until jobs run, then captures each page in headless
Chromium. The pages are those of docs/dashboard.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, sync_playwright

from tests.api.real_control_plane import real_api
from tests.e2e.browser import DEMO_JOBS, PAGES, REPO, VIEWPORT, launch, screenshot, submit, wait_until

MAX_HEIGHT = 1400  # pixels: the top of long pages (the prices table lists up to 200 offers)


def capture(page: Page, url: str, path: Path) -> None:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    print(screenshot(page, path, max_height=MAX_HEIGHT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--settle-s", type=float, default=4.0, help="seconds to let the cluster move")
    parser.add_argument("--time-scale", type=float, default=60.0, help="speed of the built-in market")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scalar-shots-") as tmp:
        data_dir = Path(tmp)
        database = f"sqlite:///{data_dir / 'scalar.db'}"
        with real_api(database, data_dir, time_scale=args.time_scale) as (url, _control_plane):
            client = httpx.Client(base_url=url, timeout=30)
            ids = [submit(client, job) for job in DEMO_JOBS]
            wait_until(
                lambda: client.get(f"/jobs/{ids[0]}").json()["state"] == "RUNNING",
                timeout_s=120,
                what="the first job running",
            )
            time.sleep(args.settle_s)
            with sync_playwright() as playwright:
                browser = launch(playwright)
                page = browser.new_page(viewport=VIEWPORT)
                for name, path in PAGES:
                    capture(page, url + path, args.out / f"{name}.png")
                    if name == "jobs":  # then a job that waits, so its explanation says why, with numbers
                        waiting = submit(client, {**DEMO_JOBS[0], "name": "train-llama-70b", "gpu_count": 16})
                        wait_until(
                            lambda: client.get(f"/jobs/{waiting}/explain").json().get("purchase"),  # noqa: B023
                            timeout_s=30,
                            what="a purchase for the waiting job",
                        )
                        capture(page, f"{url}/ui/jobs/{waiting}", args.out / "job.png")
                browser.close()


if __name__ == "__main__":
    main()
