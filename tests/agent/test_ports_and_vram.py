"""Ports and VRAM budgets on real agents (docs/agent.md "Ports" and "VRAM budgets").

A job with ``ports`` gets that many free TCP ports from its node's agent, as ``$SCALAR_PORTS`` and ``$PORT``;
the command binds them, and ``GET /jobs/{id}`` shows the same numbers as ``allocated_ports``. A job on a
shared GPU with a VRAM budget gets CUDA MPS's per-client memory limit.
"""

from __future__ import annotations

import json
import socket
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from scalar.agent.runner import Runner, allocate_ports
from scalar.wire.agent import AssignmentReport, Heartbeat
from tests.agent.harness import agent, controller, kill_tree_of, wait_until

# Binds every port it was given (so they are really free), prints them, holds them for $HOLD seconds.
BIND_PORTS = (
    "import os, socket, time\n"
    "ports = [int(p) for p in os.environ['SCALAR_PORTS'].split(',')]\n"
    "assert int(os.environ['PORT']) == ports[0]\n"
    "socks = []\n"
    "for p in ports:\n"
    "    s = socket.socket(); s.bind(('127.0.0.1', p)); s.listen(); socks.append(s)\n"
    "print('PORTS', ','.join(map(str, ports)), flush=True)\n"
    "time.sleep(float(os.environ.get('HOLD', '0')))\n"
)
SHOW_ENV = (
    "import os\n"
    "for k in ('CUDA_MPS_PINNED_DEVICE_MEM_LIMIT', 'SCALAR_VRAM_BUDGET_GB', 'PYTORCH_CUDA_ALLOC_CONF', "
    "'SCALAR_PORTS', 'PORT'):\n"
    "    print(k, os.environ.get(k, '-'), flush=True)\n"
)


def finished(c: Any, job_id: str) -> dict[str, Any] | None:
    job = c.job(job_id)
    return job if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") else None


def printed_env(c: Any, job_id: str) -> dict[str, str]:
    logs = wait_until(lambda: c.logs(job_id)["data"] or None, 20, "the job's output")
    return dict(line.split(" ", 1) for line in logs.splitlines() if line)


@pytest.mark.slow  # a real agent, restarted
def test_ports_are_allocated_bound_reported_and_kept_across_an_agent_restart(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)  # the agents inherit this environment
    state = tmp_path / "a"
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), state, "4xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "registration")
            cmd = ["python", "-c", BIND_PORTS]
            first = c.submit(command=cmd, ports=2, env={"HOLD": "6"})
            second = c.submit(command=cmd, ports=3, env={"HOLD": "6"})
            plain = c.submit(command=["python", "-c", SHOW_ENV])
            shared = c.submit(command=["python", "-c", SHOW_ENV], share_gpu=True, vram_per_gpu_gb=20)

            def both_reported() -> tuple[list[int], list[int]] | None:
                a, b = c.job(first).get("allocated_ports"), c.job(second).get("allocated_ports")
                return (a, b) if a and b else None

            ports_a, ports_b = wait_until(both_reported, 40, "both jobs' ports")
            assert c.job(first)["ports"] == 2 and c.job(second)["ports"] == 3
            assert len(set(ports_a)) == 2 and len(set(ports_b)) == 3
            assert not set(ports_a) & set(ports_b)  # two running jobs never share a port

            # kill -9 the agent while both run; the journal keeps their ports and a restarted agent
            # re-adopts them with the same ports
            node.kill9()
            journal = json.loads((state / "journal.json").read_text())
            kept = {e["assignment_id"].split(":")[0]: e["ports"] for e in journal["assignments"]}
            assert kept[first] == ports_a and kept[second] == ports_b
            reloaded = Runner(state, base_env={})
            assert reloaded.ports_in_use() == set(ports_a) | set(ports_b)
            node = agent(c.url, None, state, "4xH100-80GB").start()

            for job_id, ports in ((first, ports_a), (second, ports_b)):
                job = wait_until(partial(c.ended, job_id), 60, f"{job_id} to finish")
                assert job["state"] == "SUCCEEDED", job["reason"]
                assert job["allocated_ports"] == ports
                out = wait_until(partial(c.output, job_id), 20, "output")
                assert out.splitlines().count(f"PORTS {','.join(map(str, ports))}") == 1  # ran once

            job = wait_until(lambda: finished(c, plain), 60, "the job without ports")
            assert job["state"] == "SUCCEEDED" and job["ports"] == 0 and job["allocated_ports"] is None
            env = printed_env(c, plain)
            assert env["SCALAR_PORTS"] == "-" and env["PORT"] == "-"
            assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "-"  # a whole GPU: no MPS limit

            job = wait_until(lambda: finished(c, shared), 60, "the shared-GPU job")
            assert job["state"] == "SUCCEEDED", job["reason"]
            env = printed_env(c, shared)
            assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"0={20 * 1024}M"
            assert env["SCALAR_VRAM_BUDGET_GB"] == "20"
            assert env["PYTORCH_CUDA_ALLOC_CONF"] == "-"  # left alone
        finally:
            node.stop()
            kill_tree_of(state)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"ports": 17}, "must be <= 16"),
        ({"ports": -1}, "must be >= 0"),
        ({"ports": "2"}, "whole number"),
        ({"ports": 1.5}, "whole number"),
        ({"ports": ["http"]}, "whole number"),
    ],
)
def test_a_bad_ports_value_is_refused_with_a_422(
    sqlite_url: str, tmp_path: Path, body: dict[str, Any], problem: str
) -> None:
    with controller(sqlite_url, tmp_path) as c:
        response = c.http.post("/jobs", json={"tier": "FAST", "gpu_count": 1, "command": ["true"], **body})
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        [error] = response.json()["errors"]
        assert error["field"] == "ports" and problem in error["problem"], error
        assert "0 to 16" in error["fix"]


def test_ports_without_a_command_are_refused(sqlite_url: str, tmp_path: Path) -> None:
    with controller(sqlite_url, tmp_path) as c:
        response = c.http.post("/jobs", json={"tier": "FAST", "gpu_count": 1, "ports": 2})
        assert response.status_code == 422, response.text
        assert any(e["field"] == "ports" and "command" in e["problem"] for e in response.json()["errors"]), (
            response.text
        )


def test_allocated_ports_are_free_distinct_and_avoid_those_in_use() -> None:
    taken = allocate_ports(4, set())
    again = allocate_ports(4, set(taken))
    assert len(set(taken)) == 4 and len(set(again)) == 4 and not set(taken) & set(again)
    for port in taken + again:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: the allocation holds nothing once done


def test_old_messages_and_journals_without_ports_still_load(tmp_path: Path) -> None:
    report = {"assignment_id": "job-1:1", "state": "running", "pid": 5, "log_bytes": 0}
    beat = Heartbeat.model_validate({"node_id": "n", "node_token": "t", "seq": 1, "assignments": [report]})
    assert beat.assignments[0].ports == []
    with pytest.raises(ValidationError):
        AssignmentReport.model_validate({**report, "ports": [0]})
    with pytest.raises(ValidationError):
        AssignmentReport.model_validate({**report, "ports": list(range(1000, 1017))})
    directory = tmp_path / "assignments" / "job-1_1"
    directory.mkdir(parents=True)
    (directory / "exit.json").write_text(json.dumps({"exit_code": 0, "finished_at": 1.0}))
    old_entry = {"assignment_id": "job-1:1", "directory": str(directory), "started_at": 1.0, "shim_pid": 1}
    (tmp_path / "journal.json").write_text(json.dumps({"assignments": [old_entry]}))
    runner = Runner(tmp_path, base_env={})
    assert runner.entries["job-1:1"].ports == []
    assert "ports" not in runner.report(runner.entries["job-1:1"])  # sent as before


def test_an_attempt_whose_ports_cannot_be_allocated_fails_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("scalar.agent.runner.PORT_TRIES", 1)  # one try cannot find two ports
    runner = Runner(tmp_path, base_env={})
    runner.start(
        {"assignment_id": "job-1:1", "job_id": "job-1", "attempt": 1, "argv": ["true"], "port_count": 2}
    )
    report = runner.report(runner.entries["job-1:1"])
    assert report["state"] == "failed_to_start"
    assert "could not allocate 2 TCP port(s)" in report["error"]
    assert runner.entries["job-1:1"].shim_pid is None  # nothing was started
