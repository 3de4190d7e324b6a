"""The CLI around agents, in process against a live control plane: ``scalar join-token``,
``scalar submit -- CMD``, ``scalar logs JOB``, and the local agent ``scalar up --demo`` starts."""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner

from scalar.agent.facts import ram_gb
from scalar.cli.agent import local_fake_gpus, start_local_agent, stop_local_agent
from scalar.cli.main import app
from tests.agent.harness import agent, controller, kill_tree_of, wait_until

PRINT = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"


def test_submit_a_command_and_read_its_logs_with_the_cli(sqlite_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    with controller(sqlite_url, tmp_path) as c:
        token = runner.invoke(app, ["join-token", "--server", c.url, "--ttl-s", "60"])
        assert token.exit_code == 0, token.output
        node = agent(c.url, token.output.strip(), tmp_path / "a", "2xH100-80GB").start()
        try:
            [registered] = wait_until(c.agents, 30, "the agent")
            submitted = runner.invoke(
                app, ["submit", "--server", c.url, "--json", "--env", "K=V", "--", "python", "-c", PRINT]
            )
            assert submitted.exit_code == 0, submitted.output
            job_id = submitted.output.split('"id": "')[1].split('"')[0]
            job = wait_until(lambda: c.job(job_id)["state"] == "SUCCEEDED" and c.job(job_id), 40, "the job")
            assert (
                job["command"] == ["python", "-c", PRINT]
                and job["env"] == {"K": "V"}
                and job["gpu_count"] == 1
            )
            wait_until(lambda: c.logs(job_id)["data"], 20, "its logs")
            logs = runner.invoke(app, ["logs", "--server", c.url, job_id, "-f"])
            assert logs.exit_code == 0, logs.output
            gpus = {g["uuid"] for g in registered["facts"]["gpus"]}
            assert logs.output.strip() in gpus
            bad = runner.invoke(app, ["submit", "--server", c.url, "--env", "NOEQUALS", "--", "true"])
            assert bad.exit_code == 2 and "NAME=VALUE" in bad.output
            missing = runner.invoke(app, ["logs", "--server", c.url, "job-nope"])
            assert missing.exit_code == 2
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def test_the_local_agent_of_scalar_up_registers_a_local_block(sqlite_url: str, tmp_path: Path) -> None:
    with controller(sqlite_url, tmp_path) as c:
        process = start_local_agent(c.plane, c.url, tmp_path / "data")
        try:
            [registered] = wait_until(c.agents, 40, "the local agent")
            assert registered["provider"] == "local" and registered["hostname"] == "local"
            # the fake GPUs this machine's CPUs and memory feed (at least one), as `scalar up` says
            count = int(local_fake_gpus(os.cpu_count() or 1, ram_gb()).split("x")[0])
            assert 1 <= count <= 8 and len(registered["facts"]["gpus"]) == count
            job_id = c.submit(command=["python", "-c", PRINT])
            assert wait_until(lambda: c.job(job_id)["state"] == "SUCCEEDED", 40, "the job")
        finally:
            stop_local_agent(process)
            kill_tree_of(tmp_path / "data" / "agent")
