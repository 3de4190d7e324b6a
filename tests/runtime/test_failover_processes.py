"""Two real ``scalar controller`` processes on one PostgreSQL database: one leads; ``kill -9`` it and the other
takes over, and the work finishes with the invariants intact. Real time, so the bounds are generous (the
injected-time tests in test_failover.py pin the exact behaviour)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scalar.runtime import ControlPlane, load_settings
from scalar.store import Store
from tests.conftest import REPO
from tests.runtime.helpers import audit

pytestmark = pytest.mark.slow  # two real controller processes, fail-over

CONFIG = """
[market]
seed = 5
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
name = "failover"
providers = ["sfcompute", "prime"]
"""


def wait_for(what: str, check: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def test_kill_the_leader_process_and_the_standby_takes_over(pg_url: str, tmp_path: Path) -> None:
    config = tmp_path / "scalar.toml"
    config.write_text(CONFIG)
    settings = load_settings(config, {"data_dir": tmp_path, "database_url": pg_url}, {})
    env = {**os.environ, "SCALAR_DATABASE_URL": pg_url}
    command = [sys.executable, "-m", "scalar", "controller", "--config", str(config)]
    logs = [(tmp_path / f"c{i}.log").open("wb") for i in range(2)]
    procs = [
        subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT) for log in logs
    ]
    client = ControlPlane(settings)
    store = Store.open(pg_url)

    def holder_pid() -> int | None:
        lease = store.read_lease(settings.lease_name)
        if lease is None or lease.holder is None:
            return None
        return int(lease.holder.split(":")[1])

    try:
        wait_for("a leader", lambda: holder_pid() in {p.pid for p in procs}, 60)
        first = holder_pid()
        ids = [
            client.submit_job({"tier": "FAST", "gpu_count": g, "expected_duration_sec": 3}).id
            for g in (1, 2, 8, 16)
        ]
        wait_for("a job to run", lambda: any(j.state != "PENDING" for j in client.list_jobs()), 60)
        leader = next(p for p in procs if p.pid == first)
        standby = next(p for p in procs if p.pid != first)
        leader.send_signal(signal.SIGKILL)
        leader.wait(30)
        wait_for("the standby to take over", lambda: holder_pid() == standby.pid, 60)
        ids += [client.submit_job({"tier": "FAST", "gpu_count": 4, "expected_duration_sec": 2}).id]
        wait_for(
            "every job to finish",
            lambda: {j.id for j in client.list_jobs() if j.state == "SUCCEEDED"} >= set(ids),
            90,
        )
        standby.send_signal(signal.SIGTERM)
        assert standby.wait(30) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        for log in logs:
            log.close()
        client.stop()
        store.close()
    result = audit(pg_url, client.settings.controller)  # the config the controller steps with
    assert result.states() == {"SUCCEEDED": len(ids)}
    with Store.open(pg_url) as s, s.read() as tx:
        epochs = {row[0] for row in tx.conn.exec_driver_sql("SELECT DISTINCT epoch FROM batches")}
    assert len(epochs) >= 2  # two reigns wrote, one after the other
