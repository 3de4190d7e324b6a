"""``scalar agent``: run the node agent; ``scalar join-token``: create a one-time token for one.

    scalar join-token --server http://controller:8000 [--price-per-gpu-hour 1.20]   # prints sjt_...
    scalar agent --controller http://controller:8000 --join-token sjt_... [--fake-gpus 8xH100-80GB]

The agent registers the host (a user-owned host becomes a fixed-capacity block), then heartbeats and runs
what the controller places on it (docs/agent.md). Exit codes: 0 stopped by SIGTERM/SIGINT, 2 bad arguments,
3 refused by the controller (a bad or spent join token, an incompatible version: the message says which
version to run).
"""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import typer

from scalar.cli.errors import fail, user_errors
from scalar.cli.jobs import call_server, server_option
from scalar.cli.output import print_json

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
        from scalar.agent.node_agent import AgentOptions, run_agent

        options = AgentOptions(
            controller=controller,
            state_dir=state_dir,
            join_token=join_token,
            fake_gpus=fake_gpus,
            hostname=hostname,
            instance_id=instance_id,
            contract_expires_at=contract_expires_at,
            heartbeat_s=heartbeat_s,
        )
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
        sys.stdout.write(f"{created['token']}\n")


LOCAL_FAKE_GPUS = "8xH100-80GB"


def start_local_agent(control_plane: Any, url: str, data_dir: Path) -> subprocess.Popen[bytes]:
    """``scalar up --demo``: a ``scalar agent`` process with fake GPUs against this server, registered as a
    user-owned fixed-capacity block of provider ``local`` (its state dir is ``<data dir>/agent``, so a
    restart resumes the same node and re-adopts its jobs). Its output goes to ``<data dir>/agent.log``."""
    from scalar.wire.agent import JoinTokenRequest

    state_dir = Path(data_dir) / "agent"
    state_dir.mkdir(parents=True, exist_ok=True)
    args = ["--controller", url, "--state-dir", str(state_dir), "--fake-gpus", LOCAL_FAKE_GPUS]
    if not (state_dir / "identity.json").is_file():
        token = control_plane.agents.create_join_token(JoinTokenRequest(provider="local", ttl_s=600))
        args += ["--join-token", token["token"], "--hostname", "local"]
    log = open(Path(data_dir) / "agent.log", "ab")  # noqa: SIM115 - the child owns it
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "scalar.agent", *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
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
