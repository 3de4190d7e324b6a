"""The node bootstrap script (docs/agent.md, "Bootstrap"): a bash script that installs and starts
``scalar agent`` on a machine with the controller's URL and a one-time join token.

``scalar node add user@host`` uploads it over SFTP and runs it; for a bought node it is what a provider's
startup hook (cloud-init user data, a template's start script) runs (``scalar node script`` prints one).
Steps, each failing with its own exit code and one ``error:`` line on stderr:

1. a Python >= 3.11 (``PYTHON``; exit 10 missing, 11 too old);
2. the agent package: a copy unpacked in ``DIR/lib`` (what ``scalar node add`` uploads), else the Python's
   own ``scalar`` of the same version, else ``pip install PIP_SPEC`` into the venv ``DIR/venv``
   (exit 12 when none works); ``scalar-compute==VERSION``, the distribution's base install, is the agent
   alone (httpx, pydantic, typer, rich, nvidia-ml-py; no server package);
3. the controller answers HTTP from this machine (exit 13);
4. no agent already runs from ``DIR`` (exit 15); the agent starts in the background (``setsid nohup``),
   output in ``DIR/agent.log``, pid in ``DIR/agent.pid``, state in ``DIR/state`` (exit 14 when it dies at
   once; the log's tail is printed). Run by a user other than root (and without ``SCALAR_AGENT_JOB_USER``)
   it passes ``--job-user same-user`` and says so: only root can give each tenant a uid of its own.

The join token reaches the agent through its environment (``SCALAR_JOIN_TOKEN``), not its command line.
"""

from __future__ import annotations

import base64
import shlex
from dataclasses import dataclass

from scalar import __version__

MIN_PYTHON = (3, 11)
DEFAULT_DIR = "$HOME/.scalar-agent"

EXIT_NO_PYTHON = 10
EXIT_OLD_PYTHON = 11
EXIT_NO_AGENT = 12
EXIT_CONTROLLER_UNREACHABLE = 13
EXIT_AGENT_DIED = 14
EXIT_ALREADY_RUNNING = 15

EXIT_MEANINGS = {
    EXIT_NO_PYTHON: "no Python on the host",
    EXIT_OLD_PYTHON: "the host's Python is older than 3.11",
    EXIT_NO_AGENT: "the agent could not be installed",
    EXIT_CONTROLLER_UNREACHABLE: "the controller is unreachable from the host",
    EXIT_AGENT_DIED: "the agent exited right after it started",
    EXIT_ALREADY_RUNNING: "an agent already runs on the host",
}


@dataclass(frozen=True, slots=True)
class AgentBootstrap:
    """What the script needs. ``directory`` may start with ``$HOME`` (expanded on the host)."""

    controller_url: str
    join_token: str
    directory: str = DEFAULT_DIR
    python: str = "python3"
    version: str = __version__
    pip_spec: str | None = None  # e.g. "scalar-compute==0.1.0" (the base install: the agent); None: no pip
    pip_args: str = ""  # e.g. "--no-index --find-links /opt/wheels"
    fake_gpus: str | None = None
    hostname: str | None = None
    instance_id: str | None = None
    contract_expires_at: str | None = None


def _quote_path(path: str) -> str:
    """A shell word for ``path`` that still expands a leading ``$HOME`` or ``~``."""
    if path == "~" or path == "$HOME":
        return '"$HOME"'
    for prefix in ("~/", "$HOME/"):
        if path.startswith(prefix):
            return '"$HOME"/' + shlex.quote(path[len(prefix) :])
    return shlex.quote(path)


def render_startup_script(b: AgentBootstrap) -> str:
    """The bash script that installs and starts the agent (see the module's docstring)."""
    agent_args = ["--controller", b.controller_url]
    for flag, value in (
        ("--fake-gpus", b.fake_gpus),
        ("--hostname", b.hostname),
        ("--instance-id", b.instance_id),
        ("--contract-expires-at", b.contract_expires_at),
    ):
        if value:
            agent_args += [flag, value]
    need = ".".join(str(n) for n in MIN_PYTHON)
    lines = [
        "#!/usr/bin/env bash",
        "# Scalar node bootstrap (docs/agent.md, Bootstrap): install and start `scalar agent`.",
        "set -uo pipefail",
        'HOME="${HOME:-$(cd ~ && pwd)}"  # cloud-init may run this without HOME',
        f"DIR={_quote_path(b.directory)}",
        f"PY={_quote_path(b.python)}",
        f"VERSION={shlex.quote(b.version)}",
        f"CONTROLLER={shlex.quote(b.controller_url)}",
        f"PIP_SPEC={shlex.quote(b.pip_spec or '')}",
        f"PIP_ARGS={shlex.quote(b.pip_args)}",
        f"AGENT_ARGS=({' '.join(shlex.quote(a) for a in agent_args)})",
        f"export SCALAR_JOIN_TOKEN={shlex.quote(b.join_token)}",
        "",
        'fail() { echo "error: $2" >&2; exit "$1"; }',
        'mkdir -p "$DIR" && chmod 700 "$DIR" || fail 12 "cannot create $DIR"',
        "",
        "# 1. Python",
        'if ! command -v "$PY" >/dev/null 2>&1; then',
        f'  fail {EXIT_NO_PYTHON} "no $PY on this host: install Python {need} or newer, or pass --python PATH"',
        "fi",
        'PYV=$("$PY" -c \'import sys; print("%d.%d" % sys.version_info[:2])\') || '
        f'fail {EXIT_NO_PYTHON} "$PY does not run"',
        f"if ! \"$PY\" -c 'import sys; sys.exit(sys.version_info[:2] < {MIN_PYTHON!r})'; then",
        f'  fail {EXIT_OLD_PYTHON} "$PY is Python $PYV; the agent needs Python {need} or newer '
        '(install it, or pass --python PATH)"',
        "fi",
        "",
        "# 2. The agent package: an uploaded copy in $DIR/lib, the Python's own, or pip into $DIR/venv",
        'if [ -d "$DIR/lib/scalar" ]; then export PYTHONPATH="$DIR/lib${PYTHONPATH:+:$PYTHONPATH}"; fi',
        "has_agent() {",
        "  \"$1\" -c 'import sys, scalar, scalar.agent.node_agent; sys.exit(scalar.__version__ != sys.argv[1])' "
        '"$VERSION" 2>/dev/null',
        "}",
        'if ! has_agent "$PY"; then',
        '  if [ -x "$DIR/venv/bin/python" ] && has_agent "$DIR/venv/bin/python"; then',
        '    PY="$DIR/venv/bin/python"',
        '  elif [ -n "$PIP_SPEC" ]; then',
        '    [ -x "$DIR/venv/bin/python" ] || "$PY" -m venv "$DIR/venv" \\',
        '      || fail 12 "cannot create a venv with $PY -m venv"',
        "    # shellcheck disable=SC2086",
        '    "$DIR/venv/bin/python" -m pip install -q $PIP_ARGS "$PIP_SPEC" >>"$DIR/install.log" 2>&1 \\',
        f'      || fail {EXIT_NO_AGENT} "pip install $PIP_SPEC failed (see $DIR/install.log)"',
        '    PY="$DIR/venv/bin/python"',
        '    has_agent "$PY" || fail 12 "$PIP_SPEC does not provide scalar agent $VERSION"',
        "  else",
        "    MISSING=$(\"$PY\" -c 'import scalar.agent.node_agent' 2>&1 | tail -n 1)",
        f'    fail {EXIT_NO_AGENT} "$PY cannot run scalar agent $VERSION ($MISSING)"',
        "  fi",
        "fi",
        "",
        "# 3. The controller answers from here",
        '"$PY" - "$CONTROLLER" <<\'PYEOF\' || '
        f'fail {EXIT_CONTROLLER_UNREACHABLE} "the controller at $CONTROLLER is unreachable from this host"',
        "import sys, urllib.error, urllib.request",
        "try:",
        "    urllib.request.urlopen(sys.argv[1].rstrip('/') + '/agent/v1/register', timeout=10)",
        "except urllib.error.HTTPError:",
        "    pass  # it answered",
        "except Exception as err:",
        "    print(f'error: {sys.argv[1]}: {err}', file=sys.stderr)",
        "    sys.exit(1)",
        "PYEOF",
        "",
        "# 4. Start it in the background",
        'if [ -f "$DIR/agent.pid" ] && kill -0 "$(cat "$DIR/agent.pid")" 2>/dev/null; then',
        f'  fail {EXIT_ALREADY_RUNNING} "an agent already runs from $DIR (pid $(cat "$DIR/agent.pid")); '
        'stop it first"',
        "fi",
        'cd "$DIR" || fail 12 "cannot enter $DIR"',
        'echo "bootstrap: $(date -u +%FT%TZ) scalar $VERSION from $("$PY" -c \'import scalar; '
        'print(scalar.__file__)\') with $PY" >>"$DIR/agent.log"',
        "SETSID=$(command -v setsid || true)",
        "# a non-root user cannot give each tenant a uid of its own: jobs run as this user (docs/security.md)",
        "JOB_USER=()",
        'if [ "$(id -u)" != 0 ] && [ -z "${SCALAR_AGENT_JOB_USER:-}" ]; then',
        "  JOB_USER=(--job-user same-user)",
        '  echo "bootstrap: not root: jobs run as $(id -un) (--job-user same-user); '
        'run as root for per-tenant uids" | tee -a "$DIR/agent.log" >&2',
        "fi",
        '$SETSID nohup "$PY" -m scalar.agent "${AGENT_ARGS[@]}" ${JOB_USER[@]+"${JOB_USER[@]}"} '
        '--state-dir "$DIR/state" >>"$DIR/agent.log" 2>&1 </dev/null &',
        'echo $! >"$DIR/agent.pid"',
        "sleep 1",
        'if ! kill -0 "$(cat "$DIR/agent.pid")" 2>/dev/null; then',
        '  tail -n 5 "$DIR/agent.log" >&2',
        f'  fail {EXIT_AGENT_DIED} "the agent exited at once (log: $DIR/agent.log)"',
        "fi",
        'echo "agent started: pid $(cat "$DIR/agent.pid"), log $DIR/agent.log"',
        "",
    ]
    return "\n".join(lines)


def user_data_b64(script: str) -> str:
    """The script as base64 cloud-init user data (SFCompute's nodes API ``cloud_init_user_data``)."""
    return base64.b64encode(script.encode()).decode()
