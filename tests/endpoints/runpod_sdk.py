"""A secured control plane (auth on, tenant tokens, injected time driven in the background) for the real
``runpod`` client SDK, pointed at it as a RunPod user would: ``runpod.api_key`` and the endpoint base URL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import runpod

from scalar.api.app import create_app
from scalar.runtime import ControlPlane
from tests.api.live_server import serve
from tests.endpoints.harness import drive_until, spec
from tests.runtime.helpers import Clock, drive, settings_for


@dataclass
class RunPodSide:
    url: str
    cp: ControlPlane
    clock: Clock
    token: str  # a user token of tenant "team-rp": what the SDK sends as its API key

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=60)

    def handler_endpoint(self, name: str, handler: str, **more: Any) -> str:
        body = spec(name, handler=f"tests.endpoints.runpod_handlers:{handler}", workersMin=1, **more)
        del body["imageName"]
        with self.client() as client:
            created = client.post("/endpoints", json=body)
        assert created.status_code == 201, created.text
        return str(created.json()["id"])

    def wait_ready(self, *endpoint_ids: str) -> None:
        """Drive time until each endpoint has a ready worker."""
        with self.client() as client:

            def ready() -> bool:
                return all(
                    client.get(f"/v2/{e}/health").json()["workers"]["ready"] >= 1 for e in endpoint_ids
                )

            drive_until(self.cp, self.clock, ready, max_s=300)


@contextmanager
def runpod_side(db_url: str, tmp_path: Path, monkeypatch: Any, **settings: Any) -> Iterator[RunPodSide]:
    clock = Clock()
    # the tests' handlers are in tests.endpoints: an admin lists them, as a deployment lists its own modules
    settings.setdefault("endpoint_handlers", ("tests.endpoints",))
    cp = ControlPlane(settings_for(db_url, tmp_path, auth_required=True, **settings), clock=clock)
    cp.open()
    cp.endpoints.worker_duration_s = 600  # the test market's contracts are short (time_scale 600)
    try:
        token = cp.create_token("team-rp", "user", "runpod sdk").token
        app = create_app(cp)
        app.state.rate_limiter.rate_per_s = 1e6
        app.state.rate_limiter.burst = 1e6
        cp.run_once()
        drive([cp], clock, 15)  # first prices collected
        with serve(app) as url:
            monkeypatch.setattr(runpod, "api_key", token)
            monkeypatch.setattr(runpod, "endpoint_url_base", f"{url}/v2")
            yield RunPodSide(url, cp, clock, token)
    finally:
        cp.stop()


def wait_real(done: Any, timeout_s: float = 60.0, what: str = "the condition") -> None:
    """Wait in real time (the caller drives virtual time in the background) until ``done()``."""
    import time

    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(0.05)
