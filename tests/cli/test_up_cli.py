"""``scalar up`` as a real process: it prints where to look, serves, stops cleanly and resumes."""

from __future__ import annotations

import itertools
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scalar.wire.jobs import JobOut
from tests.conftest import REPO

URL = re.compile(r"API\s+(http://127\.0\.0\.1:\d+)")
JOB = {"tier": "FAST", "gpu_count": 1, "vram_per_gpu_gb": 24, "expected_duration_sec": 3600, "name": "kept"}


class Up:
    """A running ``scalar up``: its stdout read line by line in a thread, its URL once printed."""

    def __init__(self, *args: str | Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "SCALAR_DATABASE_URL"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scalar", "up", "--no-auth", *map(str, args)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.stderr = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def stdout(self) -> str:
        return "\n".join(self.lines)

    def url(self, timeout_s: float = 90.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = URL.search(self.stdout)
            if found:
                return found.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.kill()
        raise AssertionError(f"no URL printed; stdout:\n{self.stdout}\nstderr:\n{self.stderr}")

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 20.0) -> tuple[int, float]:
        """Send ``sig``; return the exit code and how long the process took to exit."""
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"scalar up did not stop within {timeout_s} s") from None
        self._reader.join(timeout=5)
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.stderr = self.proc.stderr.read()


@pytest.fixture
def started() -> Iterator[list[Up]]:
    """Every ``Up`` a test appends is killed at the end, whatever happened."""
    ups: list[Up] = []
    yield ups
    for up in ups:
        up.kill()


def start(started: list[Up], *args: str | Path) -> Up:
    up = Up(*args)
    started.append(up)
    return up


def jobs_of(url: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}/jobs", timeout=30)
    assert response.status_code == 200, response.text
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    return jobs


def test_up_prints_where_to_look_serves_stops_on_sigint_and_resumes_the_same_jobs(
    started: list[Up], tmp_path: Path
) -> None:
    data_dir = tmp_path / "state"
    first = start(started, "--port", "0", "--data-dir", data_dir, "--time-scale", "600")
    url = first.url()

    assert f"Data dir    {data_dir.resolve()}" in first.stdout
    assert f"sqlite:///{data_dir.resolve()}/scalar.db" in first.stdout
    assert "scalar submit" in first.stdout and "curl -X POST" in first.stdout
    health = httpx.get(f"{url}/healthz", timeout=30)
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    submitted = httpx.post(f"{url}/jobs", json=JOB, timeout=30)
    assert submitted.status_code == 201, submitted.text
    job_id = submitted.json()["id"]

    code, took = first.stop(signal.SIGINT)

    assert code == 0, first.stderr
    assert took < 15, took
    assert "stopped; the state is kept in" in first.stdout
    assert "Traceback" not in first.stderr

    second = start(started, "--port", "0", "--data-dir", data_dir, "--time-scale", "600")
    url = second.url()
    assert [j["id"] for j in jobs_of(url)] == [job_id]
    code, _ = second.stop(signal.SIGTERM)
    assert code == 0, second.stderr


def test_without_demo_nothing_is_submitted_and_with_demo_jobs_arrive(
    started: list[Up], tmp_path: Path
) -> None:
    quiet = start(started, "--port", "0", "--data-dir", tmp_path / "quiet", "--time-scale", "600")
    demo = start(
        started,
        "--port",
        "0",
        "--data-dir",
        tmp_path / "demo",
        "--time-scale",
        "600",
        "--demo",
        "--seed",
        "3",
    )
    quiet_url, demo_url = quiet.url(), demo.url()
    assert "Demo        off" in quiet.stdout
    assert "Demo        on" in demo.stdout

    deadline = time.monotonic() + 90
    while len(jobs_of(demo_url)) < 2:
        assert time.monotonic() < deadline, f"no demo jobs; stdout:\n{demo.stdout}"
        time.sleep(1)

    demo_jobs = jobs_of(demo_url)
    assert all(j["name"].startswith("demo-") for j in demo_jobs)
    assert {j["tier"] for j in demo_jobs} <= {"FAST", "FLEX"}
    assert all(1 <= j["gpu_count"] <= 16 for j in demo_jobs)
    assert jobs_of(quiet_url) == []
    assert "submitted" in demo.stdout  # the job reporter's lines
    for up in (quiet, demo):
        code, _ = up.stop()
        assert code == 0, up.stderr


def test_a_port_in_use_is_refused_with_a_hint_and_exit_1(run_cli: Any, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = run_cli("up", "--port", str(port), "--data-dir", tmp_path)

    assert result.returncode == 1
    assert f"error: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "pick another --port" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--config", "no-such.toml"), "--config: no-such.toml: file not found"),
        (("--time-scale", "0"), "--time-scale: must be a number > 0"),
        (("--port", "70000"), "--port: must be from 0 to 65535"),
        (("--api-workers", "-1"), "--api-workers: must be from 0 to 64"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    run_cli: Any, tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    result = run_cli("up", "--data-dir", tmp_path, *args)

    assert result.returncode == 2
    assert words in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_setting_in_the_config_file_is_named_and_exits_2(run_cli: Any, tmp_path: Path) -> None:
    config = tmp_path / "scalar.toml"
    config.write_text("[loops]\ntick_s = -1\n")

    result = run_cli("up", "--data-dir", tmp_path, "--config", config)

    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ")
    assert "tick_s" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_demo_mix_is_seeded_short_interactive_fast_and_long_flex_training_in_bursts() -> None:
    from scalar.cli.demo_workload import demo_bursts, demo_job
    from scalar.wire.jobs import JobSubmission

    rng = random.Random(11)
    jobs = [demo_job(rng, 60.0) for _ in range(400)]
    again = random.Random(11)
    assert jobs == [demo_job(again, 60.0) for _ in range(400)]

    for job in jobs:
        JobSubmission.model_validate(job)
    sizes = [j["gpu_count"] for j in jobs]
    assert set(sizes) == {1, 2, 4, 8, 16}
    assert 0 < sizes.count(16) < len(jobs) * 0.1
    fast = [j for j in jobs if j["tier"] == "FAST"]
    flex = [j for j in jobs if j["tier"] == "FLEX"]
    assert len(jobs) * 0.3 < len(fast) < len(jobs) * 0.7
    # interactive: 1-2 GPUs, at most 45 market minutes (45 s at 60x), never restartable
    assert all(j["gpu_count"] <= 2 and j["expected_duration_sec"] <= 45 for j in fast)
    assert not any(j.get("restartable") for j in fast)
    # training: at least a market hour, most of it restartable, never all of it
    assert all(j["expected_duration_sec"] >= 60 for j in flex)
    restartable = sum(1 for j in flex if j.get("restartable"))
    assert len(flex) * 0.4 < restartable < len(flex)
    # bursts: a long gap opens each burst, the jobs inside it come within a second of each other
    waits = [w for w, _ in itertools.islice(demo_bursts(random.Random(5), 60.0), 200)]
    assert sum(1 for w in waits if w >= 6) >= 20 and sum(1 for w in waits if w <= 1) >= 60


def test_the_demo_tells_the_market_the_work_of_each_job_it_submits() -> None:
    """The built-in market runs a demo job's work at the speed of the GPUs it gets (FLEX: its expected
    duration is A100 time); the demo declares each job's work as it submits it."""
    from scalar.cli.demo_workload import DemoWorkload

    class Stop:  # lets ``n`` waits pass at once, then stops the workload
        def __init__(self, n: int) -> None:
            self.n = n

        def wait(self, _s: float) -> bool:
            self.n -= 1
            return self.n < 0

    class Market:
        def __init__(self) -> None:
            self.declared: list[tuple[str, float, str]] = []

        def declare_work(self, job_id: str, reference_s: float, tier: str, _now: object) -> None:
            self.declared.append((job_id, reference_s, tier))

    class Plane:
        def __init__(self) -> None:
            self.market = Market()
            self.jobs: list[dict[str, Any]] = []

        def clock(self) -> object:
            return None

        def list_jobs(self, **_kw: object) -> list[JobOut]:
            return []

        def submit_job(self, fields: dict[str, Any]) -> JobOut:
            self.jobs.append({**fields, "id": f"job-{len(self.jobs)}"})
            return JobOut.model_validate({**self.jobs[-1], "state": "PENDING"})

    plane = Plane()
    DemoWorkload(plane, seed=3, time_scale=60.0, stop=Stop(12), say=lambda _t: None).run()  # type: ignore[arg-type]
    assert len(plane.jobs) == 12
    assert plane.market.declared == [(j["id"], j["expected_duration_sec"], j["tier"]) for j in plane.jobs]
    plane.market = None  # type: ignore[assignment]  # a market elsewhere: nothing to declare
    DemoWorkload(plane, seed=3, time_scale=60.0, stop=Stop(2), say=lambda _t: None).run()  # type: ignore[arg-type]
    assert len(plane.jobs) == 14


def _children(pid: int) -> set[int]:
    found = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if f"\nPPid:\t{pid}\n" in text:
            found.add(int(status.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_api_workers_serve_beside_the_controller_and_never_outlive_it(
    started: list[Up], tmp_path: Path
) -> None:
    up = start(
        started, "--port", "0", "--data-dir", tmp_path / "state", "--time-scale", "600", "--api-workers", "2"
    )
    url = up.url()
    assert "API in 2 worker processes" in up.stdout
    workers = _children(up.proc.pid)
    assert len(workers) == 2, workers
    submitted = httpx.post(f"{url}/jobs", json=JOB, timeout=30)
    assert submitted.status_code == 201, submitted.text
    assert [j["id"] for j in jobs_of(url)] == [submitted.json()["id"]]
    up.proc.kill()  # kill -9: no chance to stop them; they notice their parent is gone
    up.proc.wait(10)
    deadline = time.monotonic() + 20
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(w) for w in workers)


def test_scalar_api_refuses_bad_flags_naming_them(run_cli: Any, tmp_path: Path) -> None:
    result = run_cli("api", "--data-dir", tmp_path, "--workers", "0")
    assert result.returncode == 2
    assert "--workers: must be from 1 to 64" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_fake_gpus_variable_is_refused_before_the_demo_starts(run_cli: Any, tmp_path: Path) -> None:
    result = run_cli("up", "--demo", "--data-dir", tmp_path, env={"SCALAR_FAKE_GPUS": "lots"})

    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "$SCALAR_FAKE_GPUS: fake GPUs 'lots': expected COUNTxMODEL-MEMORYGB" in result.stderr
    assert "Traceback" not in result.stderr
