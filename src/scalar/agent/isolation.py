"""Who a job runs as on its node, what environment it gets and what it can see (docs/security.md).

- ``job_user``: ``per-tenant`` runs each tenant's jobs under a numeric uid/gid of its own, taken from
  ``uid_range`` deterministically from the tenant name (no ``useradd``; one uid per tenant, not per job,
  because CUDA MPS serves one uid per server); ``same-user`` runs them as the agent's own user.
- ``sandbox``: ``bwrap`` runs the job under bubblewrap (as root, dropping to the job's uid inside with
  ``setpriv``): its own pid, IPC and UTS namespaces, a private ``/dev`` holding only the NVIDIA control
  devices and the job's own GPUs, its private directory (its HOME and TMPDIR) at its own path, the host's
  ``/tmp`` as it is outside (an interpreter installed under it must stay visible), and the agent's state directory, the
  other jobs' directories and the controller's data directory hidden (empty). ``none`` runs the job
  directly (under ``setpriv`` when per-tenant). ``auto``: ``bwrap`` when the agent is root and bubblewrap
  is installed, else ``none``.

The environment is built from an allow-list (``job_env``): nothing else of the agent's is inherited.
Everything here is a function of its arguments, so the argv and the environment are unit-tested.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PER_TENANT = "per-tenant"
SAME_USER = "same-user"
JOB_USERS = (PER_TENANT, SAME_USER)
SANDBOXES = ("auto", "bwrap", "none")
DEFAULT_UID_RANGE = (200000, 265535)
DEFAULT_TENANT = "default"
# The devices every CUDA process opens, and the GPUs' own (/dev/nvidiaN, N the GPU's index); on a host
# without them (fake GPUs) they are skipped (--dev-bind-try).
NVIDIA_SHARED_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
HOST_TMP = (
    "/tmp"  # writable inside the sandbox as outside (sticky, world-writable): installs under it stay visible
)
# What the agent sets for every job (after the job's own env, so a job cannot fake them).
AGENT_SET = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    "SCALAR_VRAM_BUDGET_GB",
    "SCALAR_PORTS",
    "PORT",
    "SCALAR_JOB_ID",
    "SCALAR_ATTEMPT",
    "SCALAR_ASSIGNMENT_ID",
    "SCALAR_CONTROLLER_URL",
    "SCALAR_PYTHON",
    "SCALAR_GPU_MODEL",
)
DEFAULT_LANG = "C.UTF-8"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class IsolationError(Exception):
    """A bad isolation setting (the message names it and the fix)."""


@dataclass(frozen=True, slots=True)
class Isolation:
    """How this agent runs jobs (resolved at start)."""

    job_user: str = SAME_USER
    sandbox: str = "none"  # resolved: "bwrap" or "none"
    uid_range: tuple[int, int] = DEFAULT_UID_RANGE
    refuse: str | None = None  # why every tenant job is refused (a non-root agent asked for per-tenant)
    bwrap: str = "bwrap"
    setpriv: str = "setpriv"
    hidden: tuple[str, ...] = ()  # paths absent inside the sandbox (beside the state dir)
    pass_env: tuple[str, ...] = ()  # names of the agent's own variables an admin lets through

    @property
    def per_tenant(self) -> bool:
        return self.job_user == PER_TENANT


def parse_uid_range(text: str | Sequence[int]) -> tuple[int, int]:
    """``"200000-265535"`` or ``[200000, 265535]``: both ends included, above 1000 (system users)."""
    try:
        if isinstance(text, str):
            low_text, _, high_text = text.partition("-")
            low, high = int(low_text), int(high_text)
        else:
            low, high = (int(v) for v in text)
    except (TypeError, ValueError):
        raise IsolationError(
            f"uid_range {text!r} is not LOW-HIGH; give two whole numbers, e.g. 200000-265535"
        ) from None
    if not 1000 <= low <= high <= 2**31 - 2:
        raise IsolationError(
            f"uid_range {low}-{high}: needs 1000 <= LOW <= HIGH < 2147483647 (clear of system users), "
            "e.g. 200000-265535"
        )
    return low, high


def tenant_uid(tenant: str, uid_range: tuple[int, int] = DEFAULT_UID_RANGE) -> int:
    """The tenant's uid (also its gid): the same on every node and after every restart."""
    low, high = uid_range
    digest = hashlib.sha256(tenant.encode()).digest()
    return low + int.from_bytes(digest[:8], "big") % (high - low + 1)


def resolve(
    job_user: str | None,
    sandbox: str,
    uid_range: tuple[int, int] = DEFAULT_UID_RANGE,
    *,
    euid: int,
    bwrap: str | None,
    hidden: Sequence[str] = (),
    pass_env: Sequence[str] = (),
) -> tuple[Isolation, list[str]]:
    """The isolation this agent runs with, and what to say at start. ``job_user`` None: per-tenant."""
    wanted = job_user or PER_TENANT
    if wanted not in JOB_USERS:
        raise IsolationError(f"--job-user {wanted!r}: use per-tenant or same-user")
    if sandbox not in SANDBOXES:
        raise IsolationError(f"--sandbox {sandbox!r}: use auto, bwrap or none")
    notes: list[str] = []
    refuse = None
    if wanted == PER_TENANT and euid != 0:
        refuse = (
            f"this agent runs as uid {euid}, not root, so it cannot run a tenant's job under a uid of its own "
            "(job_user = per-tenant); start the agent as root, or pass --job-user same-user to run jobs as "
            "the agent's own user"
        )
        notes.append(f"refusing tenant jobs: {refuse}")
    if sandbox == "bwrap" and bwrap is None:
        raise IsolationError(
            "--sandbox bwrap: bubblewrap (bwrap) is not installed; install Debian's bubblewrap "
            "(`apt-get install bubblewrap`) or pass --sandbox none"
        )
    if sandbox == "bwrap" and euid != 0:
        raise IsolationError("--sandbox bwrap: needs the agent to run as root (bwrap drops to the job's uid)")
    setpriv = shutil.which("setpriv")
    if wanted == PER_TENANT and refuse is None and setpriv is None:
        raise IsolationError(
            "--job-user per-tenant: setpriv (util-linux) is not installed, so jobs cannot drop to their "
            "tenant's uid; install util-linux or pass --job-user same-user"
        )
    chosen = "bwrap" if sandbox == "bwrap" or (sandbox == "auto" and euid == 0 and bwrap) else "none"
    if wanted == SAME_USER:
        notes.append(
            f"job_user = same-user: jobs run as this agent's own user (uid {euid}) and can read what it "
            "reads; use per-tenant (as root) on a host shared by several tenants"
        )
    elif refuse is None and chosen == "none":
        notes.append(
            "sandbox = none: jobs run under their tenant's uid but see the host's /dev, /proc and /tmp; "
            "install bubblewrap for a sandbox"
        )
    iso = Isolation(
        job_user=wanted,
        sandbox=chosen,
        uid_range=uid_range,
        refuse=refuse,
        bwrap=bwrap or "bwrap",
        setpriv=setpriv or "setpriv",
        hidden=tuple(dict.fromkeys(str(Path(h).resolve()) for h in hidden)),
        pass_env=tuple(pass_env),
    )
    return iso, notes


# ---- the environment -----------------------------------------------------------------------------------


def job_env(
    requested: Mapping[str, str],
    agent_set: Mapping[str, str],
    base: Mapping[str, str],
    *,
    home: str,
    user: str,
    pass_env: Sequence[str] = (),
) -> dict[str, str]:
    """The job's whole environment: ``PATH`` (``dirname(SCALAR_PYTHON)`` first, then the agent's),
    ``HOME``/``TMPDIR`` (its private directory), ``USER``/``LOGNAME``, ``LANG``, the variables an admin
    passes through (``pass_env``), then what the job asked for, then what the agent sets (GPUs, ports, job
    ids, the controller's URL, ``SCALAR_PYTHON``). Nothing else of ``base`` (the agent's environment)."""
    python = agent_set.get("SCALAR_PYTHON")
    path = base.get("PATH") or DEFAULT_PATH
    if python:
        first = os.path.dirname(python)
        path = ":".join([first, *(p for p in path.split(":") if p and p != first)])
    env = {
        "PATH": path,
        "HOME": home,
        "TMPDIR": home,
        "USER": user,
        "LOGNAME": user,
        "LANG": base.get("LANG") or DEFAULT_LANG,
    }
    for name in pass_env:
        if name in base:
            env[name] = base[name]
    env.update(requested)
    env.update({k: v for k, v in agent_set.items() if k in AGENT_SET})
    return env


# ---- the command line ----------------------------------------------------------------------------------


def setpriv_prefix(setpriv: str, uid: int, gid: int) -> list[str]:
    """Drop to ``uid``/``gid`` with no supplementary groups, no capabilities and no way to regain any."""
    return [
        setpriv,
        "--reuid",
        str(uid),
        "--regid",
        str(gid),
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


def bwrap_prefix(
    bwrap: str,
    *,
    home: str,
    workdir: str | None,
    hidden: Sequence[str],
    gpu_indices: Sequence[int],
) -> list[str]:
    """bubblewrap's options, up to ``--``: the host's root read-only, a private ``/dev`` with the NVIDIA
    control devices and the job's own ``/dev/nvidiaN``, a private ``/proc`` (its pid namespace), the host's
    ``/tmp`` writable as it is outside (not a private one: the Python a job or an endpoint worker runs may be
    installed under it), the job's directory (its HOME) and ``workdir`` (if it gave one) writable where
    they are, and ``hidden`` paths replaced by empty ones (after the workdir: a workdir above one does not show it). Not ``--unshare-all`` (the job keeps the host network: its ports, and
    endpoint workers calling the controller), not ``--new-session`` (the shim stops the job's process
    group)."""
    argv = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--bind-try",
        HOST_TMP,
        HOST_TMP,
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    for device in (*NVIDIA_SHARED_DEVICES, *(f"/dev/nvidia{int(i)}" for i in gpu_indices)):
        argv += ["--dev-bind-try", device, device]
    if workdir:  # before the hidden paths, so a workdir above one of them does not bring it back
        argv += ["--bind", workdir, workdir]
    for path in hidden:
        argv += ["--tmpfs", path]
    argv += ["--bind", home, home]  # after the hidden paths: it lives in the agent's (hidden) state directory
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--chdir", workdir or home, "--"]
    return argv


def launch_prefix(
    iso: Isolation,
    *,
    uid: int,
    gid: int,
    home: str,
    workdir: str | None,
    hidden: Sequence[str],
    gpu_indices: Sequence[int],
    euid: int,
) -> list[str]:
    """What goes before the job's argv: bwrap (and/or setpriv when the job's uid is not the agent's)."""
    drop = setpriv_prefix(iso.setpriv, uid, gid) if uid != euid else []
    if iso.sandbox != "bwrap":
        return drop
    box = bwrap_prefix(iso.bwrap, home=home, workdir=workdir, hidden=hidden, gpu_indices=gpu_indices)
    return [*box, *drop]


# ---- what a uid may do with a path ---------------------------------------------------------------------


def uid_cannot(path: str | Path, uid: int, gid: int, want: int) -> str | None:
    """Why ``uid`` (with only group ``gid``) cannot ``want`` (``os.R_OK``/``os.W_OK``/``os.X_OK``) the
    path, walking every directory above it (each needs search permission); None if it can. Mode bits only
    (ACLs are not read)."""
    if uid == 0:
        return None
    target = Path(os.path.abspath(path))
    chain = [*reversed(target.parents), target]
    for i, part in enumerate(chain):
        try:
            st = part.stat()
        except OSError as err:
            return f"{part}: {err.strerror or err}"
        last = i == len(chain) - 1
        need = want if last else os.X_OK
        if not _allowed(st, uid, gid, need):
            what = {os.R_OK: "read", os.X_OK: "search" if stat.S_ISDIR(st.st_mode) else "run"}.get(
                need, "use"
            )
            return f"uid {uid} cannot {what} {part} (mode {stat.filemode(st.st_mode)}, owner {st.st_uid})"
    return None


def _allowed(st: os.stat_result, uid: int, gid: int, need: int) -> bool:
    if st.st_uid == uid:
        shift = 6
    elif st.st_gid == gid:
        shift = 3
    else:
        shift = 0
    bits = (st.st_mode >> shift) & 0o7
    return bits & need == need


def within(path: str, roots: Sequence[str]) -> str | None:
    """The first of ``roots`` that ``path`` is (or is inside), or None."""
    real = os.path.realpath(path)
    for root in roots:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip("/") + "/"):
            return root
    return None
