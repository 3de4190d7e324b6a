"""``python -m scalar.agent``: the node agent without the rest of the CLI (starts in a fraction of the
time ``scalar agent`` takes to import every command). Same options as ``scalar agent``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from scalar import __version__
from scalar.agent import isolation as iso_mod
from scalar.agent.node_agent import AgentOptions, run_agent
from scalar.wire.agent import PROTOCOL

DEFAULT_STATE_DIR = Path.home() / ".scalar-agent"


def version_line() -> str:
    """What ``--version`` prints: the agent's version and the protocol it speaks."""
    return f"scalar agent {__version__} (protocol {PROTOCOL})"


def parse(argv: list[str]) -> AgentOptions:
    p = argparse.ArgumentParser(prog="scalar agent", description="Run the Scalar node agent (docs/agent.md).")
    p.add_argument("--version", action="version", version=version_line())
    p.add_argument("--controller", required=True, help="URL of the Scalar API the agent calls")
    p.add_argument("--join-token", default=None, help="one-time token from `scalar join-token`")
    p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    p.add_argument("--fake-gpus", default=None, help="fake GPUs when NVML finds none: 8xH100-80GB")
    p.add_argument("--hostname", default=None)
    p.add_argument("--instance-id", default=None)
    p.add_argument("--contract-expires-at", default=None)
    p.add_argument("--heartbeat-s", type=float, default=None)
    add_isolation_arguments(p)
    p.add_argument("--agent-version", default=None, help=argparse.SUPPRESS)
    p.add_argument("--agent-protocol", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    try:
        uid_range = iso_mod.parse_uid_range(a.uid_range)
    except iso_mod.IsolationError as err:
        p.error(f"--uid-range: {err}")
    if a.log_max_bytes_per_attempt is not None and a.log_max_bytes_per_attempt < 1:
        p.error("--log-max-bytes-per-attempt: must be a whole number of bytes >= 1")
    options = AgentOptions(
        controller=a.controller,
        state_dir=a.state_dir,
        join_token=a.join_token,
        fake_gpus=a.fake_gpus,
        hostname=a.hostname,
        instance_id=a.instance_id,
        contract_expires_at=a.contract_expires_at,
        heartbeat_s=a.heartbeat_s,
        job_user=a.job_user,
        sandbox=a.sandbox,
        uid_range=uid_range,
        hide=tuple(a.hide or ()),
        pass_env=tuple(a.pass_env or ()),
    )
    if a.log_max_bytes_per_attempt is not None:
        options.log_max_bytes_per_attempt = a.log_max_bytes_per_attempt
    if a.agent_version is not None:
        options.version = a.agent_version
    if a.agent_protocol is not None:
        options.protocol = a.agent_protocol
    return options


def add_isolation_arguments(p: argparse.ArgumentParser) -> None:
    """How jobs run (docs/security.md, "Jobs on a node"); also ``$SCALAR_AGENT_JOB_USER`` and
    ``$SCALAR_AGENT_SANDBOX``."""
    env = os.environ
    p.add_argument(
        "--job-user",
        choices=iso_mod.JOB_USERS,
        default=env.get("SCALAR_AGENT_JOB_USER") or None,
        help="per-tenant (default; needs root): each tenant's jobs under a uid of their own; "
        "same-user: as the agent's user",
    )
    p.add_argument(
        "--sandbox",
        choices=iso_mod.SANDBOXES,
        default=env.get("SCALAR_AGENT_SANDBOX") or "auto",
        help="bwrap: run jobs under bubblewrap; auto (default): bwrap when root and installed; none",
    )
    p.add_argument(
        "--uid-range",
        default="-".join(str(v) for v in iso_mod.DEFAULT_UID_RANGE),
        help="uids of per-tenant jobs, LOW-HIGH (default 200000-265535)",
    )
    p.add_argument("--hide", action="append", help="a path jobs may not see (repeat; e.g. the data dir)")
    p.add_argument(
        "--pass-env",
        action="append",
        default=[n for n in (env.get("SCALAR_AGENT_PASS_ENV") or "").split(",") if n],
        help="a variable of the agent's passed to jobs (repeat; or $SCALAR_AGENT_PASS_ENV, comma-separated)",
    )
    p.add_argument(
        "--log-max-bytes-per-attempt",
        type=int,
        default=None,
        help="output shipped per attempt (default 64 MiB); the rest is dropped and the log says so",
    )


if __name__ == "__main__":
    sys.exit(run_agent(parse(sys.argv[1:])))
