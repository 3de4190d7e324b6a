"""A control plane served on loopback, and real ``scalar agent`` processes with fake GPUs, for agent tests.

The control plane runs without the built-in market (``providers={}``): agent tests need no capacity for
sale, only the hosts their agents register. Its clock is real time plus an offset the test may advance, so
heartbeat leases expire without waiting for them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn

from scalar.api.app import create_app
from scalar.runtime import ControlPlane, load_settings
from tests.api.live_server import serve

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
# The agent and endpoint tests run jobs as the test's own user, without a sandbox, and let jobs import this
# checkout (endpoint workers load tests.endpoints.handlers): the flags' environment variables, set for every
# agent these tests start (directly, or through the bootstrap script or a pod) by the autouse fixture of
# tests/agent/conftest.py and tests/endpoints/conftest.py. tests/security turns isolation on with flags.
SAME_USER_ENV = {
    "SCALAR_AGENT_JOB_USER": "same-user",
    "SCALAR_AGENT_SANDBOX": "none",
    "SCALAR_AGENT_PASS_ENV": "PYTHONPATH",
    "PYTHONPATH": os.pathsep.join(
        dict.fromkeys(
            [str(ROOT / "src"), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(":"))]
        )
    ),
}


@pytest.fixture
def same_user_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SAME_USER_ENV.items():
        monkeypatch.setenv(name, value)


ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")

AGENT_SETTINGS: dict[str, Any] = {
    "tick_s": 0.2,
    "executor_interval_s": 0.05,
    "agent_heartbeat_s": 0.3,
    "agent_suspect_after_s": 3.0,
    "agent_lost_after_s": 6.0,
    "auth_required": False,
}


class Clock:
    """Real time plus ``offset``: tests advance it to expire leases at once."""

    def __init__(self) -> None:
        self.offset = timedelta(0)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.offset += timedelta(seconds=seconds)


@dataclass
class Controller:
    url: str
    plane: ControlPlane
    clock: Clock
    http: httpx.Client

    def token(self, **body: Any) -> str:
        response = self.http.post("/agents/join-tokens", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["token"])

    def submit(self, **fields: Any) -> str:
        body = {"tier": "FAST", "gpu_count": 1, "expected_duration_sec": 600, **fields}
        response = self.http.post("/jobs", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def job(self, job_id: str) -> dict[str, Any]:
        response = self.http.get(f"/jobs/{job_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())

    def logs(self, job_id: str, **params: Any) -> dict[str, Any]:
        response = self.http.get(f"/jobs/{job_id}/logs", params=params)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def ended(self, job_id: str) -> dict[str, Any] | None:
        """The job once it has ended (SUCCEEDED, FAILED or CANCELLED), else ``None``: for ``wait_until``."""
        job = self.job(job_id)
        return job if job["state"] in ENDED else None

    def output(self, job_id: str, containing: str = "") -> str | None:
        """The job's output once there is some (holding ``containing``), else ``None``: for ``wait_until``."""
        data = str(self.logs(job_id)["data"])
        return data if data and containing in data else None

    def agents(self) -> list[dict[str, Any]]:
        return list(self.http.get("/agents").json()["agents"])

    def story_codes(self, key: str) -> list[str]:
        return [d.code for d in self.plane.story(key, limit=None)]


@contextmanager
def controller(
    database_url: str,
    data_dir: Path,
    clock: Clock | None = None,
    port: int = 0,
    bind: str = "127.0.0.1",
    **overrides: Any,
) -> Iterator[Controller]:
    """A started control plane served on ``bind`` (loopback by default; on ``port``, 0: any free one)."""
    clock = clock or Clock()
    settings = load_settings(
        None, {"data_dir": data_dir, "database_url": database_url, **AGENT_SETTINGS, **overrides}, {}
    )
    plane = ControlPlane(settings, clock=clock, providers={}, live_providers=[])
    plane.start()
    try:
        with (
            serve_on(create_app(plane), port, bind) as url,
            httpx.Client(base_url=url, timeout=10) as http,
        ):
            yield Controller(url, plane, clock, http)
    finally:
        plane.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_on(app: Any, port: int, bind: str = "127.0.0.1") -> Iterator[str]:
    """``tests.api.live_server.serve`` on a chosen port, so a restarted controller keeps its URL."""
    if port == 0:
        with serve(app, host=bind) as url:
            yield url
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bind, port))
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the test server did not start"
        time.sleep(0.02)
    try:
        yield f"http://{bind}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@dataclass
class AgentProcess:
    state_dir: Path
    args: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> AgentProcess:
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scalar.agent", *self.args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SCALAR_AGENT_NO_CGROUPS": "", **self.env},
        )
        log.close()
        return self

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(10)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


def agent(
    url: str, token: str | None, state_dir: Path, fake_gpus: str = "4xH100-80GB", *extra: str
) -> AgentProcess:
    state_dir.mkdir(parents=True, exist_ok=True)
    args = ["--controller", url, "--state-dir", str(state_dir), "--fake-gpus", fake_gpus, *extra]
    if token is not None:
        args += ["--join-token", token]
    return AgentProcess(state_dir, args, state_dir.parent / f"{state_dir.name}.log")


def wait_until(check: Callable[[], T | None], timeout_s: float = 30.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def kill_tree_of(state_dir: Path) -> None:
    """Kill every shim and job an agent left behind (a test's cleanup)."""
    for pid_file in state_dir.glob("assignments/*/*.pid"):
        try:
            pid = int(pid_file.read_text())
            os.killpg(pid, signal.SIGKILL) if pid_file.name == "child.pid" else os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass
