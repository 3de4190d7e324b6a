"""The agent's assignments on this machine: start, stop, watch, and the journal that survives a restart.

The journal (``<state dir>/journal.json``, 0600) lists every assignment the agent started, with its
directory, its shim's pid and start time, the job's uid and attempt, and how much of its output has been
shipped. It is written before a shim is started and after, atomically. A restarted agent reads it and
*adopts* what still runs (same pid, same start time: not a reused pid), reads the outcome of what finished
meanwhile from ``exit.json``, and forgets what never started (the controller sends it again, with its
environment, in the next heartbeat reply). So nothing is orphaned and nothing runs twice.

Secrets stay off the disk: the job's environment reaches its shim over a stdin pipe; ``spec.json`` holds
the argv, the GPU UUIDs and the limits only. Every file here is 0600, every directory 0700 (the jobs'
private directories are owned by the job's uid; ``scalar.agent.isolation``).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scalar.agent import isolation as iso_mod
from scalar.agent.capped_log import DEFAULT_LOG_MAX_BYTES, CappedLog
from scalar.agent.isolation import Isolation
from scalar.agent.limits import group_rss_bytes, pid_alive, process_start_ticks
from scalar.agent.shim import private_dir, write_json

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
    uid: int | None = None  # the uid the job runs as
    attempt: int | None = None
    gpu_uuids: list[str] = field(default_factory=list)
    home: str | None = None  # its private directory (HOME and TMPDIR)


class Runner:
    def __init__(
        self,
        state_dir: Path,
        base_env: dict[str, str] | None = None,
        *,
        isolation: Isolation | None = None,
        log_max_bytes: int | None = DEFAULT_LOG_MAX_BYTES,
    ) -> None:
        self.state_dir = state_dir
        self.journal_path = state_dir / "journal.json"
        self.work = state_dir / "assignments"
        self.homes = state_dir / "jobs"
        self.isolation = isolation or Isolation()
        self.log_max_bytes = log_max_bytes
        self.euid = os.geteuid()
        private_dir(state_dir)
        private_dir(self.work)
        # the jobs' own directories: a uid other than the agent's must reach its own (search, no listing)
        # when there is no sandbox to bind it in
        direct = self.isolation.per_tenant and self.isolation.sandbox == "none"
        private_dir(self.homes, 0o711 if direct else 0o700)
        if direct:
            os.chmod(state_dir, 0o711)
        # the agent's environment: only what ``isolation.job_env`` lets through reaches a job
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.entries: dict[str, Entry] = {}
        # each GPU's model by UUID, from the host's facts (the node agent sets it at registration)
        self.gpu_models: dict[str, str] = {}
        self._children: list[subprocess.Popen[bytes]] = []
        self._load()

    # ---- the journal ---------------------------------------------------------------------------------

    def _load(self) -> None:
        if not self.journal_path.is_file():
            return
        raw = json.loads(self.journal_path.read_text() or "{}")
        known = set(Entry.__dataclass_fields__)
        for item in raw.get("assignments", []):
            entry = Entry(**{k: v for k, v in item.items() if k in known})
            self.entries[entry.assignment_id] = entry
        for entry in list(self.entries.values()):
            self._adopt(entry)
            if entry.assignment_id in self.entries:
                _seal_spec(entry)
        self.save()

    def save(self) -> None:
        write_json(self.journal_path, {"assignments": [asdict(e) for e in self.entries.values()]})

    def _adopt(self, entry: Entry) -> None:
        """After a restart: learn the pid of a shim started just before the agent died; forget an
        assignment whose shim never got its environment (it never started: the controller sends it again
        with the next heartbeat reply)."""
        if entry.shim_pid is not None:
            return
        directory = Path(entry.directory)
        pid_file = directory / "shim.pid"
        if pid_file.is_file():
            entry.shim_pid = int(pid_file.read_text())
            entry.shim_ticks = process_start_ticks(entry.shim_pid)
        elif not (directory / "exit.json").is_file():
            del self.entries[entry.assignment_id]
            shutil.rmtree(directory, ignore_errors=True)
            if entry.home:
                shutil.rmtree(entry.home, ignore_errors=True)

    # ---- commands ------------------------------------------------------------------------------------

    def has(self, assignment_id: str) -> bool:
        return assignment_id in self.entries

    def _job_identity(self, tenant: str) -> tuple[int, int, str]:
        """The uid, gid and user name the tenant's jobs run as."""
        if not self.isolation.per_tenant:
            uid, gid = self.euid, os.getegid()
        else:
            uid = gid = iso_mod.tenant_uid(tenant, self.isolation.uid_range)
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = f"scalar-{_SAFE.sub('-', tenant)[:24]}"
        return uid, gid, name

    def _refusal(self, assignment: dict[str, Any], uid: int, gid: int, home: Path) -> str | None:
        """Why the job cannot start here as ``uid``, or None."""
        if self.isolation.refuse is not None:
            return self.isolation.refuse
        workdir = assignment.get("workdir")
        hidden = self.hidden_paths()
        if workdir:
            inside = iso_mod.within(str(workdir), hidden)
            if inside is not None:
                return f"workdir {workdir} is inside {inside}, which jobs on this node may not see"
            why = iso_mod.uid_cannot(str(workdir), uid, gid, os.R_OK | os.X_OK)
            if why is not None:
                return f"workdir {workdir} is not readable by the job's uid {uid}: {why}"
        if self.isolation.sandbox == "none":
            why = iso_mod.uid_cannot(home, uid, gid, os.R_OK | os.W_OK | os.X_OK)
            if why is not None:
                return (
                    f"the job's uid {uid} cannot reach its private directory {home}: {why}; install "
                    "bubblewrap (--sandbox bwrap) or give the agent a --state-dir other users can search"
                )
        return None

    def hidden_paths(self) -> list[str]:
        """What a sandboxed job may not see: the agent's state directory (the other jobs' directories are
        in it) and the paths the admin named (the controller's data directory)."""
        paths = [str(self.state_dir.resolve()), *self.isolation.hidden]
        return [p for p in dict.fromkeys(paths) if os.path.exists(p)]

    def start(self, assignment: dict[str, Any]) -> None:
        """Start the assignment under a shim, once: an assignment already in the journal is left alone."""
        aid = str(assignment["assignment_id"])
        if aid in self.entries:
            return
        directory = self.work / _SAFE.sub("_", aid)
        private_dir(directory)
        tenant = str(assignment.get("tenant") or iso_mod.DEFAULT_TENANT)
        uid, gid, user = self._job_identity(tenant)
        home = self.homes / _SAFE.sub("_", aid)
        private_dir(home)
        if uid != self.euid:
            os.chown(home, uid, gid)
        sandboxed = self.isolation.sandbox == "bwrap"
        seen_home = str(home)  # the same path inside the sandbox (isolation.bwrap_prefix)
        uuids = [str(u) for u in assignment.get("gpu_uuids") or []]
        agent_set = {
            "CUDA_VISIBLE_DEVICES": ",".join(uuids),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "SCALAR_JOB_ID": str(assignment.get("job_id")),
            "SCALAR_ATTEMPT": str(assignment.get("attempt")),
            "SCALAR_ASSIGNMENT_ID": aid,
            **{k: self.base_env[k] for k in ("SCALAR_CONTROLLER_URL", "SCALAR_PYTHON") if k in self.base_env},
            **vram_env(assignment),
        }
        models = ",".join(dict.fromkeys(self.gpu_models[u] for u in uuids if u in self.gpu_models))
        if models:  # the model of its GPUs (a mixed host's joined by commas): fixed work can pace itself
            agent_set["SCALAR_GPU_MODEL"] = models
        ports: list[int] = []
        error: str | None = None
        wanted = int(assignment.get("port_count") or 0)
        if wanted:
            try:
                ports = allocate_ports(wanted, self.ports_in_use())
            except OSError as err:
                error = f"could not allocate {wanted} TCP port(s) on this host: {err}"
            agent_set.update(port_env(ports))
        env = iso_mod.job_env(
            dict(assignment.get("env") or {}),
            agent_set,
            self.base_env,
            home=seen_home,
            user=user,
            pass_env=self.isolation.pass_env,
        )
        error = error or self._refusal(assignment, uid, gid, home)
        workdir = assignment.get("workdir") or None
        launch = iso_mod.launch_prefix(
            self.isolation,
            uid=uid,
            gid=gid,
            home=str(home),
            workdir=workdir,
            hidden=self.hidden_paths(),
            gpu_indices=[int(i) for i in assignment.get("gpu_indices") or []],
            euid=self.euid,
        )
        deadline = assignment.get("deadline")
        spec = {  # no environment here: it may hold secrets (it goes to the shim over a pipe)
            "argv": list(assignment["argv"]),
            "launch": launch,
            "sandbox": self.isolation.sandbox,
            "cwd": str(home) if sandboxed else (workdir or str(home)),
            "uid": uid,
            "gpu_uuids": uuids,
            "memory_limit_bytes": assignment.get("memory_limit_bytes"),
            "cpu_cores": assignment.get("cpu_cores") or 0.0,
            "stop_grace_s": assignment.get("stop_grace_s") or 10.0,
            "deadline_epoch": None if not deadline else datetime.fromisoformat(str(deadline)).timestamp(),
        }
        write_json(directory / "spec.json", spec)
        entry = Entry(
            aid,
            str(directory),
            time.time(),
            ports=ports,
            uid=uid,
            attempt=int(assignment.get("attempt") or 1),
            gpu_uuids=uuids,
            home=str(home),
        )
        self.entries[aid] = entry
        if error is not None:  # reported as failed_to_start (an exit.json without a child)
            write_json(directory / "exit.json", {"error": error, "finished_at": time.time()})
            self.save()
            return
        self.save()  # journalled before the process exists: a crash now leaves no unknown process
        err_fd = os.open(directory / "shim.err", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with open(err_fd, "ab") as err_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "scalar.agent.shim", str(directory)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err_file,  # the shim owns it from here
                start_new_session=True,
                close_fds=True,
            )
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(env).encode())
            proc.stdin.close()
        except BrokenPipeError:  # the shim died at once; its report says so
            pass
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

    def remove_home(self, entry: Entry) -> None:
        """Delete an ended job's private directory (what it left in its HOME and TMPDIR)."""
        if entry.home and Path(entry.home).is_relative_to(self.homes):
            shutil.rmtree(entry.home, ignore_errors=True)

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
        log_bytes = self.log_bytes(entry)
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

    def capped_log(self, entry: Entry) -> CappedLog:
        """Its output as shipped: at most ``log_max_bytes`` of it, then the truncation note once it ended."""
        ended = (Path(entry.directory) / "exit.json").is_file()
        return CappedLog(self.log_path(entry), self.log_max_bytes, ended)

    def log_bytes(self, entry: Entry) -> int:
        return self.capped_log(entry).length()

    def read_log(self, entry: Entry, offset: int, limit: int) -> bytes:
        return self.capped_log(entry).read(offset, limit)


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
    if entry.gpu_uuids:
        return list(entry.gpu_uuids)
    try:
        spec = json.loads((Path(entry.directory) / "spec.json").read_text())
    except (OSError, ValueError):
        return []
    return [str(u) for u in spec.get("gpu_uuids") or []]


def _seal_spec(entry: Entry) -> None:
    """A ``spec.json`` written by an older agent held the job's environment: keep its GPUs in the journal
    and rewrite it without the environment (its running shim read it long ago)."""
    path = Path(entry.directory) / "spec.json"
    try:
        spec = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if "env" not in spec:
        return
    env = spec.pop("env") or {}
    if not entry.gpu_uuids:
        entry.gpu_uuids = [u for u in str(env.get("CUDA_VISIBLE_DEVICES") or "").split(",") if u]
    spec.setdefault("gpu_uuids", entry.gpu_uuids)
    write_json(path, spec)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
