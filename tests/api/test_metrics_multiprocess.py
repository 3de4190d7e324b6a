"""``/metrics`` across processes: ``scalar up --api-workers 2`` runs the controller in its own process and
the API in two workers (prometheus_client's multiprocess mode over a fresh directory per start). Whichever
worker answers shows the controller's step histogram and the sum of every process's counters, and the
exposition passes ``promtool check metrics``. In-process: the mode's switch is undone when it ends."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from scalar.runtime import ControlPlane, load_settings
from scalar.runtime.step_metrics import MULTIPROC_ENV, multiprocess_dir, multiprocess_metrics
from tests.api.test_metrics_api import parse, promtool_check
from tests.conftest import REPO

URL = re.compile(r"API\s+(http://127\.0\.0\.1:\d+)")


def test_the_mode_is_undone_and_its_directory_removed() -> None:
    before = os.environ.get(MULTIPROC_ENV)
    with multiprocess_metrics() as path:
        assert multiprocess_dir() == path and os.path.isdir(path)
    assert os.environ.get(MULTIPROC_ENV) == before
    assert not os.path.exists(path)


def test_any_api_worker_shows_the_controllers_steps_and_the_sum_of_counters(tmp_path: Path) -> None:
    config = tmp_path / "scalar.toml"
    config.write_text("[server]\nrate_per_s = 0.01\nrate_burst = 10\n[loops]\ntick_s = 0.2\n")
    state = tmp_path / "state"
    settings = load_settings(config, {"data_dir": state}, {})
    plane = ControlPlane(settings)
    plane.open()
    spender = plane.create_token("default", "user", "spender").token
    reader = plane.create_token("default", "user", "metrics").token
    plane.stop()
    env = {k: v for k, v in os.environ.items() if k not in ("SCALAR_DATABASE_URL", MULTIPROC_ENV)}
    env["PYTHONPATH"] = str(REPO / "src")
    log = tmp_path / "up.log"
    command = [sys.executable, "-m", "scalar", "up", "--config", str(config), "--data-dir", str(state)]
    proc = subprocess.Popen(
        [*command, "--port", "0", "--time-scale", "600", "--api-workers", "2"],
        cwd=REPO,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while (found := URL.search(log.read_text())) is None:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        url = found.group(1)
        # a new connection per request: the kernel hands them to either worker
        codes = [
            httpx.get(
                f"{url}/jobs?limit=1", headers={"authorization": f"Bearer {spender}"}, timeout=30
            ).status_code
            for _ in range(30)
        ]
        refused = codes.count(429)
        assert codes.count(200) + refused == 30 and 18 <= refused <= 20, codes
        scrapes = []
        for _ in range(6):
            reply = httpx.get(f"{url}/metrics", headers={"authorization": f"Bearer {reader}"}, timeout=30)
            assert reply.status_code == 200, reply.text
            scrapes.append(reply.text)
            time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(30)
    counts = []
    for text in scrapes:
        samples = parse(text)
        # the workers never step: the histogram is the controller process's, read from its file
        counts.append(samples[("scalar_step_duration_seconds_count", None)])
        assert samples[("scalar_step_duration_seconds_bucket", "+Inf")] == counts[-1]
        assert samples[("scalar_rate_limited_total", "token")] == refused  # both workers' refusals, summed
        assert samples[("scalar_steps_total", None)] >= 1  # steps in the log, on a worker too
    assert counts[0] > 0 and counts[-1] > counts[0]  # the controller keeps stepping
    promtool_check(scrapes[-1])


@pytest.fixture(autouse=True)
def _no_inherited_mode() -> None:
    assert multiprocess_dir() is None  # these tests start from a process outside the mode
