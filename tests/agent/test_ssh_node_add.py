"""``scalar node add root@127.0.0.1`` against a real OpenSSH server (Debian's sshd) the test starts on a spare
loopback port with its own host key and authorized key: the package is uploaded over SFTP, the agent starts
in the background on the "host" and registers with fake GPUs, and a job with a command runs there and its
logs arrive. The error paths (wrong key, unknown host key, old Python, unreachable host and controller)
exit 2 with a message that says what to do."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalar.cli.main import app
from tests.agent.harness import controller, free_port, kill_tree_of, wait_until

pytestmark = pytest.mark.slow  # sshd and a real agent, end to end

SSHD = "/usr/sbin/sshd"
PRINT = "import os; print('gpus=' + os.environ['CUDA_VISIBLE_DEVICES'])"


@dataclass
class Sshd:
    port: int
    key: Path  # the authorized private key
    other_key: Path  # a key the server does not accept
    known_hosts: Path


def keygen(path: Path) -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, capture_output=True
    )
    return path


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    assert os.geteuid() == 0 and Path(SSHD).is_file(), "these tests start sshd as root"
    d = tmp_path / "sshd"
    d.mkdir()
    host_key = keygen(d / "host_ed25519")
    key = keygen(tmp_path / "id_ed25519")
    other = keygen(tmp_path / "other_ed25519")
    (d / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    port = free_port()
    config = d / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"PidFile {d / 'sshd.pid'}",
                "PermitRootLogin prohibit-password",
                "StrictModes no",
                "UsePAM no",
                f"AuthorizedKeysFile {d / 'authorized_keys'}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "Subsystem sftp internal-sftp",
                "",
            ]
        )
    )
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    log = open(d / "sshd.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        import socket

        def listening() -> bool:
            assert proc.poll() is None, (d / "sshd.log").read_text()
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_until(listening, 20, "sshd")
        yield Sshd(port, key, other, tmp_path / "known_hosts")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def stop_agent(remote: Path) -> None:
    pid_file = remote / "agent.pid"
    if pid_file.is_file():
        try:
            pid = int(pid_file.read_text())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                os.kill(pid, 0)
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass
    kill_tree_of(remote / "state")


def add(s: Sshd, server: str, remote: Path, *extra: str, key: Path | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(
        app,
        [
            "node",
            "add",
            "root@127.0.0.1",
            "--port",
            str(s.port),
            "--identity",
            str(key or s.key),
            "--known-hosts",
            str(s.known_hosts),
            "--remote-dir",
            str(remote),
            "--python",
            sys.executable,
            "--server",
            server,
            *extra,
        ],
    )
    return result.exit_code, result.output


def test_node_add_over_ssh_registers_the_host_and_runs_a_job(
    sqlite_url: str, tmp_path: Path, sshd: Sshd
) -> None:
    remote = tmp_path / "remote"
    with controller(sqlite_url, tmp_path / "data") as c:
        try:
            # An unknown host key is refused unless the user accepts it.
            code, out = add(sshd, c.url, remote, "--gpus", "2xH100-80GB")
            assert code == 2 and "host key" in out and "--accept-new-host-key" in out, out
            assert not remote.exists()

            code, out = add(
                sshd, c.url, remote, "--gpus", "2xH100-80GB", "--install", "copy", "--accept-new-host-key"
            )
            assert code == 0, out
            assert "[127.0.0.1]:" in sshd.known_hosts.read_text()
            [registered] = c.agents()
            node_id = registered["node_id"]
            assert f"node {node_id} registered from root@127.0.0.1: 2x H100" in out
            assert registered["facts"]["block_id"] == f"byo-{node_id}"
            assert [g["model"] for g in registered["facts"]["gpus"]] == ["H100", "H100"]
            # The agent runs from the uploaded copy of the package, in the background on the host.
            assert (remote / "lib" / "scalar" / "agent" / "node_agent.py").is_file()
            assert f"{remote}/lib/scalar/__init__.py" in (remote / "agent.log").read_text()
            assert json.loads((remote / "state" / "identity.json").read_text())["node_id"] == node_id

            job_id = c.submit(command=[sys.executable, "-c", PRINT])
            job = wait_until(lambda: c.job(job_id)["state"] == "SUCCEEDED" and c.job(job_id), 40, "the job")
            assert job["state"] == "SUCCEEDED"
            logs = wait_until(lambda: c.logs(job_id)["data"], 20, "its logs")
            uuids = {g["uuid"] for g in registered["facts"]["gpus"]}
            assert logs.strip().removeprefix("gpus=") in uuids

            # Adding it again while its agent runs is refused (the host key is known now).
            code, out = add(sshd, c.url, remote, "--gpus", "2xH100-80GB")
            assert code == 2 and "an agent already runs" in out, out
            assert len(c.agents()) == 1
        finally:
            stop_agent(remote)


def test_node_add_errors_say_what_to_fix(sqlite_url: str, tmp_path: Path, sshd: Sshd) -> None:
    remote = tmp_path / "remote"
    with controller(sqlite_url, tmp_path / "data") as c:
        try:
            code, out = add(sshd, c.url, remote, "--accept-new-host-key", key=sshd.other_key)
            assert code == 2 and "authentication failed for root@127.0.0.1" in out, out
            assert "authorized_keys" in out

            code, out = add(sshd, c.url, remote, key=tmp_path / "missing_key")
            assert code == 2 and "no such key file" in out, out

            # A host key that changed since it was saved is refused, --accept-new-host-key or not.
            kind, blob = Path(f"{sshd.other_key}.pub").read_text().split()[:2]
            sshd.known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {kind} {blob}\n")
            code, out = add(sshd, c.url, remote, "--accept-new-host-key")
            assert code == 2 and "is not the one in" in out and "ssh-keygen -R" in out, out
            sshd.known_hosts.unlink()

            closed = free_port()
            result = CliRunner().invoke(
                app,
                [
                    "node",
                    "add",
                    "root@127.0.0.1",
                    "--port",
                    str(closed),
                    "-i",
                    str(sshd.key),
                    "--server",
                    c.url,
                ],
            )
            assert result.exit_code == 2 and f"cannot reach 127.0.0.1:{closed}" in result.output

            # A Python older than 3.11 (a stand-in script that says it is 3.8).
            old = tmp_path / "python3.8"
            old.write_text("#!/bin/sh\necho 3.8\n")
            old.chmod(0o755)
            code, out = add(sshd, c.url, remote, "--accept-new-host-key", "--python", str(old))
            assert code == 2 and "Python 3.8" in out and "3.11" in out, out
            code, out = add(sshd, c.url, remote, "--python", str(tmp_path / "nopython"))
            assert code == 2 and "has no" in out and "--python" in out, out

            # The controller as the host would reach it does not answer.
            code, out = add(sshd, c.url, remote, "--controller-url", f"http://127.0.0.1:{free_port()}")
            assert code == 2 and "unreachable from this host" in out and "--controller-url" in out, out
            assert not (remote / "agent.pid").exists()
            assert c.agents() == []

            # This machine cannot reach the controller: nothing is installed on the host.
            code, out = add(sshd, f"http://127.0.0.1:{free_port()}", remote)
            assert code == 1 and "cannot reach the Scalar server" in out, out

            bad = CliRunner().invoke(app, ["node", "add", "nouser", "--server", c.url])
            assert bad.exit_code == 2 and "user@host" in bad.output
            bad = CliRunner().invoke(
                app, ["node", "add", "root@127.0.0.1", "--gpus", "eight", "--server", c.url]
            )
            assert bad.exit_code == 2 and "--gpus" in bad.output
        finally:
            stop_agent(remote)
            shutil.rmtree(remote, ignore_errors=True)
