"""A real control plane with injected time, served over HTTP, and a driver that moves time on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from scalar.api.app import create_app
from scalar.runtime import ControlPlane
from tests.api.live_server import serve
from tests.runtime.helpers import Clock, drive, settings_for


@contextmanager
def endpoint_api(db_url: str, tmp_path: Path) -> Iterator[tuple[httpx.Client, ControlPlane, Clock]]:
    clock = Clock()
    plane = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    plane.endpoints.worker_duration_s = 600  # the test market's contracts are short (time_scale 600)
    try:
        plane.run_once()
        drive([plane], clock, 15)  # first prices collected
        with (
            serve(create_app(plane, auth_required=False)) as url,
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            yield client, plane, clock
    finally:
        plane.stop()


def drive_until(
    plane: ControlPlane, clock: Clock, done: Callable[[], bool], max_s: int = 300, step_s: float = 1.0
) -> float:
    """Advance time step by step until ``done()``; returns the virtual seconds it took."""
    waited = 0.0
    while not done():
        assert waited < max_s, f"not done after {max_s} virtual seconds"
        drive([plane], clock, int(step_s), step_s)
        waited += step_s
    return waited


@contextmanager
def driving_in_background(plane: ControlPlane, clock: Clock) -> Iterator[None]:
    """Move time on in a thread (for calls that block, such as runsync)."""
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            drive([plane], clock, 1)
            time.sleep(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


def spec(name: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "imageName": "example/infer:1",
        "gpus": ["ADA_48_PRO", "AMPERE_80"],
        "workersMin": 0,
        "workersMax": 3,
        "scalerType": "QUEUE_DELAY",
        "scalerValue": 2,
        "idleTimeout": 5,
        **more,
    }
