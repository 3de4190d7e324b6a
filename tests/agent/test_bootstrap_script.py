"""The node bootstrap script (``scalar.providers.bootstrap``): it parses (``bash -n``) whatever the values,
each failing step exits with its own code and message, and ``scalar node script --base64`` (what a
provider's user data carries) installs and starts an agent that registers with the controller."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalar import __version__
from scalar.cli.main import app
from scalar.providers import bootstrap
from scalar.wire.agent import PROTOCOL
from tests.agent.harness import controller, free_port, wait_until
from tests.agent.test_ssh_node_add import stop_agent

ODD = 'it\'s "quoted" $HOME `id` ; rm -rf /'


def render(tmp_path: Path, **fields: object) -> str:
    values: dict[str, object] = {
        "controller_url": "http://127.0.0.1:1",
        "join_token": "sjt_x",
        "directory": str(tmp_path / "agent"),
        **fields,
    }
    return bootstrap.render_startup_script(bootstrap.AgentBootstrap(**values))  # type: ignore[arg-type]


def run(script: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "bootstrap.sh"
    path.write_text(script)
    return subprocess.run(
        ["bash", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path), **env},
    )


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"fake_gpus": "8xH100-80GB", "hostname": ODD, "instance_id": ODD, "contract_expires_at": ODD},
        {"join_token": ODD, "controller_url": ODD, "pip_spec": ODD, "pip_args": ODD, "python": ODD},
        {"directory": "~/.scalar-agent"},
        {"directory": "$HOME/x y"},
    ],
)
def test_the_rendered_script_parses_and_quotes_every_value(tmp_path: Path, fields: dict[str, str]) -> None:
    script = render(tmp_path, **fields)
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    decoded = base64.b64decode(bootstrap.user_data_b64(script)).decode()
    assert decoded == script and decoded.startswith("#!/usr/bin/env bash\n")
    # The values never reach the shell unquoted: a value with `id` and $HOME in it is printed verbatim.
    if "hostname" in fields:
        assert "--hostname '" in script and "`id`" in script


def test_each_failing_step_exits_with_its_code_and_says_why(tmp_path: Path) -> None:
    missing = run(render(tmp_path, python=str(tmp_path / "nope")), tmp_path)
    assert missing.returncode == bootstrap.EXIT_NO_PYTHON, missing.stderr
    assert "install Python 3.11" in missing.stderr

    old = tmp_path / "old-python"
    old.write_text('#!/bin/sh\ncase "$2" in *exit*) exit 1;; *) echo 3.8;; esac\n')
    old.chmod(0o755)
    too_old = run(render(tmp_path, python=str(old)), tmp_path)
    assert too_old.returncode == bootstrap.EXIT_OLD_PYTHON and "Python 3.8" in too_old.stderr

    # A Python without the package and nothing to install it from: pip runs offline and fails.
    bare = Path(sys.base_prefix) / "bin" / "python3"
    empty = tmp_path / "wheels"
    empty.mkdir()
    # The venv the script would create, made here without ensurepip (slow) but with the base Python's pip.
    subprocess.run(
        [
            str(bare),
            "-m",
            "venv",
            "--without-pip",
            "--system-site-packages",
            str(tmp_path / "agent" / "venv"),
        ],
        check=True,
        timeout=60,
    )
    no_agent = run(
        render(
            tmp_path,
            python=str(bare),
            pip_spec="scalar-compute==0.1.0",
            pip_args=f"--no-index --find-links {empty}",
        ),
        tmp_path,
        PYTHONPATH="",
    )
    assert no_agent.returncode == bootstrap.EXIT_NO_AGENT, no_agent.stderr
    assert "pip install scalar-compute==0.1.0 failed" in no_agent.stderr
    assert "scalar-compute" in (tmp_path / "agent" / "install.log").read_text()

    no_pip = run(render(tmp_path, python=str(bare)), tmp_path, PYTHONPATH="")
    assert no_pip.returncode == bootstrap.EXIT_NO_AGENT and "cannot run scalar agent" in no_pip.stderr

    unreachable = run(
        render(tmp_path, python=sys.executable, controller_url=f"http://127.0.0.1:{free_port()}"), tmp_path
    )
    assert unreachable.returncode == bootstrap.EXIT_CONTROLLER_UNREACHABLE, unreachable.stderr
    assert "unreachable from this host" in unreachable.stderr
    assert not (tmp_path / "agent" / "agent.pid").exists()


def test_node_script_user_data_starts_an_agent_that_registers(sqlite_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with controller(sqlite_url, tmp_path / "data") as c:
        printed = CliRunner().invoke(
            app,
            [
                "node",
                "script",
                "--server",
                c.url,
                "--python",
                sys.executable,
                "--gpus",
                "1xA100-40GB",
                "--base64",
            ],
        )
        assert printed.exit_code == 0, printed.output
        script = base64.b64decode(printed.output.strip()).decode()
        directory = home / ".scalar-agent"
        try:
            started = run(script, home)
            assert started.returncode == 0, started.stderr
            assert "agent started" in started.stdout
            [registered] = wait_until(c.agents, 30, "the agent")
            assert [g["model"] for g in registered["facts"]["gpus"]] == ["A100"]
            assert registered["provider"] == "local"
            # The join token is single-use: running the same script again while the agent runs is refused.
            again = run(script, home)
            assert again.returncode == bootstrap.EXIT_ALREADY_RUNNING, again.stderr
        finally:
            stop_agent(directory)


def test_the_agent_prints_its_version_and_protocol() -> None:
    expected = f"scalar agent {__version__} (protocol {PROTOCOL})"
    fast = subprocess.run(
        [sys.executable, "-m", "scalar.agent", "--version"], capture_output=True, text=True, timeout=60
    )
    assert fast.returncode == 0 and fast.stdout.strip() == expected, fast.stderr
    cli = CliRunner().invoke(app, ["agent", "--version"])
    assert cli.exit_code == 0 and cli.output.strip() == expected
