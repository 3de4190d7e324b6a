"""The supervisor of one assignment: ``python -m scalar.agent.shim DIR``.

The agent starts one shim per assignment in its own session, so the shim and its child outlive an agent
that is killed; a restarted agent finds them again through the files the shim keeps in ``DIR``:

- ``spec.json`` (written by the agent): argv, what to launch it under (bwrap, setpriv), its working
  directory, uid, GPU UUIDs, memory limit, deadline, stop grace; never the environment, which the agent
  writes to the shim's stdin (a JSON object) and which exists only in memory;
- ``shim.pid`` / ``child.pid``: written once the shim has its environment; ``output.log``: the child's
  stdout and stderr;
- ``exit.json``: written once, atomically, when the child is gone: exit code, signal, OOM, why it stopped.

A shim whose stdin closes before a whole environment arrived (the agent died) exits without a trace; the
restarted agent starts the assignment again. Every file is 0600.

The child runs in its own process group. SIGTERM to the shim stops it: SIGTERM to the child's group, then
SIGKILL after the grace period. Under bubblewrap, SIGTERM goes to the job's processes but not to bwrap's
own (which would end at once and leave the job running without its exit status); the grace period lasts
until the whole group is gone. A memory limit is enforced by a cgroup when the host lets us create one
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

from scalar.agent.limits import CpuCgroup, MemoryCgroup, group_members, group_rss_bytes

POLL_S = 0.1
SIGNAL_EXIT_BASE = 128


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically, 0600: a reader sees the old file or the new one, never half of it."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(data))
    os.replace(tmp, path)


def private_dir(path: Path, mode: int = 0o700) -> Path:
    """``path`` made (with its parents) and set to ``mode``."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    return path


def private_file(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _term_job(pgid: int, sandboxed: bool) -> None:
    """SIGTERM to the job: its process group, or under bwrap its processes but not bwrap's own."""
    if not sandboxed:
        _kill_group(pgid, signal.SIGTERM)
        return
    for pid, name in group_members(pgid):
        if name != "bwrap":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)


def _read_env() -> dict[str, str] | None:
    """The job's environment from stdin, or None if the agent did not hand over a whole one."""
    try:
        env = json.loads(sys.stdin.buffer.read() or b"null")
    except (OSError, ValueError):
        return None
    if not isinstance(env, dict):
        return None
    return {str(k): str(v) for k, v in env.items()}


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
    os.umask(0o077)
    spec = json.loads((directory / "spec.json").read_text())
    stop = _Stop()
    signal.signal(signal.SIGTERM, stop.on_signal)
    signal.signal(signal.SIGINT, stop.on_signal)
    env = _read_env()
    if env is None:
        return 2  # the agent died before handing over the environment: it starts this again
    private_file(directory / "shim.pid", str(os.getpid()))
    sandboxed = spec.get("sandbox") == "bwrap"
    limit = spec.get("memory_limit_bytes")
    cgroup = MemoryCgroup.create(directory.name, limit) if limit else None
    cpu = CpuCgroup.create(directory.name, float(spec.get("cpu_cores") or 0.0))

    def join_cgroups() -> None:  # in the child, before exec
        for group in (cgroup, cpu):
            if group is not None:
                group.join_self()

    fd = os.open(directory / "output.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with open(fd, "ab", buffering=0) as log:
        try:
            child = subprocess.Popen(
                [*(spec.get("launch") or []), *spec["argv"]],
                env=env,
                cwd=spec.get("cwd") or None,
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
    del env  # the job has it; the shim keeps no copy around
    private_file(directory / "child.pid", str(child.pid))
    pgid = child.pid
    grace = float(spec.get("stop_grace_s") or 10.0)
    deadline = spec.get("deadline_epoch")
    oom = False
    termed = killed = False
    code: int | None = None
    while True:
        code = child.poll() if code is None else code
        now = time.monotonic()
        if code is not None:
            # the child is gone; after a stop, what is left of its group gets the rest of its grace period
            if stop.at is None or killed or not group_members(pgid):
                break
        if deadline is not None and time.time() >= float(deadline) and stop.at is None:
            stop.at, stop.why = now, "deadline"
        if stop.at is not None and not termed:
            _term_job(pgid, sandboxed)
            termed = True
        elif stop.at is not None and not killed and now - stop.at >= grace:
            _kill_group(pgid, signal.SIGKILL)
            killed = True
        if limit and not oom and cgroup is None and group_rss_bytes(pgid) > int(limit):
            oom = True
            _kill_group(pgid, signal.SIGKILL)
        time.sleep(POLL_S)
    assert code is not None
    _kill_group(pgid, signal.SIGKILL)  # nothing of the job outlives it
    if sandboxed and code > SIGNAL_EXIT_BASE:  # bwrap reports a job killed by signal N as 128 + N
        code = SIGNAL_EXIT_BASE - code
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
