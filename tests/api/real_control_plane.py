"""A real ``ControlPlane`` (engine, store, built-in market) served over HTTP, for API tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from scalar.api.app import create_app
from scalar.api.ports import ControlPlanePort
from scalar.runtime import ControlPlane, load_settings
from scalar.wire.jobs import HealthDetailsOut, JobOut
from scalar.wire.orderbook import OrderbookResponse
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


class SteppingClock:
    """A clock for an unstarted control plane: each reading is one second after the last, so job ids
    (which sort by submission second) come out in submission order."""

    def __init__(self, start: datetime = datetime(2026, 1, 9, 12, tzinfo=UTC)) -> None:
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.now += timedelta(seconds=1)
            return self.now


@contextmanager
def opened_api(database_url: str, data_dir: Path, **overrides: Any) -> Iterator[tuple[str, ControlPlane]]:
    """Serve a real control plane that is opened (store migrated, built-in market up) but not started: no
    leader steps unless the test calls ``control_plane.run_once()``, so accepted jobs stay PENDING."""
    settings = load_settings(
        None,
        {
            "data_dir": data_dir,
            "database_url": database_url,
            **FAST_MARKET,
            "auth_required": False,
            "lease_ttl_s": 3600.0,  # the stepping clock moves a second a reading
            **overrides,
        },
        {},
    )
    control_plane = ControlPlane(settings, clock=SteppingClock())
    control_plane.open()
    try:
        with serve(create_app(control_plane)) as url:
            yield url, control_plane
    finally:
        control_plane.stop()


def stored_jobs(control_plane: ControlPlane) -> list[dict[str, Any]]:
    """Every job document the control plane's store holds, oldest first (what a submission wrote)."""
    store, _ = control_plane.core.opened()
    with store.read() as tx:
        return [dict(row.data) for row in tx.list_projection("jobs", None, limit=10_000)]


class JobsOnly:
    """A real control plane seen through ``ControlPlanePort`` alone (the calls every API needs): for the API
    a plane without the optional calls (prices, cluster, metrics...) builds. Each call is the real one."""

    def __init__(self, control_plane: ControlPlane) -> None:
        self._cp = control_plane

    def submit_job(self, fields: Mapping[str, Any]) -> JobOut:
        return self._cp.submit_job(fields)

    def cancel_job(self, job_id: str) -> JobOut:
        return self._cp.cancel_job(job_id)

    def get_job(self, job_id: str) -> JobOut | None:
        return self._cp.get_job(job_id)

    def list_jobs(
        self,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        newest_first: bool = False,
        after: str | None = None,
    ) -> list[JobOut]:
        return self._cp.list_jobs(state, limit, offset, newest_first=newest_first, after=after)

    def orderbook(self, instance_type: str, node_count: int, gpus_per_node: int = 8) -> OrderbookResponse:
        return self._cp.orderbook(instance_type, node_count, gpus_per_node)

    def health(self) -> HealthDetailsOut:
        return self._cp.health()


_PORT_CHECK: type[ControlPlanePort] = JobsOnly  # mypy: the narrowed plane still offers what create_app needs
