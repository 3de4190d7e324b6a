"""The agent's assignments on this machine: start, stop, watch, and the journal that survives a restart.

The journal (``<state dir>/journal.json``) lists every assignment the agent started, with its directory,
its shim's pid and start time, and how much of its output has been shipped. It is written before a shim is
started and after, atomically. A restarted agent reads it and *adopts* what still runs (same pid, same start
time: not a reused pid), reads the outcome of what finished meanwhile from ``exit.json``, and starts again
only what never started. So nothing is orphaned and nothing runs twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scalar.agent.limits import group_rss_bytes, pid_alive, process_start_ticks
from scalar.agent.shim import write_json

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
SHIM_START_WAIT_S = 5.0
PORT_TRIES = 200  # free ports tried per allocation before giving up (a port of another assignment is skipped)
MIB_PER_GB = 1024


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat()


@dataclass
class Entry:
    """One assignment in the journal."""

    assignment_id: str
    directory: str
    started_at: float
    shim_pid: int | None = None
    shim_ticks: int | None = None
    shipped: int = 0
    acked: bool = False  # the controller has seen its final state and all of its output
    cancel: bool = False
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)  # TCP ports allocated for it (kept across a restart)


class Runner:
    def __init__(self, state_dir: Path, base_env: dict[str, str] | None = None) -> None:
        self.state_dir = state_dir
        self.journal_path = state_dir / "journal.json"
        self.work = state_dir / "assignments"
        self.work.mkdir(parents=True, exist_ok=True)
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.entries: dict[str, Entry] = {}
        self._children: list[subprocess.Popen[bytes]] = []
        self._load()

    # ---- the journal ---------------------------------------------------------------------------------

    def _load(self) -> None:
        if not self.journal_path.is_file():
            return
        raw = json.loads(self.journal_path.read_text() or "{}")
        for item in raw.get("assignments", []):
            entry = Entry(**item)
            self.entries[entry.assignment_id] = entry
        for entry in self.entries.values():
            self._adopt(entry)

    def save(self) -> None:
        write_json(self.journal_path, {"assignments": [asdict(e) for e in self.entries.values()]})

    def _adopt(self, entry: Entry) -> None:
        """After a restart: learn the pid of a shim started just before the agent died."""
        if entry.shim_pid is None:
            pid_file = Path(entry.directory) / "shim.pid"
            if pid_file.is_file():
                entry.shim_pid = int(pid_file.read_text())
                entry.shim_ticks = process_start_ticks(entry.shim_pid)

    # ---- commands ------------------------------------------------------------------------------------

    def has(self, assignment_id: str) -> bool:
        return assignment_id in self.entries

    def start(self, assignment: dict[str, Any]) -> None:
        """Start the assignment under a shim, once: an assignment already in the journal is left alone."""
        aid = str(assignment["assignment_id"])
        if aid in self.entries:
            return
        directory = self.work / _SAFE.sub("_", aid)
        directory.mkdir(parents=True, exist_ok=True)
        env = {**self.base_env, **(assignment.get("env") or {})}
        uuids = list(assignment.get("gpu_uuids") or [])
        env["CUDA_VISIBLE_DEVICES"] = ",".join(uuids)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["SCALAR_JOB_ID"] = str(assignment.get("job_id"))
        env["SCALAR_ATTEMPT"] = str(assignment.get("attempt"))
        env["SCALAR_ASSIGNMENT_ID"] = aid
        env.update(vram_env(assignment))
        ports: list[int] = []
        port_error: str | None = None
        wanted = int(assignment.get("port_count") or 0)
        if wanted:
            try:
                ports = allocate_ports(wanted, self.ports_in_use())
            except OSError as err:
                port_error = f"could not allocate {wanted} TCP port(s) on this host: {err}"
            env.update(port_env(ports))
        deadline = assignment.get("deadline")
        spec = {
            "argv": list(assignment["argv"]),
            "env": env,
            "workdir": assignment.get("workdir"),
            "memory_limit_bytes": assignment.get("memory_limit_bytes"),
            "cpu_cores": assignment.get("cpu_cores") or 0.0,
            "stop_grace_s": assignment.get("stop_grace_s") or 10.0,
            "deadline_epoch": None if not deadline else datetime.fromisoformat(str(deadline)).timestamp(),
        }
        write_json(directory / "spec.json", spec)
        entry = Entry(aid, str(directory), time.time(), ports=ports)
        self.entries[aid] = entry
        if port_error is not None:  # reported as failed_to_start (an exit.json without a child)
            write_json(directory / "exit.json", {"error": port_error, "finished_at": time.time()})
            self.save()
            return
        self.save()  # journalled before the process exists: a crash now leaves no unknown process
        proc = subprocess.Popen(
            [sys.executable, "-m", "scalar.agent.shim", str(directory)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(directory / "shim.err", "ab"),  # noqa: SIM115 - the shim owns it from here
            start_new_session=True,
            close_fds=True,
        )
        entry.shim_pid = proc.pid
        entry.shim_ticks = process_start_ticks(proc.pid)
        self.save()
        self._children.append(proc)

    def stop(self, assignment_id: str) -> None:
        """SIGTERM to the shim: it stops the job's process group (SIGKILL after the grace period)."""
        entry = self.entries.get(assignment_id)
        if entry is None or entry.cancel:
            return
        entry.cancel = True
        self.save()
        if entry.shim_pid is not None and pid_alive(entry.shim_pid, entry.shim_ticks):
            with contextlib.suppress(ProcessLookupError):
                os.kill(entry.shim_pid, signal.SIGTERM)

    def reap(self) -> None:
        """Collect exited shims this process started (no zombies)."""
        alive = []
        for proc in self._children:
            if proc.poll() is None:
                alive.append(proc)
        self._children[:] = alive

    # ---- reports -------------------------------------------------------------------------------------

    def report(self, entry: Entry) -> dict[str, Any]:
        directory = Path(entry.directory)
        exit_file = directory / "exit.json"
        log = directory / "output.log"
        log_bytes = log.stat().st_size if log.is_file() else 0
        child_pid = _read_int(directory / "child.pid")
        body: dict[str, Any] = {
            "assignment_id": entry.assignment_id,
            "pid": child_pid,
            "started_at": _iso(entry.started_at),
            "log_bytes": log_bytes,
        }
        if entry.ports:  # only then: an older controller refuses the field
            body["ports"] = list(entry.ports)
        if exit_file.is_file():
            outcome = json.loads(exit_file.read_text())
            error = outcome.get("error")
            return {
                **body,
                "state": "failed_to_start" if error and child_pid is None else "exited",
                "exit_code": outcome.get("exit_code"),
                "signal": outcome.get("signal"),
                "oom": bool(outcome.get("oom")),
                "error": error,
                "finished_at": _iso(outcome.get("finished_at")),
            }
        if entry.shim_pid is not None and pid_alive(entry.shim_pid, entry.shim_ticks):
            rss = group_rss_bytes(child_pid) if child_pid else 0
            return {**body, "state": "running", "usage": {"rss_bytes": rss, "cpu_s": 0.0}}
        if entry.shim_pid is None and time.time() - entry.started_at < SHIM_START_WAIT_S:
            return {**body, "state": "starting"}
        if exit_file.is_file():  # it finished between the two checks
            return self.report(entry)
        return {
            **body,
            "state": "exited",
            "exit_code": None,
            "signal": None,
            "error": "the job's supervisor is gone and left no exit status (the machine restarted?)",
            "finished_at": _iso(time.time()),
        }

    def gpus_held(self, keep: set[str]) -> set[str]:
        """GPU UUIDs still held by an assignment not in ``keep`` (being stopped) whose process still runs."""
        held: set[str] = set()
        for entry in self.entries.values():
            if entry.acked or entry.assignment_id in keep:
                continue
            if self.report(entry)["state"] in ("running", "starting"):
                held.update(_gpus_of(entry))
        return held

    def ports_in_use(self) -> set[int]:
        """TCP ports allocated to this agent's assignments that are not known to be over."""
        used: set[int] = set()
        for entry in self.entries.values():
            if entry.ports and not entry.acked and self.report(entry)["state"] in ("running", "starting"):
                used.update(entry.ports)
        return used

    def reports(self) -> list[dict[str, Any]]:
        return [self.report(e) for e in self.entries.values() if not e.acked]

    def log_path(self, entry: Entry) -> Path:
        return Path(entry.directory) / "output.log"


def allocate_ports(count: int, avoid: set[int]) -> list[int]:
    """``count`` distinct TCP ports that are free on this host (the kernel's pick for a bind to port 0 on
    every address) and not in ``avoid`` (the ports of this agent's other running assignments). The
    sockets are held until all are chosen, then closed: the command binds them itself."""
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        for _ in range(PORT_TRIES):
            if len(ports) == count:
                break
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.bind(("", 0))
            port = int(sock.getsockname()[1])
            if port not in avoid and port not in ports:
                ports.append(port)
        if len(ports) < count:
            raise OSError(f"only {len(ports)} free port(s) found in {PORT_TRIES} tries")
    finally:
        for sock in held:
            sock.close()
    return ports


def port_env(ports: list[int]) -> dict[str, str]:
    """``SCALAR_PORTS`` (comma-separated) and ``PORT`` (the first) for an assignment with ports."""
    if not ports:
        return {}
    return {"SCALAR_PORTS": ",".join(str(p) for p in ports), "PORT": str(ports[0])}


def vram_env(assignment: dict[str, Any]) -> dict[str, str]:
    """For a job sharing a GPU under a VRAM budget: ``SCALAR_VRAM_BUDGET_GB`` and CUDA MPS's per-client
    limit, ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=<N>M,1=<N>M"`` (devices numbered as the job sees them
    through ``CUDA_VISIBLE_DEVICES``). Enforced only when an MPS control daemon runs on the host; otherwise
    the budget is advisory. ``PYTORCH_CUDA_ALLOC_CONF`` is left alone."""
    budget = assignment.get("vram_budget_gb")
    uuids = list(assignment.get("gpu_uuids") or [])
    if assignment.get("vram_fraction") is None or not budget or not uuids:
        return {}
    mib = max(1, int(float(budget) * MIB_PER_GB))
    return {
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": ",".join(f"{i}={mib}M" for i in range(len(uuids))),
        "SCALAR_VRAM_BUDGET_GB": f"{float(budget):g}",
    }


def _gpus_of(entry: Entry) -> list[str]:
    try:
        spec = json.loads((Path(entry.directory) / "spec.json").read_text())
    except (OSError, ValueError):
        return []
    visible = str((spec.get("env") or {}).get("CUDA_VISIBLE_DEVICES") or "")
    return [u for u in visible.split(",") if u]


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
