"""Faults with real agent processes: a node that stops calling (SUSPECT, LOST, its job requeued with
attempt + 1, the stale attempt fenced when it comes back), an agent killed with SIGKILL and restarted (its
job re-adopted, not run twice), and a controller restarted under running agents."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from scalar.engine.config import ControllerConfig
from tests.agent.harness import Clock, agent, controller, free_port, kill_tree_of, wait_until

pytestmark = pytest.mark.slow  # real agents under a restarting controller, end to end

# Appends its pid to STARTS (one line per start), runs HOLD_<attempt> (else HOLD) seconds, then says done.
COUNTED = (
    "import os, time\n"
    "open(os.environ['STARTS'], 'a').write(f\"{os.getpid()} {os.environ['SCALAR_ATTEMPT']}\\n\")\n"
    "print('attempt', os.environ['SCALAR_ATTEMPT'], 'on', os.environ['CUDA_VISIBLE_DEVICES'], flush=True)\n"
    "time.sleep(float(os.environ.get('HOLD_' + os.environ['SCALAR_ATTEMPT'], os.environ.get('HOLD', '0'))))\n"
    "print('done', flush=True)\n"
)


def state_of(c: Any, job_id: str, *states: str) -> dict[str, Any] | None:
    job = c.job(job_id)
    return job if job["state"] in states else None


def test_a_silent_node_goes_suspect_then_lost_and_its_stale_attempt_is_fenced(
    sqlite_url: str, tmp_path: Path
) -> None:
    clock = Clock()
    starts = tmp_path / "starts.txt"
    with controller(sqlite_url, tmp_path, clock) as c:
        agents = {
            name: agent(c.url, c.token(), tmp_path / name, "1xH100-80GB").start() for name in ("a", "b")
        }
        try:
            wait_until(lambda: len(c.agents()) == 2, 30, "two agents")
            env = {"STARTS": str(starts), "HOLD_1": "8", "HOLD_2": "1"}
            job_id = c.submit(command=["python", "-c", COUNTED], env=env)
            job = wait_until(lambda: state_of(c, job_id, "RUNNING"), 40, "attempt 1 to run")
            node_a = job["placements"][0]["node_id"]
            wait_until(lambda: starts.is_file() and starts.read_text(), 20, "attempt 1 to start")
            first = agents[_owner(c, node_a, tmp_path)]

            first.signal(signal.SIGSTOP)  # the link is cut: no heartbeat, the job keeps running
            clock.advance(3.5)  # past suspect_after_s (3 s)
            wait_until(lambda: "node_suspect" in c.story_codes(node_a), 20, "SUSPECT")
            assert c.job(job_id)["state"] == "RUNNING"  # a suspect node keeps its jobs
            clock.advance(3.0)  # past lost_after_s (6 s)
            wait_until(lambda: "node_lost" in c.story_codes(node_a), 20, "LOST")
            job = wait_until(
                lambda: (j := c.job(job_id))["preemptions"] == 1 and j["state"] == "RUNNING" and j,
                40,
                "attempt 2",
            )
            assert job["placements"][0]["node_id"] != node_a
            wait_until(lambda: len(starts.read_text().splitlines()) == 2, 20, "attempt 2 to start")

            first.signal(signal.SIGCONT)  # the link is back: attempt 1 has finished meanwhile
            wait_until(lambda: "stale_attempt" in c.story_codes(job_id), 30, "the stale report to be fenced")
            wait_until(lambda: _rejoined(c.story_codes(node_a)), 20, "the node to rejoin")
            job = wait_until(lambda: state_of(c, job_id, "SUCCEEDED", "FAILED"), 40, "attempt 2 to end")
            assert job["state"] == "SUCCEEDED" and "attempt 2" in job["reason"], job["reason"]
            latest = c.logs(job_id)
            assert latest["attempt"] == 2 and latest["data"].startswith("attempt 2 on GPU-")
            assert c.logs(job_id, attempt=1)["data"].startswith("attempt 1 on GPU-")
            assert [line.split()[1] for line in starts.read_text().splitlines()] == ["1", "2"]
        finally:
            for name, process in agents.items():
                process.stop()
                kill_tree_of(tmp_path / name)


def _rejoined(codes: list[str]) -> bool:
    return "node_lost" in codes and "node_ready" in codes[codes.index("node_lost") :]


def _owner(c: Any, node_id: str, tmp_path: Path) -> str:
    """Which agent (state dir name) registered ``node_id``."""
    for name in ("a", "b"):
        identity = tmp_path / name / "identity.json"
        if identity.is_file() and node_id in identity.read_text():
            return name
    raise AssertionError(f"no agent registered {node_id}")


def test_lost_twice_fails_the_job_at_the_attempt_limit(sqlite_url: str, tmp_path: Path) -> None:
    clock = Clock()
    with controller(sqlite_url, tmp_path, clock, controller=ControllerConfig(max_job_attempts=1)) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "1xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "the agent")
            job_id = c.submit(command=["sleep", "60"])
            wait_until(lambda: state_of(c, job_id, "RUNNING"), 40, "the job to run")
            node.signal(signal.SIGSTOP)
            clock.advance(7.0)
            job = wait_until(lambda: state_of(c, job_id, "FAILED"), 30, "the job to fail")
            assert "attempt 1 of 1" in job["reason"] and "max_job_attempts" in job["reason"], job["reason"]
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def test_a_killed_agent_restarts_and_readopts_its_job_without_running_it_twice(
    sqlite_url: str, tmp_path: Path
) -> None:
    starts = tmp_path / "starts.txt"
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "the agent")
            job_id = c.submit(command=["python", "-c", COUNTED], env={"STARTS": str(starts), "HOLD": "4"})
            wait_until(lambda: state_of(c, job_id, "RUNNING"), 40, "the job to run")
            wait_until(lambda: starts.is_file() and starts.read_text(), 20, "the job to start")
            node.kill9()
            restarted = agent(c.url, None, tmp_path / "a", "2xH100-80GB").start()  # no token: its identity
            job = wait_until(lambda: state_of(c, job_id, "SUCCEEDED", "FAILED"), 60, "the job to end")
            assert job["state"] == "SUCCEEDED", job["reason"]
            assert len(starts.read_text().splitlines()) == 1  # re-adopted, not started again
            logs = wait_until(lambda: "done" in (d := c.logs(job_id)["data"]) and d, 20, "the whole log")
            assert logs.count("attempt 1") == 1
            assert len(c.agents()) == 1
            assert "node_lost" not in c.story_codes(c.agents()[0]["node_id"])
        finally:
            node.stop()
            if "restarted" in locals():
                restarted.stop()
            kill_tree_of(tmp_path / "a")


def test_the_controller_restarts_under_running_agents(db_url: str, tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    port = free_port()
    with controller(db_url, tmp_path, port=port) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        wait_until(c.agents, 30, "the agent")
        job_id = c.submit(command=["python", "-c", COUNTED], env={"STARTS": str(starts), "HOLD": "4"})
        wait_until(lambda: state_of(c, job_id, "RUNNING"), 40, "the job to run")
        wait_until(lambda: starts.is_file() and starts.read_text(), 20, "the agent to start it")
    try:  # the controller is down for a while: the agent keeps its job and retries, then carries on
        with controller(db_url, tmp_path, port=port) as c:
            job = wait_until(lambda: state_of(c, job_id, "SUCCEEDED", "FAILED"), 60, "the job to end")
            assert job["state"] == "SUCCEEDED", job["reason"]
            assert len(starts.read_text().splitlines()) == 1
            assert "done" in wait_until(lambda: c.logs(job_id)["data"], 20, "logs")
            [registered] = c.agents()
            assert registered["lease_state"] == "ready"
            assert "node_lost" not in c.story_codes(registered["node_id"])
    finally:
        node.stop()
        kill_tree_of(tmp_path / "a")
