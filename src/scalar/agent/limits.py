"""Memory limits for a job: a cgroup (v2 or v1) when the host lets us create one, else a watch.

``MemoryCgroup.create`` returns ``None`` when no cgroup can be made (not root, read-only cgroupfs, a
container without delegation); the shim then watches the job's process group with ``group_rss_bytes`` and
kills it when it goes over. Either way the exit is reported as OOM.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class MemoryCgroup:
    """One job's memory cgroup. ``version`` is 2 (unified) or 1 (the ``memory`` controller)."""

    def __init__(self, path: Path, version: int) -> None:
        self.path = path
        self.version = version

    @classmethod
    def create(cls, name: str, limit_bytes: int, root: Path = CGROUP_ROOT) -> MemoryCgroup | None:
        if os.environ.get("SCALAR_AGENT_NO_CGROUPS"):
            return None
        safe = "scalar-" + _NAME.sub("-", name)[:100]
        if (root / "cgroup.controllers").is_file():
            path, version, limit_file = root / safe, 2, "memory.max"
        elif (root / "memory").is_dir():
            path, version, limit_file = root / "memory" / safe, 1, "memory.limit_in_bytes"
        else:
            return None
        try:
            path.mkdir(exist_ok=True)
            (path / limit_file).write_text(str(int(limit_bytes)))
            if version == 1:
                # no swap either, where the kernel has swap accounting
                with contextlib.suppress(OSError):
                    (path / "memory.memsw.limit_in_bytes").write_text(str(int(limit_bytes)))
            else:
                with contextlib.suppress(OSError):
                    (path / "memory.swap.max").write_text("0")
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path, version)

    def join_self(self) -> None:
        """Move the calling process into the cgroup (run in the child before exec)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def oom_killed(self) -> bool:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        except (OSError, ValueError):
            pass
        if self.version == 1:
            try:
                return int((self.path / "memory.failcnt").read_text()) > 0 and not _alive_in(self.path)
            except (OSError, ValueError):
                return False
        return False

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


class CpuCgroup:
    """A CPU quota of ``cores`` (CFS bandwidth): v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us``."""

    PERIOD_US = 100_000

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, name: str, cores: float, root: Path = CGROUP_ROOT) -> CpuCgroup | None:
        if os.environ.get("SCALAR_AGENT_NO_CGROUPS") or cores <= 0:
            return None
        safe = "scalar-cpu-" + _NAME.sub("-", name)[:100]
        quota = max(1000, int(cores * cls.PERIOD_US))
        if (root / "cgroup.controllers").is_file():
            path, files = root / safe, {"cpu.max": f"{quota} {cls.PERIOD_US}"}
        elif (root / "cpu").is_dir():
            path = root / "cpu" / safe
            files = {"cpu.cfs_period_us": str(cls.PERIOD_US), "cpu.cfs_quota_us": str(quota)}
        else:
            return None
        try:
            path.mkdir(exist_ok=True)
            for file, value in files.items():
                (path / file).write_text(value)
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def join_self(self) -> None:
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _alive_in(path: Path) -> bool:
    try:
        return bool((path / "cgroup.procs").read_text().strip())
    except OSError:
        return False


def group_rss_bytes(pgid: int) -> int:
    """Resident memory of every process in process group ``pgid`` (``/proc``), in bytes."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pgid:
                continue
            total += int(Path(entry.path, "statm").read_text().split()[1]) * PAGE_SIZE
        except (OSError, ValueError, IndexError):
            continue
    return total


def group_members(pgid: int) -> list[tuple[int, str]]:
    """The live processes of process group ``pgid``: (pid, command name)."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            members.append((int(entry.name), stat[stat.index("(") + 1 : stat.rindex(")")]))
        except (OSError, ValueError, IndexError):
            continue
    return members


def process_start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot): tells a live process from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pid: int, start_ticks: int | None) -> bool:
    now = process_start_ticks(pid)
    if now is None:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
        if state[state.rindex(")") + 2 :].split()[0] == "Z":
            return False
    except (OSError, ValueError):
        return False
    return start_ticks is None or now == start_ticks
