"""``scalar simulate dynamic`` as a real process: JSON, the table, and bad input (exit 2, no traceback)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPO
from tests.sim.protocol_b_fixtures import write_pods

pytestmark = pytest.mark.slow  # simulate dynamic processes, each a full run

PODS = EXAMPLES / "pods-dynamic.csv"


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalar", "simulate", "dynamic", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_json_has_the_numbers_of_every_policy_asked() -> None:
    result = run(
        "--pods",
        PODS,
        "--start-day",
        "0",
        "--window-days",
        "1",
        "--policy",
        "scalar,lower-bound",
        "--seed",
        "5",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["seed"] == 5
    assert data["workload"]["jobs"] == 10
    assert (
        data["workload"]["skipped"]["cpu_only"] == 1 and data["workload"]["skipped"]["pending_in_trace"] == 1
    )
    assert [p["policy"] for p in data["policies"]] == ["scalar", "lower-bound"]
    scalar = data["policies"][0]
    for key in ("cost", "cost_per_delivered_gpu_hour", "idle_gpu_hours", "paid_gpu_hours"):
        assert isinstance(scalar[key], int | float)
    for tier in ("fast", "flex"):
        assert set(scalar[tier]) >= {"wait_p50_s", "wait_p95_s", "wait_p99_s", "slo_attainment"}
    assert scalar["fast"]["finished"] == 6 and scalar["flex"]["finished"] == 4
    assert scalar["cost"] >= data["policies"][1]["cost"]
    assert scalar["ratio_to_lower_bound"] >= 1.0 and scalar["preempted_gpu_hours"] >= 0
    assert "Traceback" not in result.stderr


def test_several_runs_give_runs_and_means_with_wins() -> None:
    result = run(
        "--pods",
        PODS,
        "--start-day",
        "0",
        "--window-days",
        "0.2",
        "--seeds",
        "5-6",
        "--policy",
        "scalar,per-pod",
        "--jobs",
        "2",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [r["seed"] for r in data["runs"]] == [5, 6]
    assert [p["policy"] for p in data["runs"][0]["policies"]] == ["scalar", "per-pod"]
    scalar, per_pod = data["policies"]
    costs = [r["policies"][0]["cost"] for r in data["runs"]]
    assert scalar["cost"] == pytest.approx(sum(costs) / 2, abs=1e-3)
    assert scalar["cost_sd"] == pytest.approx(statistics.stdev(costs), abs=1e-3)
    assert scalar["killed_runs"] == sum(r["policies"][0]["killed_runs"] for r in data["runs"])
    assert per_pod["wins"]["runs"] == 2 and 0 <= per_pod["wins"]["scalar_wins"] <= 2


def test_the_table_names_every_policy_and_the_mapping() -> None:
    result = run(
        "--pods",
        PODS,
        "--start-day",
        "0",
        "--window-days",
        "1",
        "--policy",
        "karpenter",
        "--policy",
        "ray-v2",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "GPU model mapping" in out and "P100" in out and "V100" in out
    assert "POLICY" in out and "FAST_P99_MIN" in out and "FLEX_SLO" in out
    assert "karpenter" in out and "ray-v2" in out and "scalar " not in out


def test_a_bad_row_exits_2_naming_file_line_and_column(tmp_path: Path) -> None:
    bad = write_pods(
        tmp_path / "bad.csv",
        ["a,4000,8192,1,1000,,LS,Running,0,100,0", "b,4000,8192,1,1500,,LS,Running,0,100,0"],
    )
    result = run("--pods", bad, "--json")
    assert result.returncode == 2
    assert "bad.csv: line 3, column 'gpu_milli'" in result.stderr
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = run("--pods", tmp_path / "nope.csv")
    assert result.returncode == 2
    assert "nope.csv: file not found" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_options_exit_2() -> None:
    for args in (
        ["--policy", "fifo"],
        ["--compress", "0.5"],
        ["--window-days", "0"],
        ["--seeds", "4x"],
        ["--seeds", "9-3"],
        ["--seed", "1", "--seeds", "2"],
        ["--start-day", "day1"],
        ["--jobs", "0"],
        ["--preemption-scale", "-1"],
        ["--checkpoint-minutes", "0"],
    ):
        result = run("--pods", PODS, *args)
        assert result.returncode == 2, args
        assert "error:" in result.stderr and "Traceback" not in result.stderr


def test_an_empty_window_says_so(tmp_path: Path) -> None:
    result = run("--pods", PODS, "--start-day", "30", "--window-days", "1")
    assert result.returncode == 2
    assert "no pod of the window" in result.stderr
