"""The CLI's conventions, through the real ``scalar`` process in an 80-column terminal (``COLUMNS=80``),
against a real control plane served on loopback: tables that fit without cutting an id, ``--wide``,
one time format, ``scalar cancel``, ``scalar --version``, stray words refused with a hint, fix hints as
commands, empty results that say what to try, and no Python ``None`` in what people read.

The control plane's time is injected and held still (one job RUNNING on bought capacity, one PENDING
waiting for a purchase), so every command reads the same cluster.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version
from typing import Any

import httpx
import pytest

from scalar.api.app import create_app
from scalar.runtime import ControlPlane
from tests.api.live_server import serve
from tests.conftest import EXAMPLES, REPO, CliResult
from tests.runtime.helpers import Clock, drive, job, settings_for

Run = Callable[..., CliResult]
WIDTH = 80
TERMINAL = {"COLUMNS": str(WIDTH)}
HUMAN_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \((now|\d+[smhd] ago|in \d+[smhd])\)")
# The read commands whose tables must fit; each runs once per module (a process start is slow).
READS: dict[str, list[str]] = {
    "jobs": ["jobs"],
    "jobs_wide": ["jobs", "--wide"],
    "nodes": ["nodes"],
    "blocks": ["blocks"],
    "prices": ["prices"],
    "providers": ["providers"],
    "costs": ["costs"],
    "status": ["status"],
    "audit": ["audit"],
}


@dataclass
class Live:
    url: str
    plane: ControlPlane
    running: str
    pending: str
    reads: dict[str, CliResult]

    def api(self, path: str) -> Any:
        response = httpx.get(f"{self.url}{path}", timeout=30)
        assert response.status_code == 200, response.text
        return response.json()


def scalar(run_cli: Run, live: Live, *args: str) -> CliResult:
    return run_cli(*args, "--server", live.url, env=TERMINAL)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("conventions-cli")
    clock = Clock()
    plane = ControlPlane(settings_for(f"sqlite:///{tmp}/scalar.db", tmp), clock=clock)
    plane.run_once()
    try:
        running = plane.submit_job(job(5, 600, vram_per_gpu_gb=40, name="a-job-name-long-enough-to-wrap"))
        drive([plane], clock, 20)
        pending = plane.submit_job(job(8, 600, vram_per_gpu_gb=40, name="big"))
        drive([plane], clock, 1)
        with serve(create_app(plane)) as url:
            reads = _run_reads(url)
            yield Live(url, plane, str(running.id), str(pending.id), reads)
    finally:
        plane.stop()


def _run_reads(url: str) -> dict[str, CliResult]:
    """Every read command once, a few at a time, as real processes in an 80-column terminal."""

    def one(args: list[str]) -> CliResult:
        return subprocess.run(
            [sys.executable, "-m", "scalar", *args, "--server", url],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=180,
            env={**os.environ, **TERMINAL},
        )

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = dict(zip(READS, pool.map(one, READS.values()), strict=True))
    return results


def lines_of(result: CliResult) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_read_tables_fit_80_columns_and_show_every_id_whole(live: Live) -> None:
    for name, result in live.reads.items():
        if name == "jobs_wide":
            continue
        lines = lines_of(result)
        # table lines (cells apart by 2+ spaces) fit; prose is left whole for the terminal to wrap
        too_wide = [line for line in lines if len(line.rstrip()) > WIDTH and "  " in line.strip()]
        assert not too_wide, (name, too_wide)
        assert "…" not in result.stdout and "None" not in result.stdout, name
    whole_lines = {
        name: [set(line.split()) for line in r.stdout.splitlines()] for name, r in live.reads.items()
    }

    def shown_whole(name: str, value: str) -> bool:
        return any(value in words for words in whole_lines[name])

    jobs = live.api("/jobs")["jobs"]
    assert {j["id"] for j in jobs} >= {live.running, live.pending}
    assert all(shown_whole("jobs", j["id"]) for j in jobs)
    nodes = live.api("/nodes")["nodes"]
    assert nodes and all(shown_whole("nodes", n["node_id"]) for n in nodes)
    blocks = live.api("/blocks")["blocks"]
    assert blocks and all(shown_whole("blocks", b["block_id"]) for b in blocks)
    offers = live.api("/prices")["offers"]
    longest = max(offers, key=lambda o: len(o["instance_type"]))
    assert len(longest["instance_type"]) > 30 and shown_whole("prices", longest["instance_type"])
    running_name = "a-job-name-long-enough-to-wrap"
    assert not shown_whole("jobs", running_name)  # NAME wraps to fit 80 columns...
    assert shown_whole("jobs_wide", running_name)  # ...and --wide prints rows whole


def test_wide_adds_columns(live: Live) -> None:
    narrow, wide = live.reads["jobs"].stdout, live.reads["jobs_wide"].stdout
    for header in ("TENANT", "SUBMITTED"):
        assert header not in narrow and header in wide
    assert HUMAN_TIME.search(wide)


def test_one_time_format_for_people_and_iso_8601_in_json(run_cli: Run, live: Live) -> None:
    detail = scalar(run_cli, live, "jobs", live.running)
    as_json = scalar(run_cli, live, "jobs", live.running, "--json")

    submitted = json.loads(as_json.stdout)["submitted_at"]
    moment = datetime.fromisoformat(submitted.replace("Z", "+00:00"))
    row = next(line for line in lines_of(detail) if line.startswith("submitted_at"))
    assert HUMAN_TIME.search(row)
    assert moment.strftime("%Y-%m-%dT%H:%M:%SZ") in row
    for name in ("blocks", "audit"):  # a time column may wrap its relative part onto the next line
        out = live.reads[name].stdout
        assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", out)
        assert re.search(r"\((in )?\d+[smhd]( ago)?\)", out)
        assert not re.search(r"\((in )?\d+[smhd]\s*$", out, re.MULTILINE), out  # "(3m ago)" is never split


def test_version_prints_the_package_version(run_cli: Run) -> None:
    result = run_cli("--version", env=TERMINAL)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"scalar {version('scalar-compute')}\n"


def test_a_stray_word_is_refused_with_what_was_meant_and_nothing_is_sent(run_cli: Run, live: Live) -> None:
    before = len(live.api("/jobs?limit=1000")["jobs"])

    result = scalar(run_cli, live, "submit", "--gpus", "1", "--duration", "2", "hours", "-y")

    assert result.returncode == 2, result.stdout
    assert 'did you mean --duration "2 hours"?' in result.stderr
    assert "a command to run goes after --: scalar submit [OPTIONS] -- hours" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert len(live.api("/jobs?limit=1000")["jobs"]) == before

    extra = scalar(run_cli, live, "jobs", live.running, "again")
    assert extra.returncode == 2
    assert extra.stderr.startswith("error: unexpected word 'again': scalar jobs takes JOB_ID only")


def test_a_command_after_dashdash_is_the_jobs_command(run_cli: Run, live: Live) -> None:
    args = ["submit", "--server", live.url, "--gpus", "1", "--duration", "2h", "-y", "--json"]
    result = run_cli(*args, "--", "echo", "2", "hours", env=TERMINAL)

    assert result.returncode == 0, result.stderr
    accepted = json.loads(result.stdout)
    assert accepted["command"] == ["echo", "2", "hours"] and accepted["expected_duration_sec"] == 7200


def test_cancel_cancels_each_job_and_names_the_ids_it_could_not(run_cli: Run, live: Live) -> None:
    waiting = live.plane.submit_job(job(8, 600, vram_per_gpu_gb=40, tier="FLEX", name="to-cancel"))
    job_id = str(waiting.id)

    result = scalar(run_cli, live, "cancel", job_id, "job-nope", "--json")

    assert result.returncode == 2
    answer = json.loads(result.stdout)
    assert [j["id"] for j in answer["cancelled"]] == [job_id]
    assert answer["cancelled"][0]["cancel_requested"] is True
    assert [(f["id"], f["status"]) for f in answer["failed"]] == [("job-nope", 404)]
    assert "error: job-nope: no job with id 'job-nope'" in result.stderr
    assert "`scalar jobs` lists them" in result.stderr and "GET /jobs" not in result.stderr
    assert "error: 1 of 2 not cancelled: job-nope" in result.stderr


def test_logs_of_a_job_without_a_command_says_why_there_is_no_output(run_cli: Run, live: Live) -> None:
    result = scalar(run_cli, live, "logs", live.running)

    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert f"job {live.running} has no output: it has no command" in result.stderr
    assert "scalar submit --gpus 1 -- " in result.stderr


def test_an_empty_price_list_names_the_models_that_exist(run_cli: Run, live: Live) -> None:
    result = scalar(run_cli, live, "prices", "--gpu-model", "H1000")

    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert said.startswith("no offers match --gpu-model H1000; known GPU models: ")
    models = {o["gpu_model"] for o in live.api("/prices")["offers"] if o.get("gpu_model")}
    assert models and all(re.search(rf"\b{re.escape(m)}\b", said) for m in models)
    assert "H100" in models and said.endswith("try `scalar prices --gpu-model H100`")


def test_an_endpoint_without_requests_shows_no_python_none(run_cli: Run, live: Live) -> None:
    result = scalar(run_cli, live, "endpoint", "deploy", str(EXAMPLES / "endpoint_serverless.json"))

    assert result.returncode == 0, result.stderr
    assert "None" not in result.stdout
    assert "none yet: no request has completed" in " ".join(result.stdout.split())
    assert all(len(line.rstrip()) <= WIDTH for line in result.stdout.splitlines() if "  " in line.strip())
