"""``python -m scalar.agent``: the node agent without the rest of the CLI (starts in a fraction of the
time ``scalar agent`` takes to import every command). Same options as ``scalar agent``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scalar import __version__
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
    p.add_argument("--agent-version", default=None, help=argparse.SUPPRESS)
    p.add_argument("--agent-protocol", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    options = AgentOptions(
        controller=a.controller,
        state_dir=a.state_dir,
        join_token=a.join_token,
        fake_gpus=a.fake_gpus,
        hostname=a.hostname,
        instance_id=a.instance_id,
        contract_expires_at=a.contract_expires_at,
        heartbeat_s=a.heartbeat_s,
    )
    if a.agent_version is not None:
        options.version = a.agent_version
    if a.agent_protocol is not None:
        options.protocol = a.agent_protocol
    return options


if __name__ == "__main__":
    sys.exit(run_agent(parse(sys.argv[1:])))
