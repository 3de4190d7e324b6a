"""A real ``ControlPlane`` (engine, store, built-in market) served over HTTP, for API tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from scalar.api.app import create_app
from scalar.runtime import ControlPlane, load_settings
from tests.api.live_server import serve

# The built-in market 600x faster: boots take about a second; the leader steps 5 times a second.
FAST_MARKET = {"time_scale": 600.0, "tick_s": 0.2, "market_seed": 7}


@contextmanager
def real_api(database_url: str, data_dir: Path, **overrides: Any) -> Iterator[tuple[str, ControlPlane]]:
    """Serve a started control plane on ``database_url``; yields (base URL, control plane)."""
    settings = load_settings(
        None,
        {
            "data_dir": data_dir,
            "database_url": database_url,
            **FAST_MARKET,
            "auth_required": False,
            **overrides,
        },
        {},
    )
    control_plane = ControlPlane(settings)
    control_plane.start()
    try:
        with serve(create_app(control_plane)) as url:
            yield url, control_plane
    finally:
        control_plane.stop()


def wait_for(
    client: httpx.Client, job_id: str, done: Callable[[dict[str, Any]], bool], timeout_s: float = 120.0
) -> tuple[dict[str, Any], list[str]]:
    """Poll ``GET /jobs/{id}`` until ``done(job)``; returns the job and the states seen on the way."""
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while True:
        response = client.get(f"/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        if not seen or seen[-1] != job["state"]:
            seen.append(job["state"])
        if done(job):
            return job, seen
        assert time.monotonic() < deadline, f"job {job_id} still {job['state']} ({job['reason']}); saw {seen}"
        time.sleep(0.2)
