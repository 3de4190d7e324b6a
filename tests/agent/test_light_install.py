"""The node agent runs on the base install: ``scalar agent`` started with the control plane's packages made
unimportable (a ``sitecustomize`` that installs a ``sys.meta_path`` finder refusing them, in the agent and
in every Python it starts) still answers ``--help``, registers with a control plane on loopback and runs a
job. The finder also records every refused import, so a module that tries one and falls back is caught."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agent.harness import controller, kill_tree_of, wait_until

# The packages the base install leaves out (import names): pyproject.toml's extras add them.
SERVER_ONLY = (
    "fastapi",
    "starlette",
    "sqlalchemy",
    "kubernetes",
    "numpy",
    "scipy",
    "matplotlib",
    "botocore",
    "boto3",
    "paramiko",
    "alembic",
    "psycopg",
    "uvicorn",
)

SITECUSTOMIZE = """
import importlib.abc, os, sys

BLOCKED = frozenset(os.environ["LIGHT_BLOCKED"].split(","))
LOG = os.environ["LIGHT_BLOCK_LOG"]


class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            with open(LOG, "a") as log:
                log.write(f"{os.getpid()} {name}\\n")
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None


sys.meta_path.insert(0, Refuse())
"""


@pytest.fixture
def blocked_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a Python that cannot import ``SERVER_ONLY``; refusals go to ``blocked.log``."""
    site = tmp_path / "blocker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = [str(site), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(path),
        "LIGHT_BLOCKED": ",".join(SERVER_ONLY),
        "LIGHT_BLOCK_LOG": str(tmp_path / "blocked.log"),
        "SCALAR_AGENT_NO_CGROUPS": "",
    }


def refused(env: dict[str, str]) -> list[str]:
    log = Path(env["LIGHT_BLOCK_LOG"])
    return log.read_text().splitlines() if log.is_file() else []


def test_the_blocker_refuses_what_it_should(blocked_env: dict[str, str]) -> None:
    """The check below is not vacuous: the server's modules do fail under the same blocker."""
    done = subprocess.run(
        [sys.executable, "-c", "import scalar.api.app"],
        env=blocked_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "blocked by the test" in done.stderr
    assert refused(blocked_env)


def test_scalar_agent_help_runs_without_the_server_packages(blocked_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scalar", "agent", "--help"],
        env={**blocked_env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "--controller" in done.stdout and "--join-token" in done.stdout
    assert refused(blocked_env) == []


def test_a_command_whose_extra_is_missing_says_which_to_install(blocked_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scalar", "simulate", "fgd"],
        env=blocked_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "pip install 'scalar-compute[sim]'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow  # a real agent process registering and running a job, end to end
def test_scalar_agent_registers_and_runs_a_job_without_the_server_packages(
    sqlite_url: str, tmp_path: Path, blocked_env: dict[str, str]
) -> None:
    state_dir = tmp_path / "node"
    with controller(sqlite_url, tmp_path / "data") as c:
        args = ["--controller", c.url, "--state-dir", str(state_dir), "--fake-gpus", "2xH100-80GB"]
        with open(tmp_path / "agent.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "scalar", "agent", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**blocked_env, "SCALAR_JOIN_TOKEN": c.token()},
            )
        try:
            [registered] = wait_until(c.agents, 60, "registration")
            assert registered["facts"]["fake_gpus"] is True
            job_id = c.submit(command=[sys.executable, "-c", "print('light agent ran me', flush=True)"])

            def finished() -> dict[str, Any] | None:
                job = c.job(job_id)
                return job if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") else None

            job = wait_until(finished, 60, "the job to finish")
            assert job["state"] == "SUCCEEDED", (job, (tmp_path / "agent.log").read_text())
            logs = wait_until(lambda: c.logs(job_id)["data"] or None, 20, "the job's logs")
            assert "light agent ran me" in logs
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            kill_tree_of(state_dir)
    assert proc.returncode == 0, (tmp_path / "agent.log").read_text()
    assert refused(blocked_env) == [], "the agent tried to import a server-only package"
