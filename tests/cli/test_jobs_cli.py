"""``scalar jobs`` against a live API server: a real control plane on a fresh SQLite database behind real
HTTP, stepped by the test until one of its jobs runs on a node of the built-in market."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.real_control_plane import opened_api
from tests.cli.test_submit_cli import assert_usage_error, dead_server
from tests.conftest import CliResult

Run = Callable[..., CliResult]
JOB = {"tier": "FAST", "gpu_count": 2, "vram_per_gpu_gb": 40.0, "cpu_cores": 8.0, "ram_gb": 64.0,
       "expected_duration_sec": 600.0, "priority": 1, "share_gpu": False}  # fmt: skip


Jobs = list[dict[str, Any]]


@pytest.fixture
def served(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[str, Jobs]]:
    """(base URL, the three jobs as the API sends them, oldest first): the second one RUNNING with a
    placement."""
    with opened_api(sqlite_url, tmp_path / "data") as (url, cp):
        ids = [
            cp.submit_job({**JOB, "name": "first"}).id,
            cp.submit_job(JOB).id,
            cp.submit_job({**JOB, "gpu_count": 8, "name": "big"}).id,
        ]
        for _ in range(100):  # the controller buys a node and places the job within a few steps
            cp.run_once()
            cp.run_executor_once()
            if getattr(cp.get_job(ids[1]), "state", None) == "RUNNING":
                break
        jobs = [cp.get_job(job_id) for job_id in ids]
        assert all(jobs) and jobs[1] is not None and jobs[1].state == "RUNNING", jobs
        yield url, [j.model_dump(mode="json") for j in jobs if j is not None]


@pytest.fixture
def server(served: tuple[str, Jobs]) -> str:
    return served[0]


@pytest.fixture
def jobs(served: tuple[str, Jobs]) -> Jobs:
    return served[1]


def test_the_table_lists_every_job_with_upper_snake_headers_and_dashes(
    run_cli: Run, server: str, jobs: Jobs
) -> None:
    result = run_cli("jobs", "--server", server)

    assert result.returncode == 0, result.stderr
    out = result.stdout
    for header in ("ID", "NAME", "STATE", "TIER", "GPUS", "REASON"):
        assert header in out
    for job in jobs:
        row = next(line for line in out.splitlines() if job["id"] in line)
        assert row.split()[:5] == [job["id"], job["name"] or "-", job["state"], "FAST", str(job["gpu_count"])]
    assert jobs[1]["name"] is None  # no name: "-"


def test_state_filters_and_json_prints_the_apis_page(run_cli: Run, server: str, jobs: Jobs) -> None:
    result = run_cli("jobs", "--server", server, "--state", "running", "--json")

    assert result.returncode == 0, result.stderr
    page = json.loads(result.stdout)
    assert page["state"] == "RUNNING"
    running = [j["id"] for j in jobs if j["state"] == "RUNNING"][::-1]  # newest first
    assert [j["id"] for j in page["jobs"]] == running and jobs[1]["id"] in running


def test_one_job_shows_its_reason_and_placements(run_cli: Run, server: str, jobs: Jobs) -> None:
    job = jobs[1]
    (placement,) = job["placements"]
    result = run_cli("jobs", job["id"], "--server", server)

    assert result.returncode == 0, result.stderr
    words = " ".join(result.stdout.split())  # a long reason wraps in its column
    assert job["reason"] and job["reason"] in words
    gpus = ",".join(map(str, placement["gpu_indices"]))
    assert f"{placement['node_id']} (GPUs {gpus})" in result.stdout
    assert "RUNNING" in result.stdout

    as_json = json.loads(run_cli("jobs", job["id"], "--server", server, "--json").stdout)
    assert as_json["placements"] == job["placements"]


def test_an_unknown_job_or_state_is_the_servers_problem_exit_2(run_cli: Run, server: str) -> None:
    unknown = run_cli("jobs", "job-9999", "--server", server)
    assert_usage_error(unknown)
    assert unknown.stderr.splitlines()[0] == "error: no job with id 'job-9999'"
    assert "  job_id: no job has id 'job-9999'" in unknown.stderr

    bad_state = run_cli("jobs", "--state", "DONE", "--server", server)
    assert_usage_error(bad_state)
    assert "  state: is not a job state" in bad_state.stderr
    assert "fix: give one of PENDING" in bad_state.stderr


def test_an_empty_server_says_how_to_submit(run_cli: Run, sqlite_url: str, tmp_path: Path) -> None:
    with opened_api(sqlite_url, tmp_path) as (url, _):
        result = run_cli("jobs", "--server", url)

    assert result.returncode == 0, result.stderr
    assert "no jobs yet: submit one with `scalar submit --gpus 1`" in result.stdout


def test_server_down_exits_1_and_says_how_to_start_it(run_cli: Run) -> None:
    result = run_cli("jobs", "--server", dead_server())

    assert result.returncode == 1
    assert "cannot reach the Scalar server" in result.stderr
    assert "`make run` or `scalar up`" in result.stderr


def test_jobs_page_with_limit_and_after_and_all_walks_every_page(
    run_cli: Run, server: str, jobs: Jobs
) -> None:
    one, two, three = (j["id"] for j in jobs)
    first = run_cli("jobs", "--server", server, "--limit", "2")
    assert first.returncode == 0, first.stderr
    assert three in first.stdout and two in first.stdout and one not in first.stdout
    hint = next(line for line in first.stdout.splitlines() if "--after" in line)
    cursor = hint.split("--after ", 1)[1].split()[0]

    second = run_cli("jobs", "--server", server, "--limit", "2", "--after", cursor, "--json")
    assert second.returncode == 0, second.stderr
    page = json.loads(second.stdout)
    assert [j["id"] for j in page["jobs"]] == [one] and page["next"] is None

    every = run_cli("jobs", "--server", server, "--limit", "1", "--all", "--json")
    assert every.returncode == 0, every.stderr
    assert [j["id"] for j in json.loads(every.stdout)["jobs"]] == [three, two, one]

    bad = run_cli("jobs", "--server", server, "--after", "not-a-cursor")
    assert bad.returncode == 2 and "after" in bad.stderr
