"""``scalar agent``: run the node agent; ``scalar join-token``: create a one-time token for one.

    scalar join-token --server http://controller:8000 [--price-per-gpu-hour 1.20]   # prints sjt_...
    scalar agent --controller http://controller:8000 --join-token sjt_... [--fake-gpus 8xH100-80GB]

The agent registers the host (a user-owned host becomes a fixed-capacity block), then heartbeats and runs
what the controller places on it (docs/agent.md). Exit codes: 0 stopped by SIGTERM/SIGINT, 2 bad arguments,
3 refused by the controller (a bad or spent join token, an incompatible version: the message says which
version to run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import typer

from scalar.agent.facts import FAKE_GPUS_ENV, FactsError, parse_fake_gpus, ram_gb
from scalar.agent.shim import private_dir
from scalar.cli.errors import fail, user_errors
from scalar.cli.jobs import call_server, server_option
from scalar.cli.output import print_json
from scalar.wire.agent import JoinTokenOut

REFUSED = 3
DEFAULT_STATE_DIR = Path.home() / ".scalar-agent"
MAX_PRICE_PER_GPU_HOUR = Decimal(1000)


def byo_price(text: str) -> str:
    """``--price-per-gpu-hour``: a finite amount of USD from 0 to 1000, kept exact (sent as a string)."""
    try:
        price = Decimal(text.strip().removeprefix("$"))
    except InvalidOperation:
        price = Decimal("NaN")
    if not price.is_finite() or not 0 <= price <= MAX_PRICE_PER_GPU_HOUR:
        fail(
            f"--price-per-gpu-hour {text!r}: give USD per GPU-hour from 0 to {MAX_PRICE_PER_GPU_HOUR}, e.g. 1.20"
        )
    return str(price)


def _print_version(value: bool) -> None:
    if value:
        from scalar.agent.__main__ import version_line

        sys.stdout.write(version_line() + "\n")
        raise typer.Exit(0)


def register(app: typer.Typer) -> None:
    @app.command("agent")
    @user_errors
    def agent(
        controller: str = typer.Option(..., "--controller", help="URL of the Scalar API the agent calls."),
        join_token: str | None = typer.Option(
            None, "--join-token", envvar="SCALAR_JOIN_TOKEN", help="One-time token from `scalar join-token`."
        ),
        state_dir: Path = typer.Option(
            DEFAULT_STATE_DIR,
            "--state-dir",
            help="Journal, identity and job output (default ~/.scalar-agent).",
        ),
        fake_gpus: str | None = typer.Option(
            None,
            "--fake-gpus",
            envvar="SCALAR_FAKE_GPUS",
            help="Fake GPUs when NVML finds none: 8xH100-80GB.",
        ),
        hostname: str | None = typer.Option(
            None, "--hostname", help="The name to register (default: hostname)."
        ),
        instance_id: str | None = typer.Option(None, "--instance-id", help="The provider's instance id."),
        contract_expires_at: str | None = typer.Option(
            None, "--contract-expires-at", help="ISO 8601 time the host's contract ends (jobs stop before)."
        ),
        heartbeat_s: float | None = typer.Option(
            None, "--heartbeat-s", help="Seconds between heartbeats (default: what the controller says)."
        ),
        job_user: str | None = typer.Option(
            None,
            "--job-user",
            envvar="SCALAR_AGENT_JOB_USER",
            help="per-tenant (default; needs root): each tenant's jobs under a uid of their own; "
            "same-user: as the agent's user.",
        ),
        sandbox: str = typer.Option(
            "auto",
            "--sandbox",
            envvar="SCALAR_AGENT_SANDBOX",
            help="bwrap: jobs under bubblewrap; auto (default): bwrap when root and installed; none.",
        ),
        uid_range: str = typer.Option(
            "200000-265535", "--uid-range", help="uids of per-tenant jobs, LOW-HIGH."
        ),
        hide: list[str] = typer.Option([], "--hide", help="A path jobs may not see (repeat)."),
        pass_env: list[str] = typer.Option(
            [],
            "--pass-env",
            help="A variable of the agent's passed to jobs (repeat; or $SCALAR_AGENT_PASS_ENV, a,b).",
        ),
        log_max_bytes: int | None = typer.Option(
            None,
            "--log-max-bytes-per-attempt",
            min=1,
            help="Output shipped per attempt (default 64 MiB); the rest is dropped and the log says so.",
        ),
        agent_version: str | None = typer.Option(None, "--agent-version", hidden=True),
        agent_protocol: int | None = typer.Option(None, "--agent-protocol", hidden=True),
        version: bool = typer.Option(
            False,
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print the agent's version and protocol, and exit.",
        ),
    ) -> None:
        """Run the node agent: register this host with the controller and run the work placed on it."""
        from scalar.agent import isolation as iso_mod
        from scalar.agent.node_agent import AgentOptions, run_agent

        if job_user is not None and job_user not in iso_mod.JOB_USERS:
            fail(f"--job-user {job_user!r}: use per-tenant or same-user")
        if sandbox not in iso_mod.SANDBOXES:
            fail(f"--sandbox {sandbox!r}: use auto, bwrap or none")
        try:
            uids = iso_mod.parse_uid_range(uid_range)
        except iso_mod.IsolationError as err:
            fail(f"--uid-range: {err}")
        options = AgentOptions(
            controller=controller,
            state_dir=state_dir,
            join_token=join_token,
            fake_gpus=fake_gpus,
            hostname=hostname,
            instance_id=instance_id,
            contract_expires_at=contract_expires_at,
            heartbeat_s=heartbeat_s,
            job_user=job_user,
            sandbox=sandbox,
            uid_range=uids,
            hide=tuple(hide),
            pass_env=tuple(pass_env)
            or tuple(n for n in os.environ.get("SCALAR_AGENT_PASS_ENV", "").split(",") if n),
        )
        if log_max_bytes is not None:
            options.log_max_bytes_per_attempt = log_max_bytes
        if agent_version is not None:
            options.version = agent_version
        if agent_protocol is not None:
            options.protocol = agent_protocol
        code = run_agent(options)
        if code:
            raise typer.Exit(code)

    @app.command("join-token")
    @user_errors
    def join_token(
        provider: str = typer.Option("local", "--provider", help="Provider name of the host's block."),
        tier: str = typer.Option("FAST", "--tier", help="FAST or FLEX: the tier of the host's capacity."),
        ttl_s: float = typer.Option(3600.0, "--ttl-s", help="Seconds the token stays valid."),
        node_id: str | None = typer.Option(None, "--node-id", help="Attach the agent to this bought node."),
        price: str = typer.Option(
            "0",
            "--price-per-gpu-hour",
            help="USD per GPU-hour the host's block is recorded at (costs, packing); not with --node-id.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the token as JSON."),
        server: str = server_option(),
    ) -> None:
        """Create a one-time join token for `scalar agent`."""
        amount = byo_price(price)
        if node_id is not None and Decimal(amount) != 0:
            fail(
                "--price-per-gpu-hour is for a host of your own: a bought node (--node-id) has its block's price"
            )
        body = {
            "provider": provider,
            "tier": tier.upper(),
            "ttl_s": ttl_s,
            "node_id": node_id,
            "price_per_gpu_hour": amount,
        }
        created = call_server(server, lambda c: c._call("POST", "/agents/join-tokens", json=body))
        if as_json:
            print_json(created)
            return
        sys.stdout.write(f"{JoinTokenOut.model_validate(created).token}\n")


LOCAL_GPU_MODEL = "H100-80GB"
LOCAL_MAX_GPUS = 8
# What a fake GPU of the local agent needs of the machine: a GPU server's usual share (and what the demo's
# jobs ask per GPU), so the node never offers GPUs its CPUs and memory could not feed.
LOCAL_CPU_PER_GPU = 4
LOCAL_RAM_GB_PER_GPU = 32.0


def local_fake_gpus(cpus: int, ram_gb: float, wanted: str | None = None) -> str:
    """The fake GPUs of `scalar up --demo`'s local agent: ``wanted`` ($SCALAR_FAKE_GPUS, ``8xH100-80GB``)
    when set, else as many H100s as this machine's ``cpus`` and ``ram_gb`` feed at ``LOCAL_CPU_PER_GPU``
    and ``LOCAL_RAM_GB_PER_GPU`` each, at least one (so a command can run) and at most eight. A 2-vCPU
    machine gets one: eight would be capacity that no job asking a server's share of CPU could use."""
    if wanted:
        parse_fake_gpus(wanted)  # a bad value is refused here, with the expected shape
        return wanted
    fed = min(cpus // LOCAL_CPU_PER_GPU, int(ram_gb // LOCAL_RAM_GB_PER_GPU))
    return f"{max(1, min(LOCAL_MAX_GPUS, fed))}x{LOCAL_GPU_MODEL}"


def local_agent_gpus(environ: Mapping[str, str]) -> str:
    """``local_fake_gpus`` for this machine and environment (a bad $SCALAR_FAKE_GPUS: a clear error)."""
    try:
        return local_fake_gpus(os.cpu_count() or 1, ram_gb(), environ.get(FAKE_GPUS_ENV) or None)
    except FactsError as err:
        fail(f"${FAKE_GPUS_ENV}: {err}")


# What the demo's local agent inherits of `scalar up`'s environment: nothing that holds a credential
# ($SCALAR_SECRET_KEY, $SCALAR_DATABASE_URL, tokens) or that a job must not see.
LOCAL_AGENT_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "HOME", "PYTHONPATH", "SCALAR_AGENT_NO_CGROUPS")


def local_agent_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The scrubbed environment of `scalar up --demo`'s agent."""
    return {k: environ[k] for k in LOCAL_AGENT_ENV if k in environ}


def local_isolation_args(settings: Any, euid: int) -> tuple[list[str], str | None]:
    """`scalar agent` flags from ``[agents]``, and a warning when a non-root `scalar up` falls back to
    ``same-user`` (so the demo keeps running jobs)."""
    job_user = str(getattr(settings, "agent_job_user", "per-tenant"))
    warning = None
    if job_user == "per-tenant" and euid != 0:
        job_user = "same-user"
        warning = (
            f"warning: running as uid {euid}, not root: the local agent runs jobs as this same user "
            "(job_user = same-user), so a job can read what you can, this data dir included; run as root "
            "for per-tenant uids and a sandbox (docs/security.md)"
        )
    low, high = getattr(settings, "agent_uid_range", (200000, 265535))
    args = [
        "--job-user",
        job_user,
        "--sandbox",
        str(getattr(settings, "agent_sandbox", "auto")),
        "--uid-range",
        f"{low}-{high}",
    ]
    cap = getattr(settings, "agent_log_max_bytes_per_attempt", None)
    if cap is not None:
        args += ["--log-max-bytes-per-attempt", str(int(cap))]
    return args, warning


def start_local_agent(
    control_plane: Any, url: str, data_dir: Path, settings: Any = None, gpus: str | None = None
) -> subprocess.Popen[bytes]:
    """``scalar up --demo``: a ``scalar agent`` process with fake GPUs against this server, registered as a
    user-owned fixed-capacity block of provider ``local`` (its state dir is ``<data dir>/agent``, so a
    restart resumes the same node and re-adopts its jobs). Its output goes to ``<data dir>/agent.log``.

    It starts with a scrubbed environment (``LOCAL_AGENT_ENV``), runs jobs as ``[agents]`` says (a
    non-root `scalar up` falls back to same-user, with a warning on stderr), and hides the data dir from
    sandboxed jobs. ``gpus``: its fake GPUs (default: ``local_agent_gpus``, what this machine feeds)."""
    from scalar.wire.agent import JoinTokenRequest

    data_dir = Path(data_dir)
    private_dir(data_dir)
    state_dir = private_dir(data_dir / "agent")
    args = [
        "--controller",
        url,
        "--state-dir",
        str(state_dir),
        "--fake-gpus",
        gpus or local_agent_gpus(os.environ),
    ]
    isolation, warning = local_isolation_args(settings, os.geteuid())
    if warning is not None:
        sys.stderr.write(warning + "\n")
    args += [*isolation, "--hide", str(data_dir.resolve())]
    if "PYTHONPATH" in os.environ:
        args += ["--pass-env", "PYTHONPATH"]  # a source checkout: endpoint workers import the same code
    if not (state_dir / "identity.json").is_file():
        token = control_plane.agents.create_join_token(JoinTokenRequest(provider="local", ttl_s=600))
        args += ["--join-token", token.token, "--hostname", "local"]
    fd = os.open(data_dir / "agent.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    log = open(fd, "ab")  # noqa: SIM115 - the child owns it
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "scalar.agent", *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=local_agent_env(os.environ),
        )
    finally:
        log.close()


def stop_local_agent(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)
