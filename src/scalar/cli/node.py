"""``scalar node add user@host``: bring your own node over SSH; ``scalar node script``: the startup script.

    scalar node add root@gpu-box [--port 22] [--identity ~/.ssh/id_ed25519] [--gpus 8xH100-80GB]
    scalar node script --server http://controller:8000 [--base64]     # for user data / a start command
    scalar node remove NODE [--force] [--wait-s 60] [--ssh root@gpu-box]   # drain it, end its block (admin)

``node add`` connects with paramiko, checks the host's Python (>= 3.11), installs the agent, creates a
one-time join token, starts ``scalar agent`` in the background on the host (``setsid nohup``, output in
``<remote dir>/agent.log``) and waits until the controller lists the node: a user-owned, fixed-capacity block
("bring your own node", at ``--price-per-gpu-hour``, default 0). The install (``--install``):

- ``auto`` (default): the host's Python (``--python``, default ``python3``) is used as it is when it already
  imports ``scalar`` of this version; otherwise as ``copy``;
- ``copy``: this machine's ``scalar`` package is uploaded over SFTP and unpacked in ``<remote dir>/lib``
  (first on the agent's ``PYTHONPATH``); the agent's dependencies (httpx, pydantic) come from the host's
  Python, so pass ``--python`` of a venv that has them, or ``--pip-spec`` to ``pip install`` the package
  (with its dependencies) into ``<remote dir>/venv`` instead: ``scalar-compute==VERSION``, the base install,
  is the agent alone (no FastAPI, SQLAlchemy, numpy, botocore... on the host);
- ``none``: the host's Python must already have this version.

Nothing is downloaded unless ``--pip-spec`` asks for it (``--pip-args "--no-index --find-links DIR"`` keeps
even that offline). Exit codes: 0 registered, 2 the host, its key, its Python or the controller refused
(one ``error:`` line says which and how to fix it), 1 the controller failed or this machine cannot reach it.
"""

from __future__ import annotations

import io
import json
import shlex
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import typer

from scalar import __version__
from scalar.cli.errors import fail, user_errors
from scalar.cli.jobs import call_server, server_option
from scalar.cli.output import print_json
from scalar.domain.money import usd_text
from scalar.providers import bootstrap
from scalar.wire.agent import AgentOut, AgentsOut, JoinTokenOut, NodeRemoveOut

DEFAULT_REMOTE_DIR = "~/.scalar-agent"
DEFAULT_KNOWN_HOSTS = Path.home() / ".ssh" / "known_hosts"
INSTALL_MODES = ("auto", "copy", "none")
CONNECT_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 120.0


def _split_target(target: str) -> tuple[str, str]:
    user, sep, host = target.rpartition("@")
    if not sep or not user or not host:
        fail(f"target {target!r}: give it as user@host (e.g. root@10.0.0.5)")
    return user, host


@dataclass
class Remote:
    """One SSH connection to the host: run commands, upload files."""

    client: Any  # paramiko.SSHClient
    label: str

    def run(self, command: str, timeout_s: float = COMMAND_TIMEOUT_S) -> tuple[int, str, str]:
        import paramiko

        try:
            _stdin, stdout, stderr = self.client.exec_command(command, timeout=timeout_s)
            out = stdout.read().decode(errors="replace")
            err = stderr.read().decode(errors="replace")
            return stdout.channel.recv_exit_status(), out, err
        except (OSError, paramiko.SSHException) as exc:
            fail(
                f"{self.label}: a command over SSH failed or timed out after {timeout_s:g} s ({exc or type(exc).__name__})"
            )

    def _sftp(self) -> Any:
        import paramiko

        try:
            return self.client.open_sftp()
        except (OSError, paramiko.SSHException) as exc:
            fail(
                f"{self.label}: SFTP is not available ({exc or type(exc).__name__}): enable the sftp "
                "subsystem in the host's sshd_config"
            )

    def put(self, data: bytes, path: str, mode: int = 0o600) -> None:
        with self._sftp() as sftp:
            try:
                with sftp.open(path, "wb") as f:
                    f.write(data)
                    f.chmod(mode)
            except OSError as exc:
                fail(f"{self.label}: cannot write {path} ({exc})")

    def read(self, path: str) -> bytes | None:
        with self._sftp() as sftp:
            try:
                with sftp.open(path, "rb") as f:
                    return bytes(f.read())
            except OSError:
                return None

    def home(self) -> str:
        with self._sftp() as sftp:
            return str(sftp.normalize("."))


def connect(
    user: str,
    host: str,
    port: int,
    identity: Path | None,
    known_hosts: Path,
    accept_new_host_key: bool,
) -> Remote:
    """An SSH connection, or exit 2 with what went wrong (unreachable, host key, authentication)."""
    try:
        import paramiko
    except ModuleNotFoundError:
        fail(
            "scalar node add connects over SSH with paramiko, not installed: pip install 'scalar-compute[ssh]'"
        )

    label = f"{user}@{host}:{port}"
    if identity is not None and not identity.is_file():
        fail(f"--identity {identity}: no such key file")
    client = paramiko.SSHClient()
    if known_hosts.is_file():
        try:
            client.load_host_keys(str(known_hosts))
        except (OSError, paramiko.SSHException) as err:
            fail(f"--known-hosts {known_hosts}: cannot read it ({err})")
    client.set_missing_host_key_policy(
        paramiko.AutoAddPolicy() if accept_new_host_key else paramiko.RejectPolicy()
    )
    try:
        client.connect(
            host,
            port=port,
            username=user,
            key_filename=str(identity) if identity else None,
            look_for_keys=identity is None,
            allow_agent=identity is None,
            timeout=CONNECT_TIMEOUT_S,
            banner_timeout=CONNECT_TIMEOUT_S,
            auth_timeout=CONNECT_TIMEOUT_S,
        )
    except paramiko.BadHostKeyException as err:
        client.close()
        fail(
            f"the host key of {host}:{port} is not the one in {known_hosts} (got {err.key.get_name()} "
            f"{err.key.get_fingerprint().hex()}): if the host was reinstalled, remove its old line "
            f"(ssh-keygen -R '[{host}]:{port}' -f {known_hosts}) and run again with --accept-new-host-key"
        )
    except paramiko.PasswordRequiredException:
        client.close()
        fail(f"--identity {identity} is encrypted: decrypt it or load it into ssh-agent and omit --identity")
    except paramiko.AuthenticationException as err:
        client.close()
        key = f"key {identity}" if identity else "your SSH agent's and ~/.ssh keys"
        fail(
            f"authentication failed for {label} with {key} ({err}): add the public key to the host's "
            "~/.ssh/authorized_keys or pass --identity with the right private key"
        )
    except paramiko.SSHException as err:
        client.close()
        if "not found in known_hosts" in str(err):
            fail(
                f"the host key of {host}:{port} is unknown (not in {known_hosts}): check it and run again "
                "with --accept-new-host-key, or add it first (ssh-keyscan -p PORT HOST >> known_hosts)"
            )
        fail(f"SSH to {label} failed: {err}")
    except (OSError, EOFError) as err:
        client.close()
        why = str(err) or type(err).__name__
        fail(f"cannot reach {host}:{port} over SSH ({why}): check the address, --port and the firewall")
    if accept_new_host_key:
        known_hosts.parent.mkdir(parents=True, exist_ok=True)
        client.save_host_keys(str(known_hosts))
    return Remote(client, label)


def _remote_path(path: str, home: str) -> str:
    if path == "~":
        return home
    if path.startswith("~/"):
        return f"{home.rstrip('/')}/{path[2:]}"
    return path


def package_archive() -> bytes:
    """This machine's ``scalar`` package as a .tar.gz (``scalar/...``), without caches."""
    import scalar

    root = Path(scalar.__file__).parent
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(root.rglob("*")):
            if "__pycache__" in path.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            tar.add(path, arcname=str(Path("scalar") / path.relative_to(root)), recursive=False)
    return buffer.getvalue()


def check_python(remote: Remote, python: str) -> str:
    """The host Python's ``major.minor``, or exit 2 (missing, too old)."""
    py = shlex.quote(python)
    code, out, err = remote.run(
        f"command -v {py} >/dev/null 2>&1 || exit 127; {py} -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'"
    )
    if code != 0:
        fail(
            f"{remote.label} has no {python} ({err.strip() or 'command not found'}): install Python 3.11 or "
            "newer there, or pass --python PATH"
        )
    version = out.strip()
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:
        fail(f"{python} on {remote.label} printed {version!r} as its version")
    if (major, minor) < bootstrap.MIN_PYTHON:
        fail(
            f"{python} on {remote.label} is Python {version}; the agent needs Python 3.11 or newer: install "
            "it, or pass --python PATH of a newer one"
        )
    return version


def has_agent(remote: Remote, python: str) -> bool:
    code, _out, _err = remote.run(
        f"{shlex.quote(python)} -c 'import sys, scalar, scalar.agent.node_agent; "
        f"sys.exit(scalar.__version__ != sys.argv[1])' {shlex.quote(__version__)}"
    )
    return code == 0


def upload_package(remote: Remote, python: str, directory: str) -> None:
    """Unpack this machine's ``scalar`` package in ``directory/lib`` on the host."""
    remote.run(f"mkdir -p {shlex.quote(directory)} && chmod 700 {shlex.quote(directory)}")
    archive = f"{directory}/scalar-{__version__}.tar.gz"
    remote.put(package_archive(), archive)
    lib = shlex.quote(f"{directory}/lib")
    code, _out, err = remote.run(
        f"rm -rf {lib} && mkdir -p {lib} && {shlex.quote(python)} -c "
        "'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "
        f"{shlex.quote(archive)} {lib}"
    )
    if code != 0:
        fail(f"cannot unpack the agent on {remote.label}: {err.strip()}")
    code, _out, err = remote.run(
        f"PYTHONPATH={lib} {shlex.quote(python)} -c 'import scalar.agent.node_agent'"
    )
    if code != 0:
        last = [line for line in err.splitlines() if line.strip()]
        fail(
            f"{python} on {remote.label} lacks the agent's dependencies ({last[-1] if last else code}): pass "
            "--python of a venv that has httpx and pydantic (python3 -m venv ~/.scalar-agent/venv && "
            f"~/.scalar-agent/venv/bin/pip install httpx pydantic), or --pip-spec scalar-compute=={__version__} "
            "(the base install: the agent and its dependencies, no server packages)"
        )


def running_agent(remote: Remote, directory: str) -> str | None:
    """The pid of an agent already started from ``directory`` on the host, if it still runs."""
    pid_file = shlex.quote(f"{directory}/agent.pid")
    code, out, _err = remote.run(f'test -f {pid_file} && kill -0 "$(cat {pid_file})" && cat {pid_file}')
    return out.strip() if code == 0 else None


def wait_registered(remote: Remote, directory: str, server: str, timeout_s: float) -> tuple[str, AgentOut]:
    """The node id the agent wrote once registered, and the controller's record of it; exit 2 when the
    agent dies or nothing registers in time."""
    deadline = time.monotonic() + timeout_s
    node_id: str | None = None
    while time.monotonic() < deadline:
        if node_id is None:
            raw = remote.read(f"{directory}/state/identity.json")
            if raw:
                try:
                    node_id = json.loads(raw).get("node_id")
                except ValueError:
                    node_id = None
        if node_id is not None:
            agents = AgentsOut.model_validate(call_server(server, lambda c: c._call("GET", "/agents")))
            for agent in agents.agents:
                if agent.node_id == node_id:
                    return node_id, agent
        pid = shlex.quote(f"{directory}/agent.pid")
        code, _out, _err = remote.run(f'kill -0 "$(cat {pid})" 2>/dev/null')
        if code != 0:
            _c, tail, _e = remote.run(f"tail -n 5 {shlex.quote(directory + '/agent.log')}")
            last = [line for line in tail.splitlines() if line.strip()]
            fail(
                f"the agent on {remote.label} exited before it registered: "
                f"{last[-1] if last else 'no output'} (log: {directory}/agent.log)"
            )
        time.sleep(0.5)
    fail(
        f"the agent on {remote.label} did not register within {timeout_s:g} s "
        f"(log: {directory}/agent.log on the host)"
    )


SSH_REMOVE_WAIT_S = 300.0  # `node remove --ssh` without --wait-s: how long the node may take to drain
AGENT_EXIT_WAIT_S = 40.0  # a removed node's agent stops its assignments (10 s grace) and exits by itself


def stop_remote_agent(
    target: tuple[str, str], port: int, identity: Path | None, known_hosts: Path, remote_dir: str
) -> str:
    """After a removal: wait for the host's agent (``<remote dir>/agent.pid``) to exit by itself, SIGTERM it
    if it does not; say what happened."""
    user, host = target
    remote = connect(user, host, port, identity, known_hosts, False)
    try:
        directory = _remote_path(remote_dir, remote.home())
        deadline = time.monotonic() + AGENT_EXIT_WAIT_S
        pid = running_agent(remote, directory)
        while pid is not None and time.monotonic() < deadline:
            time.sleep(0.5)
            pid = running_agent(remote, directory)
        if pid is None:
            return f"{remote.label}: the agent in {directory} has stopped"
        remote.run(f"kill -TERM {shlex.quote(pid)}")
        return f"{remote.label}: the agent in {directory} (pid {pid}) was still running: sent SIGTERM"
    finally:
        remote.client.close()


def register(app: typer.Typer) -> None:
    node_app = typer.Typer(
        help="Bring your own nodes: install the agent on a host over SSH, or print the startup script.",
        no_args_is_help=True,
    )

    @node_app.command("add")
    @user_errors
    def add(
        target: str = typer.Argument(..., help="user@host of the machine to add."),
        port: int = typer.Option(22, "--port", help="SSH port."),
        identity: Path | None = typer.Option(
            None, "--identity", "-i", help="Private key (default: ssh-agent, then ~/.ssh keys)."
        ),
        gpus: str | None = typer.Option(
            None, "--gpus", help="Fake GPUs for a host without NVIDIA GPUs: 8xH100-80GB."
        ),
        python: str = typer.Option("python3", "--python", help="The host's Python (3.11+) to run the agent."),
        install: str = typer.Option(
            "auto", "--install", help="auto, copy or none (see `scalar node --help`)."
        ),
        pip_spec: str | None = typer.Option(
            None, "--pip-spec", help="pip install this (e.g. scalar-compute==0.1.0) into a venv on the host."
        ),
        pip_args: str = typer.Option(
            "", "--pip-args", help='Extra pip options: "--no-index --find-links D".'
        ),
        remote_dir: str = typer.Option(
            DEFAULT_REMOTE_DIR,
            "--remote-dir",
            help="The agent's directory on the host (state, log, package).",
        ),
        known_hosts: Path = typer.Option(
            DEFAULT_KNOWN_HOSTS, "--known-hosts", help="known_hosts file checked (and written) for host keys."
        ),
        accept_new_host_key: bool = typer.Option(
            False, "--accept-new-host-key", help="Trust an unknown host key and save it in --known-hosts."
        ),
        controller_url: str | None = typer.Option(
            None, "--controller-url", help="The controller's URL as the host reaches it (default: --server)."
        ),
        provider: str = typer.Option("local", "--provider", help="Provider name of the host's block."),
        tier: str = typer.Option("FAST", "--tier", help="FAST or FLEX."),
        price: str = typer.Option(
            "0", "--price-per-gpu-hour", help="USD per GPU-hour the host's block is recorded at (default 0)."
        ),
        hostname: str | None = typer.Option(
            None, "--hostname", help="Name to register (default: the host's)."
        ),
        timeout_s: float = typer.Option(60.0, "--timeout-s", help="Seconds to wait for the registration."),
        as_json: bool = typer.Option(False, "--json", help="Print the registered agent as JSON."),
        server: str = server_option(),
    ) -> None:
        """Install and start the agent on a host over SSH; it joins as a fixed-capacity block."""
        from scalar.agent.facts import FactsError, parse_fake_gpus
        from scalar.cli.agent import byo_price

        user, host = _split_target(target)
        if install not in INSTALL_MODES:
            fail(f"--install {install!r}: use one of {', '.join(INSTALL_MODES)}")
        if not 0 < port < 65536:
            fail(f"--port {port}: use 1-65535")
        if gpus:
            try:
                parse_fake_gpus(gpus)
            except FactsError as err:
                fail(f"--gpus: {err}")
        if tier.upper() not in ("FAST", "FLEX"):
            fail(f"--tier {tier!r}: use FAST or FLEX")
        amount = byo_price(price)
        url = (controller_url or server).rstrip("/")
        # The token first: a controller this machine cannot reach fails before anything is installed.
        body = {
            "provider": provider,
            "tier": tier.upper(),
            "ttl_s": 900.0,
            "node_id": None,
            "price_per_gpu_hour": amount,
        }
        token = JoinTokenOut.model_validate(
            call_server(server, lambda c: c._call("POST", "/agents/join-tokens", json=body))
        )
        remote = connect(user, host, port, identity, known_hosts, accept_new_host_key)
        try:
            say = sys.stderr.write
            home = remote.home()
            directory = _remote_path(remote_dir, home)
            py = _remote_path(python, home)
            version = check_python(remote, py)
            say(f"{remote.label}: Python {version}\n")
            pid = running_agent(remote, directory)
            if pid is not None:
                fail(
                    f"{remote.label}: an agent already runs from {directory} (pid {pid}); stop it first "
                    f"(kill {pid}), or pass another --remote-dir"
                )
            mode = install
            if mode == "auto":
                mode = "none" if has_agent(remote, py) else "copy"
            if mode == "copy" and pip_spec is None:
                upload_package(remote, py, directory)
                say(f"{remote.label}: scalar {__version__} unpacked in {directory}/lib\n")
            elif mode == "none" and not has_agent(remote, py):
                fail(f"{py} on {remote.label} has no scalar {__version__}: use --install copy or --pip-spec")
            script = bootstrap.render_startup_script(
                bootstrap.AgentBootstrap(
                    controller_url=url,
                    join_token=token.token,
                    directory=directory,
                    python=py,
                    pip_spec=pip_spec,
                    pip_args=pip_args,
                    fake_gpus=gpus,
                    hostname=hostname,
                )
            )
            remote.run(f"mkdir -p {shlex.quote(directory)} && chmod 700 {shlex.quote(directory)}")
            script_path = f"{directory}/bootstrap.sh"
            remote.put(script.encode(), script_path, 0o700)
            code, out, errors = remote.run(f"bash {shlex.quote(script_path)}")
            if code != 0:
                lines = [line for line in errors.splitlines() if line.strip()]
                meaning = bootstrap.EXIT_MEANINGS.get(code, f"the bootstrap script failed ({code})")
                detail = lines[-1].removeprefix("error: ") if lines else meaning
                if code == bootstrap.EXIT_CONTROLLER_UNREACHABLE:
                    detail += f" (pass --controller-url with an address {host} can reach)"
                fail(f"{remote.label}: {detail}")
            say(f"{remote.label}: {out.strip()}\n")
            node_id, agent = wait_registered(remote, directory, server, timeout_s)
        finally:
            remote.client.close()
        if as_json:
            print_json(agent.model_dump(mode="json"))
            return
        facts = agent.facts
        found = facts.get("gpus") or []
        shape = f"{len(found)}x {found[0]['model']} {found[0]['memory_gb']:g} GB" if found else "no GPUs"
        sys.stdout.write(
            f"node {node_id} registered from {user}@{host}: {shape}, {facts.get('cpu_count')} CPUs, "
            f"{facts.get('ram_gb', 0):.0f} GB RAM; fixed block {facts.get('block_id')} ({provider}, "
            f"{usd_text(amount)}/GPU-h); agent log {directory}/agent.log on the host\n"
        )

    @node_app.command("script")
    @user_errors
    def script(
        controller_url: str | None = typer.Option(
            None, "--controller-url", help="The controller's URL as the node reaches it (default: --server)."
        ),
        node_id: str | None = typer.Option(None, "--node-id", help="Attach the agent to this bought node."),
        provider: str = typer.Option(
            "local", "--provider", help="Provider of the block (without --node-id)."
        ),
        fake_gpus: str | None = typer.Option(None, "--gpus", help="Fake GPUs: 8xH100-80GB."),
        python: str = typer.Option("python3", "--python", help="The node's Python (3.11+)."),
        pip_spec: str = typer.Option(
            f"scalar-compute=={__version__}", "--pip-spec", help="What pip installs when the Python lacks it."
        ),
        pip_args: str = typer.Option("", "--pip-args", help="Extra pip options."),
        ttl_s: float = typer.Option(3600.0, "--ttl-s", help="Seconds the script's join token stays valid."),
        b64: bool = typer.Option(False, "--base64", help="Print it base64-encoded (cloud-init user data)."),
        server: str = server_option(),
    ) -> None:
        """Print a startup script (with a fresh join token) that installs and starts the agent on a node."""
        body = {"provider": provider, "tier": "FAST", "ttl_s": ttl_s, "node_id": node_id}
        token = JoinTokenOut.model_validate(
            call_server(server, lambda c: c._call("POST", "/agents/join-tokens", json=body))
        )
        text = bootstrap.render_startup_script(
            bootstrap.AgentBootstrap(
                controller_url=(controller_url or server).rstrip("/"),
                join_token=token.token,
                python=python,
                pip_spec=pip_spec,
                pip_args=pip_args,
                fake_gpus=fake_gpus,
            )
        )
        sys.stdout.write((bootstrap.user_data_b64(text) + "\n") if b64 else text)

    @node_app.command("remove")
    @user_errors
    def remove(
        node_id: str = typer.Argument(..., help="The node id of a host you added (see `scalar nodes`)."),
        force: bool = typer.Option(
            False, "--force", help="Requeue its running jobs now (as when a node is lost) instead of waiting."
        ),
        wait_s: float = typer.Option(
            0.0, "--wait-s", help="Wait up to this long until its block has ended and its agent is refused."
        ),
        ssh: str | None = typer.Option(
            None,
            "--ssh",
            help="user@host the node was added from: once removed, make sure its agent stopped (waits).",
        ),
        port: int = typer.Option(22, "--port", help="SSH port (with --ssh)."),
        identity: Path | None = typer.Option(None, "--identity", "-i", help="Private key (with --ssh)."),
        remote_dir: str = typer.Option(
            DEFAULT_REMOTE_DIR, "--remote-dir", help="The agent's directory on the host (with --ssh)."
        ),
        known_hosts: Path = typer.Option(
            DEFAULT_KNOWN_HOSTS, "--known-hosts", help="known_hosts file checked for the host key."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the answer as JSON."),
        server: str = server_option(),
    ) -> None:
        """Remove a host you added (admin): nothing new runs there, its block ends, its agent stops."""
        if not 0 <= wait_s <= 86_400:
            fail(f"--wait-s {wait_s:g}: use 0 to 86400 seconds")
        target = None
        if ssh is not None:
            target = _split_target(ssh)
            if not 0 < port < 65536:
                fail(f"--port {port}: use 1-65535")
            wait_s = wait_s or SSH_REMOVE_WAIT_S  # the agent is stopped only once the node is removed
        path = f"/agents/{quote(node_id, safe='')}/remove"
        answer = NodeRemoveOut.model_validate(
            call_server(server, lambda c: c._call("POST", path, json={"force": force}))
        )
        deadline = time.monotonic() + wait_s
        while answer.state != "removed" and time.monotonic() < deadline:
            time.sleep(1.0)
            agents = AgentsOut.model_validate(call_server(server, lambda c: c._call("GET", "/agents")))
            found = next((a for a in agents.agents if a.node_id == node_id), None)
            if found is not None and found.lease_state == "removed":
                answer = answer.model_copy(
                    update={
                        "state": "removed",
                        "message": f"node {node_id} removed: its block has "
                        "ended and its agent's token is refused",
                    }
                )
        if as_json:
            print_json(answer.model_dump(mode="json"))
        else:
            sys.stdout.write(f"{answer.message}\n")
        if wait_s and answer.state != "removed":
            fail(f"node {node_id} is still {answer.state} after {wait_s:g} s (its jobs run on)", 1)
        if target is not None:
            sys.stderr.write(stop_remote_agent(target, port, identity, known_hosts, remote_dir) + "\n")

    app.add_typer(node_app, name="node")
