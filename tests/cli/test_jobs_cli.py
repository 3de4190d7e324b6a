"""``scalar jobs`` against a live API server (the fake control plane behind real HTTP)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from scalar.api.app import create_app
from tests.api.fake_control_plane import FakeControlPlane
from tests.api.live_server import serve
from tests.cli.test_submit_cli import assert_usage_error, dead_server
from tests.conftest import CliResult

Run = Callable[..., CliResult]
JOB = {"tier": "FAST", "gpu_count": 2, "vram_per_gpu_gb": 40.0, "cpu_cores": 8.0, "ram_gb": 64.0,
       "expected_duration_sec": 600.0, "priority": 1, "share_gpu": False}  # fmt: skip


@pytest.fixture
def fake_cp() -> FakeControlPlane:
    cp = FakeControlPlane()
    cp.submit_job({**JOB, "name": "first"})
    cp.submit_job(JOB)
    cp.submit_job({**JOB, "gpu_count": 8, "name": "big"})
    running = cp.jobs["job-0002"]
    running.update(state="RUNNING", reason="running on node-a", placements=[
        {"node_id": "node-a", "gpu_indices": [0, 1]}
    ])  # fmt: skip
    return cp


@pytest.fixture
def server(fake_cp: FakeControlPlane) -> Iterator[str]:
    with serve(create_app(fake_cp)) as url:
        yield url


def test_the_table_lists_every_job_with_upper_snake_headers_and_dashes(run_cli: Run, server: str) -> None:
    result = run_cli("jobs", "--server", server)

    assert result.returncode == 0, result.stderr
    out = result.stdout
    for header in ("ID", "NAME", "STATE", "TIER", "GPUS", "REASON"):
        assert header in out
    for job_id in ("job-0001", "job-0002", "job-0003"):
        assert job_id in out
    row = next(line for line in out.splitlines() if "job-0002" in line)
    assert row.split()[:5] == ["job-0002", "-", "RUNNING", "FAST", "2"]  # no name: "-"
    assert "RUNNING" in row


def test_state_filters_and_json_prints_the_apis_page(run_cli: Run, server: str) -> None:
    result = run_cli("jobs", "--server", server, "--state", "running", "--json")

    assert result.returncode == 0, result.stderr
    page = json.loads(result.stdout)
    assert page["state"] == "RUNNING"
    assert [j["id"] for j in page["jobs"]] == ["job-0002"]


def test_one_job_shows_its_reason_and_placements(run_cli: Run, server: str) -> None:
    result = run_cli("jobs", "job-0002", "--server", server)

    assert result.returncode == 0, result.stderr
    assert "running on node-a" in result.stdout
    assert "node-a (GPUs 0,1)" in result.stdout
    assert "RUNNING" in result.stdout

    as_json = json.loads(run_cli("jobs", "job-0002", "--server", server, "--json").stdout)
    assert as_json["placements"] == [{"node_id": "node-a", "gpu_indices": [0, 1]}]


def test_an_unknown_job_or_state_is_the_servers_problem_exit_2(run_cli: Run, server: str) -> None:
    unknown = run_cli("jobs", "job-9999", "--server", server)
    assert_usage_error(unknown)
    assert unknown.stderr.splitlines()[0] == "error: no job with id 'job-9999'"
    assert "  job_id: no job has id 'job-9999'" in unknown.stderr

    bad_state = run_cli("jobs", "--state", "DONE", "--server", server)
    assert_usage_error(bad_state)
    assert "  state: is not a job state" in bad_state.stderr
    assert "fix: give one of PENDING" in bad_state.stderr


def test_an_empty_server_says_how_to_submit(run_cli: Run) -> None:
    with serve(create_app(FakeControlPlane())) as url:
        result = run_cli("jobs", "--server", url)

    assert result.returncode == 0, result.stderr
    assert "no jobs yet: submit one with `scalar submit --gpus 1`" in result.stdout


def test_server_down_exits_1_and_says_how_to_start_it(run_cli: Run) -> None:
    result = run_cli("jobs", "--server", dead_server())

    assert result.returncode == 1
    assert "cannot reach the Scalar server" in result.stderr
    assert "`make run` or `scalar up`" in result.stderr


def test_jobs_page_with_limit_and_after_and_all_walks_every_page(run_cli: Run, server: str) -> None:
    first = run_cli("jobs", "--server", server, "--limit", "2")
    assert first.returncode == 0, first.stderr
    assert "job-0003" in first.stdout and "job-0002" in first.stdout and "job-0001" not in first.stdout
    hint = next(line for line in first.stdout.splitlines() if "--after" in line)
    cursor = hint.split("--after ", 1)[1].split()[0]

    second = run_cli("jobs", "--server", server, "--limit", "2", "--after", cursor, "--json")
    assert second.returncode == 0, second.stderr
    page = json.loads(second.stdout)
    assert [j["id"] for j in page["jobs"]] == ["job-0001"] and page["next"] is None

    every = run_cli("jobs", "--server", server, "--limit", "1", "--all", "--json")
    assert every.returncode == 0, every.stderr
    assert [j["id"] for j in json.loads(every.stdout)["jobs"]] == ["job-0003", "job-0002", "job-0001"]

    bad = run_cli("jobs", "--server", server, "--after", "not-a-cursor")
    assert bad.returncode == 2 and "after" in bad.stderr
