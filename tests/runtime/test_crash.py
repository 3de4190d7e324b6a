"""Crash safety: ``kill -9`` a real ``scalar controller`` process at random points of a busy run, many times.

Jobs keep arriving through the inbox (submitted by this test process, as the API would) while the
controller buys capacity from the built-in market (sped up 600x), places jobs and executes actions. After
every kill the database alone must show: no job lost or duplicated, no GPU double-booked (the log replayed
into a fresh controller keeps the engine's invariants), no purchase made twice (one market order per
idempotency key, each one outbox action), every purchase accounted for. After the last round a final run
drains the work and every job must have succeeded.

``SCALAR_CRASH_ROUNDS`` sets the number of kills (default 8; ``make bench`` and local runs may use more).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

from scalar.runtime import ControlPlane, load_settings
from scalar.store import Action as StoredAction
from scalar.store import Store
from tests.conftest import REPO
from tests.runtime.helpers import audit

pytestmark = pytest.mark.slow  # kill -9 of real controller processes, many times

ROUNDS = int(os.environ.get("SCALAR_CRASH_ROUNDS", "8"))
CONFIG = """
[market]
seed = 11
time_scale = 600
[providers]
enabled = ["sfcompute", "prime"]
[loops]
tick_s = 0.2
price_interval_s = 5
executor_interval_s = 0.05
action_stale_after_s = 5
retry_backoff_s = 0.2
[lease]
ttl_s = 2
renew_s = 0.4
[controller]
idle_release_s = 20
flex_batch_wait_s = 5
[[controller.scale_groups]]
name = "crash"
providers = ["sfcompute", "prime"]
max_slices = 6
"""
SHAPES = (1, 1, 2, 2, 4, 8, 16)
# `scalar controller`, with every provider call followed by a pause before its result is recorded: the
# window between "bought" and "recorded" lasts long enough for the kills to land in it.
SLOW_CONTROLLER = """
import sys, time
import scalar.runtime.leader as leader
from scalar.cli.main import app
real = leader.execute
def slow(payload, providers, now):
    outcome = real(payload, providers, now)
    time.sleep(0.1)
    return outcome
leader.execute = slow
app(args=sys.argv[1:], prog_name="scalar")
"""


def spawn(config: Path, db_url: str, data_dir: Path, log: IO[bytes]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SCALAR_DATABASE_URL": db_url}
    command = [
        sys.executable,
        "-c",
        SLOW_CONTROLLER,
        "controller",
        "--config",
        str(config),
        "--data-dir",
        str(data_dir),
    ]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def test_kill_9_at_random_points_loses_nothing_and_buys_nothing_twice(db_url: str, tmp_path: Path) -> None:
    config = tmp_path / "scalar.toml"
    config.write_text(CONFIG)
    settings = load_settings(config, {"data_dir": tmp_path, "database_url": db_url}, {})
    client = ControlPlane(settings)  # opened, never started: it only submits, as the API would
    rng = random.Random(ROUNDS)
    log_path = tmp_path / "controller.log"
    submitted: list[str] = []
    with log_path.open("ab") as log:
        try:
            for _ in range(ROUNDS):
                proc = spawn(config, db_url, tmp_path, log)
                deadline = time.monotonic() + rng.uniform(1.5, 4.0)
                while time.monotonic() < deadline:
                    fields = {
                        "tier": "FAST",
                        "gpu_count": rng.choice(SHAPES),
                        "expected_duration_sec": rng.uniform(1, 4),
                    }
                    submitted.append(client.submit_job(fields).id)
                    time.sleep(rng.uniform(0.05, 0.25))
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
                # replayed with the config the controller steps with (the market's clock included)
                audit(db_url, client.settings.controller, settled=False)

            drain_started = time.monotonic()
            proc = spawn(config, db_url, tmp_path, log)
            try:
                deadline = time.monotonic() + 150
                waiting = set(submitted)
                while waiting and time.monotonic() < deadline:
                    time.sleep(0.5)
                    done = {
                        j.id for j in client.list_jobs(limit=100_000) if j.state in ("SUCCEEDED", "FAILED")
                    }
                    waiting -= done
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
        finally:
            client.stop()
    tail = log_path.read_text(errors="replace")[-3000:]
    assert not waiting, f"{len(waiting)} jobs never finished; controller log:\n{tail}"
    assert proc.returncode == 0, tail
    result = audit(db_url, client.settings.controller)
    assert sorted(result.submitted) == sorted(submitted) and len(submitted) >= ROUNDS * 3
    assert result.states() == {"SUCCEEDED": len(submitted)}, tail
    assert "Traceback" not in tail, tail
    retried = sum(1 for a in result_actions(db_url) if a.attempts > 1)
    print(
        f"drain {time.monotonic() - drain_started:.1f} s; {len(submitted)} jobs, {len(result.buy_actions)} purchases, {retried} actions re-executed after a kill"
    )


def result_actions(db_url: str) -> list[StoredAction]:
    with Store.open(db_url) as store, store.read() as tx:
        return tx.list_actions(limit=1_000_000)
