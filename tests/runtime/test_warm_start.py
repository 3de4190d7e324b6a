"""Warm start: ``/healthz`` says ``starting`` (503, ``first-step``) until the controller's first step has
run, then ``ok``; a process that follows a live leader is ready at once; submissions do not wait for a
step in progress (they judge on the offers of the last one)."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from scalar.api.app import create_app
from scalar.runtime import ControlPlane
from tests.api.live_server import serve
from tests.runtime.helpers import job, settings_for


def _wait_for(check: Any, what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_healthz_says_starting_until_the_first_step_has_run(db_url: str, tmp_path: Path) -> None:
    plane = ControlPlane(settings_for(db_url, tmp_path, holder="first"))
    plane.open()
    leader = plane.core.leader
    assert leader is not None
    gate, entered = threading.Event(), threading.Event()
    tick = leader.tick

    def held_tick(now: datetime) -> Any:  # the first step waits until the test lets it run
        entered.set()
        assert gate.wait(60)
        return tick(now)

    leader.tick = held_tick  # type: ignore[method-assign]
    follower = ControlPlane(settings_for(db_url, tmp_path / "f", holder="second"))
    try:
        with serve(create_app(plane)) as url, httpx.Client(base_url=url, timeout=30) as http:
            assert http.get("/healthz").json()["status"] == "ok"  # opened, no controller loop here yet
            plane.start()
            assert entered.wait(60)
            starting = http.get("/healthz")
            assert starting.status_code == 503 and "Retry-After" in starting.headers
            assert starting.json()["status"] == "starting"
            assert starting.json()["problem"] == "first-step"

            # a submission while the step is held is accepted without waiting for the step
            accepted = http.post("/jobs", json=job(1, 60, name="early"))
            assert accepted.status_code == 201, accepted.text

            gate.set()
            ok = _wait_for(lambda: (r := http.get("/healthz")).status_code == 200 and r, "ok")
            assert ok.json()["status"] == "ok"
            assert plane.health().last_step_at is not None

            # a second process whose leader is live is ready before any step of its own
            follower.start()
            health = follower.health()
            assert health.status == "ok" and health.role == "follower", health
    finally:
        gate.set()
        follower.stop()
        plane.stop()
