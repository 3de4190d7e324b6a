"""The split shape: a ``scalar api`` replica process and two ``scalar controller`` processes on one database
(PostgreSQL, and SQLite on one host). Jobs submitted over HTTP to the replica are placed by whichever
controller leads; ``kill -9`` the leader and the other takes over through the lease while the replica keeps
serving; the invariants hold at the end. Real time, so the bounds are generous."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scalar.runtime import load_settings
from scalar.store import Store
from tests.conftest import REPO
from tests.runtime.helpers import audit, stepping_config

CONFIG = """
[market]
seed = 7
time_scale = 600
[providers]
enabled = ["sfcompute", "prime"]
[loops]
tick_s = 0.25
price_interval_s = 5
executor_interval_s = 0.05
[lease]
ttl_s = 3
renew_s = 0.5
[[controller.scale_groups]]
name = "split"
providers = ["sfcompute", "prime"]
"""


def wait_for(what: str, check: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def call(url: str, method: str = "GET", body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_replica_accepts_controllers_place_and_fail_over(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = request.getfixturevalue("pg_url" if backend == "postgresql" else "sqlite_url")
    config = tmp_path / "scalar.toml"
    config.write_text(CONFIG)
    settings = load_settings(config, {"data_dir": tmp_path, "database_url": url}, {})
    env = {**os.environ, "SCALAR_DATABASE_URL": url, "PYTHONPATH": str(REPO / "src")}
    base = [sys.executable, "-m", "scalar"]
    logs = [(tmp_path / f"p{i}.log").open("wb") for i in range(3)]
    api_log = tmp_path / "p2.log"
    controllers = [
        subprocess.Popen(
            [*base, "controller", "--config", str(config), "--data-dir", str(tmp_path)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for log in logs[:2]
    ]
    api = subprocess.Popen(
        [*base, "api", "--config", str(config), "--data-dir", str(tmp_path), "--port", "0", "--no-auth"],
        cwd=REPO,
        env=env,
        stdout=logs[2],
        stderr=subprocess.STDOUT,
    )
    procs = [*controllers, api]
    store = Store.open(url)

    def holder_pid() -> int | None:
        lease = store.read_lease(settings.lease_name)
        if lease is None or lease.holder is None or lease.expires_at is None:
            return None
        return int(lease.holder.split(":")[1])

    def jobs() -> list[dict[str, Any]]:
        return list(call(f"{server}/jobs?limit=1000")["jobs"])

    try:
        wait_for("the replica's address", lambda: "scalar api on" in api_log.read_text(), 60)
        found = re.search(r"scalar api on (http://\S+)", api_log.read_text())
        assert found is not None
        server = found.group(1)
        wait_for("a leader", lambda: holder_pid() in {p.pid for p in controllers}, 60)
        first = holder_pid()
        ids = [
            call(f"{server}/jobs", "POST", {"tier": "FAST", "gpu_count": g, "expected_duration_sec": 3})["id"]
            for g in (1, 2, 8)
        ]
        wait_for("a job placed by the controller", lambda: any(j["state"] != "PENDING" for j in jobs()), 60)
        leader = next(p for p in controllers if p.pid == first)
        standby = next(p for p in controllers if p.pid != first)
        leader.send_signal(signal.SIGKILL)
        leader.wait(30)
        assert call(f"{server}/healthz")["status"] in {"ok", "degraded"}  # the replica still answers
        ids.append(
            call(f"{server}/jobs", "POST", {"tier": "FAST", "gpu_count": 4, "expected_duration_sec": 2})["id"]
        )
        wait_for("the standby to take over", lambda: holder_pid() == standby.pid, 60)
        wait_for(
            "every job to finish",
            lambda: {j["id"] for j in jobs() if j["state"] == "SUCCEEDED"} >= set(ids),
            120,
        )
        for proc in (standby, api):
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        for log in logs:
            log.close()
        store.close()
    result = audit(url, stepping_config(settings))
    assert result.states() == {"SUCCEEDED": len(ids)}
    with Store.open(url) as s, s.read() as tx:
        epochs = {row[0] for row in tx.conn.exec_driver_sql("SELECT DISTINCT epoch FROM batches")}
    assert len(epochs) >= 2  # two reigns wrote, one after the other
