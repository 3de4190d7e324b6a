"""``GET /metrics``: Prometheus text format over a real control plane; gauges go back to 0."""

from __future__ import annotations

import re
import subprocess
from decimal import Decimal
from pathlib import Path

import httpx
from fastapi import FastAPI

from scalar.api.app import create_app
from scalar.api.routes_metrics import DEPRECATED, metrics_router, render_metrics
from scalar.engine import JobState
from scalar.runtime import ControlPlane
from scalar.runtime.step_metrics import StepLatency
from scalar.runtime.views_market import MetricsSnapshot
from tests.api.live_server import serve
from tests.runtime.helpers import Clock, drive, job, settings_for

PROMTOOL = "/usr/bin/promtool"  # Debian's prometheus package (make sysdeps)
SAMPLE = re.compile(r'^([a-z_]+)(\{([a-z_]+)="((?:[^"\\]|\\.)*)"\})? (\S+)$')


def parse(text: str) -> dict[tuple[str, str | None], float]:
    """Each sample line as ``(name, label value) -> value``; fails on a line that is not valid text format."""
    samples: dict[tuple[str, str | None], float] = {}
    typed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("# HELP "):
            continue
        m = SAMPLE.match(line)
        assert m is not None, f"not a sample line: {line!r}"
        name, _, _, label, value = m.groups()
        assert re.sub(r"_(bucket|sum|count)$", "", name) in typed, f"{name} has no # TYPE"
        samples[(name, label)] = float(value)
    return samples


def test_metrics_count_jobs_gpus_and_spend_and_go_back_to_zero(db_url: str, tmp_path: Path) -> None:
    clock = Clock()
    plane = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    plane.run_once()
    try:
        with serve(create_app(plane)) as url, httpx.Client(base_url=url, timeout=30) as http:
            first = http.get("/metrics")
            assert first.status_code == 200
            assert first.headers["content-type"].startswith("text/plain; version=0.0.4")
            before = parse(first.text)
            for state in JobState:
                assert before[("scalar_jobs", state.value)] == 0
            assert before[("scalar_gpus_allocated", None)] == 0

            ids = [plane.submit_job(job(2, 40, vram_per_gpu_gb=40)).id for _ in range(2)]
            drive([plane], clock, 20)
            busy = parse(http.get("/metrics").text)
            assert busy[("scalar_jobs", "RUNNING")] == 2
            assert busy[("scalar_gpus_allocated", None)] == 4
            assert (
                busy[("scalar_gpus", None)]
                == busy[("scalar_gpus_allocated", None)] + busy[("scalar_gpus_idle", None)]
            )
            assert busy[("scalar_nodes", "ready")] >= 1 and busy[("scalar_leader", None)] == 1
            assert busy[("scalar_spend_usd_total", None)] > 0
            promtool_check(http.get("/metrics").text)
            assert busy[("scalar_orders", "filled")] >= 1
            steps = busy[("scalar_step_duration_seconds_count", None)]
            assert steps >= 20 and busy[("scalar_step_duration_seconds_bucket", "+Inf")] == steps
            assert busy[("scalar_step_duration_seconds_sum", None)] > 0

            drive([plane], clock, 60)
            after = parse(http.get("/metrics").text)
            assert all(plane.get_job(i).state == "SUCCEEDED" for i in ids)  # type: ignore[union-attr]
            assert after[("scalar_jobs", "RUNNING")] == 0  # still emitted, back at 0
            assert after[("scalar_jobs", "SUCCEEDED")] == 2
            assert after[("scalar_gpus_allocated", None)] == 0
            assert after[("scalar_spend_usd_total", None)] > busy[("scalar_spend_usd_total", None)]
    finally:
        plane.stop()


def test_the_step_histogram_is_cumulative() -> None:
    latency = StepLatency((0.01, 0.1))
    for seconds in (0.005, 0.05, 0.05, 3.0):
        latency.observe(seconds)
    snap = latency.snapshot()
    assert (snap.cumulative, snap.count, snap.max_s) == ((1, 3), 4, 3.0)
    text = render_metrics(
        MetricsSnapshot(
            jobs_by_state={"PENDING": 0},
            nodes_by_state={"ready": 0},
            orders_by_status={},
            actions_by_status={},
            gpus_total=0,
            gpus_allocated=0,
            gpus_idle=0,
            spend_by_provider={'we"ird\\': Decimal(1)},
            open_price_per_hour=Decimal(0),
            committed=Decimal(0),
            inbox_pending=0,
            is_leader=False,
            steps=0,
            step_latency=snap,
        )
    )
    samples = parse(text)
    assert samples[("scalar_step_duration_seconds_bucket", "0.1")] == 3
    assert samples[("scalar_step_duration_seconds_bucket", "+Inf")] == 4
    assert 'provider="we\\"ird\\\\"' in text


def promtool_check(text: str) -> None:
    """``promtool check metrics``: the exposition parses and follows Prometheus' naming conventions."""
    assert text.strip()
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def snapshot(spend: dict[str, Decimal], steps: int) -> MetricsSnapshot:
    latency = StepLatency()
    for i in range(steps):
        latency.observe(0.002 * i)
    return MetricsSnapshot(
        jobs_by_state={s.value: 0 for s in JobState},
        nodes_by_state={"ready": 1},
        orders_by_status={"filled": 1},
        actions_by_status={"done": 3},
        gpus_total=8,
        gpus_allocated=8,
        gpus_idle=0,
        spend_by_provider=spend,
        open_price_per_hour=Decimal("16.5"),
        committed=Decimal(400),
        inbox_pending=0,
        is_leader=True,
        steps=steps,
        step_latency=latency.snapshot(),
    )


def test_promtool_accepts_the_exposition_and_rejects_the_old_gauge_with_a_total_suffix() -> None:
    text = render_metrics(snapshot({"aws": Decimal("1.25"), "sfcompute": Decimal(2)}, 5))
    promtool_check(text)
    samples = parse(text)
    assert "# TYPE scalar_spend_accrued_usd_total counter" in text
    assert "# TYPE scalar_steps_total counter" in text
    assert samples[("scalar_spend_accrued_usd_total", "aws")] == 1.25
    assert samples[("scalar_steps_total", None)] == samples[("scalar_steps", None)] == 5
    # the deprecated names of the previous release are still emitted, with the same values
    for old in DEPRECATED:
        assert any(name == old for name, _ in samples), old
    assert samples[("scalar_spend_usd", "sfcompute")] == 2
    assert samples[("scalar_spend_usd_total", None)] == 3.25
    # the check can fail: the previous release typed scalar_spend_usd_total a gauge
    bad = text.replace("# TYPE scalar_spend_usd_total counter", "# TYPE scalar_spend_usd_total gauge")
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=bad, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0 and "_total" in done.stdout + done.stderr


class FixedPort:
    def __init__(self, snap: MetricsSnapshot) -> None:
        self.snap = snap

    def metrics_snapshot(self) -> MetricsSnapshot:
        return self.snap


def test_two_apps_in_one_process_each_expose_their_own_metrics() -> None:
    apps = []
    for spend, steps in ((Decimal(1), 3), (Decimal(7), 11)):
        app = FastAPI()
        app.include_router(metrics_router(FixedPort(snapshot({"aws": spend}, steps))))
        apps.append(app)
    with serve(apps[0]) as one, serve(apps[1]) as two:
        first, second = (parse(httpx.get(f"{url}/metrics", timeout=30).text) for url in (one, two))
    assert (first[("scalar_steps_total", None)], second[("scalar_steps_total", None)]) == (3, 11)
    assert first[("scalar_spend_accrued_usd_total", "aws")] == 1
    assert second[("scalar_spend_accrued_usd_total", "aws")] == 7
    assert second[("scalar_step_duration_seconds_count", None)] == 11
