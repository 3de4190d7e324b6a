"""The base install, for real: ``scalar-compute`` built into a wheel from this checkout and installed into a
fresh virtual environment from a local wheelhouse with ``--no-index`` (no package index is asked), has none
of the control plane's packages, answers ``scalar agent --help``, and its ``scalar agent`` registers with a
control plane on loopback and runs a job.

The wheelhouse (``.venv/wheelhouse``: the base dependencies' wheels pinned by requirements.lock, and the
build backend's) is made by ``make`` (the Makefile's ``wheelhouse`` target, which ``make test`` runs);
``SCALAR_TEST_WHEELHOUSE`` names another one. The project's own wheel is built here, from the current
sources, with the build backend taken from the wheelhouse: nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agent.harness import controller, kill_tree_of, wait_until

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = Path(os.environ.get("SCALAR_TEST_WHEELHOUSE") or ROOT / ".venv" / "wheelhouse")

# Import names of packages the base install must not bring (pyproject.toml's extras add them).
NOT_INSTALLED = ("fastapi", "sqlalchemy", "kubernetes", "numpy", "botocore", "paramiko")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would leak the test's own packages into the new venv's
    Python (``PYTHONPATH``, set for agent tests to this checkout) or let pip look beyond the wheelhouse
    (``PIP_*`` variables, pip's configuration files)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV")) and k != "SCALAR_AGENT_PASS_ENV"
    }
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture
def base_venv(tmp_path: Path) -> Path:
    """A fresh venv with ``scalar-compute`` (no extra) installed offline; its ``bin`` directory."""
    if not (WHEELHOUSE / ".stamp").is_file():
        pytest.fail(f"no wheelhouse at {WHEELHOUSE}: `make wheelhouse` (part of `make test`) builds it")
    # The sources, copied so that the build writes nothing into the checkout.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    offline = ("--no-index", "--find-links", WHEELHOUSE)
    dist = tmp_path / "dist"
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        *offline,
        "--no-deps",
        "-w",
        dist,
        source,
        cwd=tmp_path,
    )
    [wheel] = dist.glob("scalar_compute-*.whl")
    venv = tmp_path / "venv"
    # No pip inside the venv (faster to make): this pip installs into it (``--python``).
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", *offline, wheel, cwd=tmp_path)
    return venv / "bin"


@pytest.mark.slow  # builds a wheel and a venv, then a real agent registers and runs a job (~20-30 s)
def test_the_base_install_from_wheels_runs_the_agent(
    base_venv: Path, sqlite_url: str, tmp_path: Path
) -> None:
    python = base_venv / "python"
    where = run(python, "-c", "import scalar; print(scalar.__file__)", cwd=tmp_path)
    assert Path(where.strip()).is_relative_to(base_venv.parent), where  # the wheel's, not this checkout's
    probe = "import importlib.util as u, sys; print(*[m for m in sys.argv[1:] if u.find_spec(m)])"
    assert run(python, "-c", probe, *NOT_INSTALLED, cwd=tmp_path).split() == []
    # The probe can fail: the test's own environment (the dev install) has them all.
    assert run(sys.executable, "-c", probe, *NOT_INSTALLED, cwd=tmp_path).split() == list(NOT_INSTALLED)

    scalar = base_venv / "scalar"
    helped = run(scalar, "agent", "--help", cwd=tmp_path, env=clean_env(COLUMNS="200"))
    assert "--controller" in helped and "--join-token" in helped
    assert run(scalar, "agent", "--version", cwd=tmp_path).startswith("scalar agent ")

    state_dir = tmp_path / "node"
    log_path = tmp_path / "agent.log"
    with controller(sqlite_url, tmp_path / "data") as c:
        args = ["--controller", c.url, "--state-dir", str(state_dir), "--fake-gpus", "2xH100-80GB"]
        env = clean_env(
            SCALAR_JOIN_TOKEN=c.token(),
            SCALAR_AGENT_JOB_USER="same-user",
            SCALAR_AGENT_SANDBOX="none",
            SCALAR_AGENT_NO_CGROUPS="",
        )
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [str(scalar), "agent", *args], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, env=env
            )
        try:
            [registered] = wait_until(c.agents, 60, "registration")
            assert registered["facts"]["fake_gpus"] is True
            code = "import scalar, sys; print('ran on', sys.prefix, flush=True)"
            job_id = c.submit(command=[str(python), "-c", code])

            def finished() -> dict[str, Any] | None:
                job = c.job(job_id)
                return job if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") else None

            job = wait_until(finished, 60, "the job to finish")
            assert job["state"] == "SUCCEEDED", (job, log_path.read_text())
            logs = wait_until(lambda: c.logs(job_id)["data"] or None, 20, "the job's logs")
            assert f"ran on {base_venv.parent}" in logs
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            kill_tree_of(state_dir)
    assert proc.returncode == 0, log_path.read_text()
