"""The supervisor of one assignment: ``python -m scalar.agent.shim DIR``.

The agent starts one shim per assignment in its own session, so the shim and its child outlive an agent
that is killed; a restarted agent finds them again through the files the shim keeps in ``DIR``:

- ``spec.json`` (written by the agent): argv, env, workdir, memory limit, deadline, stop grace;
- ``shim.pid`` / ``child.pid``: written at start; ``output.log``: the child's stdout and stderr;
- ``exit.json``: written once, atomically, when the child is gone: exit code, signal, OOM, why it stopped.

The child runs in its own process group. SIGTERM to the shim stops it: SIGTERM to the child's group, then
SIGKILL after the grace period. A memory limit is enforced by a cgroup when the host lets us create one
(v2 or v1), else by watching the process group's resident memory (every 0.1 s): over the limit, the group
is killed and the exit is reported as OOM. At the deadline (contract end minus grace) the child is stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scalar.agent.limits import CpuCgroup, MemoryCgroup, group_rss_bytes

POLL_S = 0.1


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a reader sees the old file or the new one, never half of it."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class _Stop:
    """A stop was asked for (SIGTERM to the shim, or the deadline): when, and why."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.why: str | None = None

    def on_signal(self, signum: int, frame: object) -> None:
        if self.at is None:
            self.at, self.why = time.monotonic(), "stopped"


def run(directory: Path) -> int:
    spec = json.loads((directory / "spec.json").read_text())
    (directory / "shim.pid").write_text(str(os.getpid()))
    stop = _Stop()
    signal.signal(signal.SIGTERM, stop.on_signal)
    signal.signal(signal.SIGINT, stop.on_signal)
    limit = spec.get("memory_limit_bytes")
    cgroup = MemoryCgroup.create(directory.name, limit) if limit else None
    cpu = CpuCgroup.create(directory.name, float(spec.get("cpu_cores") or 0.0))

    def join_cgroups() -> None:  # in the child, before exec
        for group in (cgroup, cpu):
            if group is not None:
                group.join_self()

    env = dict(spec.get("env") or {})
    with open(directory / "output.log", "ab", buffering=0) as log:
        try:
            child = subprocess.Popen(
                spec["argv"],
                env=env,
                cwd=spec.get("workdir") or None,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=join_cgroups if cgroup is not None or cpu is not None else None,
            )
        except (OSError, ValueError, subprocess.SubprocessError) as err:
            log.write(f"scalar: could not start {spec['argv'][0]!r}: {err}\n".encode())
            write_json(
                directory / "exit.json",
                {
                    "exit_code": None,
                    "signal": None,
                    "oom": False,
                    "error": str(err),
                    "finished_at": time.time(),
                },
            )
            return 1
    (directory / "child.pid").write_text(str(child.pid))
    pgid = child.pid
    grace = float(spec.get("stop_grace_s") or 10.0)
    deadline = spec.get("deadline_epoch")
    oom = False
    termed = killed = False
    while True:
        code = child.poll()
        if code is not None:
            break
        now = time.monotonic()
        if deadline is not None and time.time() >= float(deadline) and stop.at is None:
            stop.at, stop.why = now, "deadline"
        if stop.at is not None and not termed:
            _kill_group(pgid, signal.SIGTERM)
            termed = True
        elif stop.at is not None and not killed and now - stop.at >= grace:
            _kill_group(pgid, signal.SIGKILL)
            killed = True
        if limit and not oom and cgroup is None and group_rss_bytes(pgid) > int(limit):
            oom = True
            _kill_group(pgid, signal.SIGKILL)
        time.sleep(POLL_S)
    _kill_group(pgid, signal.SIGKILL)  # nothing of the job outlives it
    if cgroup is not None:
        oom = oom or cgroup.oom_killed()
        cgroup.remove()
    if cpu is not None:
        cpu.remove()
    write_json(
        directory / "exit.json",
        {
            "exit_code": code if code >= 0 else None,
            "signal": -code if code < 0 else None,
            "oom": oom,
            "stopped": stop.why,
            "finished_at": time.time(),
        },
    )
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a process by the agent
    sys.exit(run(Path(sys.argv[1])))
