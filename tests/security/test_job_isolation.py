"""A tenant's job cannot take over the control plane (docs/security.md, "Jobs on a node").

Real processes: a control plane with authentication on and the local agent ``scalar up --demo`` starts
(per-tenant uids under bubblewrap, as root), and a second layout with per-tenant uids and no sandbox.
A hostile job of tenant ``team-a`` tries to read the admin token, the secret key, the database, the agent's
identity and journal, another tenant's job directory, and the environment of the agent, the controller and
that other tenant's running job: every attempt fails, and none of those values appears in its log, in an
API answer it gets, or in any file its uid can read. These tests run as root (they need real uids).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from scalar.agent import isolation as iso
from scalar.cli.agent import start_local_agent, stop_local_agent
from scalar.runtime.auth import ensure_local_admin_token
from tests.agent.harness import Controller, agent, controller, kill_tree_of, wait_until

pytestmark = pytest.mark.slow  # real agent, bwrap sandboxes and jobs end to end

# The hostile job: tries every target, prints what it got (so a leak would show in its log).
ATTACK = r"""
import json, os, sys
targets = json.loads(os.environ["TARGETS"])
for path in targets["files"]:
    try:
        with open(path, "rb") as f:
            print("READ", path, f.read(4000))
    except OSError as err:
        print("FAILED", path, type(err).__name__)
for path in targets["dirs"]:
    try:
        print("LISTED", path, os.listdir(path))
    except OSError as err:
        print("FAILED", path, type(err).__name__)
for pid in targets["pids"]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            print("READ", f"/proc/{pid}/environ", f.read())
    except OSError as err:
        print("FAILED", f"/proc/{pid}/environ", type(err).__name__)
others = []
for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) != os.getpid():
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                others.append(f.read().decode(errors="replace"))
        except OSError:
            pass
print("OTHER-ENVIRONS", json.dumps(others))
print("MY-ENV", json.dumps(dict(os.environ)))
print("UID", os.getuid(), os.getgid(), os.getgroups())
"""
VICTIM = (
    "import hashlib, os, time; print(hashlib.sha256(os.environ['VICTIM'].encode()).hexdigest(), flush=True); "
    "time.sleep(120)"
)
VICTIM_SECRET = "team-b-secret-value-0f1e2d3c"


@dataclass
class Demo:
    c: Controller
    data: Path
    state: Path
    admin: str

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(base_url=self.c.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)

    def user(self, tenant: str) -> str:
        return self.c.plane.create_token(tenant, "user").token


def submit(http: httpx.Client, **fields: Any) -> str:
    body = {"tier": "FAST", "gpu_count": 1, "expected_duration_sec": 600, **fields}
    response = http.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def job(http: httpx.Client, job_id: str) -> dict[str, Any]:
    response = http.get(f"/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def logs(http: httpx.Client, job_id: str) -> str:
    response = http.get(f"/jobs/{job_id}/logs")
    assert response.status_code == 200, response.text
    return str(response.json()["data"])


def finished(http: httpx.Client, job_id: str) -> dict[str, Any] | None:
    j = job(http, job_id)
    return j if j["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") else None


@contextmanager
def demo(tmp_path: Path, **overrides: Any) -> Iterator[Demo]:
    """What ``scalar up --demo`` runs: a control plane with auth on (SQLite in the data dir, the local
    admin token in ``admin.token``) and its local agent (``start_local_agent``, as root: per-tenant uids
    under bubblewrap, the data dir hidden from jobs)."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    with controller(f"sqlite:///{data / 'scalar.db'}", data, auth_required=True, **overrides) as c:
        admin = ensure_local_admin_token(c.plane.tokens, data)
        assert admin is not None
        # eight GPUs whatever this machine feeds: the attacks run beside their victims
        process = start_local_agent(c.plane, c.url, data, c.plane.settings, gpus="8xH100-80GB")
        try:
            wait_until(lambda: c.plane.agents.agents(), 40, "the local agent")
            yield Demo(c, data, data / "agent", admin)
        finally:
            stop_local_agent(process)
            kill_tree_of(data / "agent")


def agent_process(state: Path) -> int:
    """The pid of the agent whose state dir is ``state`` (not one of its shims)."""
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\x00")
        except OSError:
            continue
        if b"scalar.agent" in argv and str(state).encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no agent of {state} runs")


def attack_targets(d: Demo, victim_aid: str, pids: list[int]) -> dict[str, list[Any]]:
    safe = victim_aid.replace(":", "_")
    return {
        "files": [
            str(d.data / "admin.token"),
            str(d.data / "secret.key"),
            str(d.data / "scalar.db"),
            str(d.state / "identity.json"),
            str(d.state / "journal.json"),
            str(d.state / "assignments" / safe / "spec.json"),
            str(d.state / "assignments" / safe / "output.log"),
        ],
        "dirs": [str(d.state / "jobs" / safe), str(d.state / "assignments" / safe), str(d.data)],
        "pids": pids,
    }


def secrets_of(d: Demo) -> dict[str, str]:
    identity = json.loads((d.state / "identity.json").read_text())
    return {
        "admin token": d.admin,
        "node token": str(identity["node_token"]),
        "secret key": (d.data / "secret.key").read_text().strip(),
        "other tenant's secret": VICTIM_SECRET,
    }


def readable_files_of(uid: int, roots: list[Path]) -> list[Path]:
    found = []
    for root in roots:
        for path in [root, *root.rglob("*")]:
            if path.is_file() and iso.uid_cannot(path, uid, uid, os.R_OK) is None:
                found.append(path)
    return found


def assert_attack_failed(output: str, targets: dict[str, list[Any]]) -> None:
    lines = output.splitlines()
    assert not [line for line in lines if line.startswith(("READ", "LISTED"))], output
    tried = [line.split(" ")[1] for line in lines if line.startswith("FAILED")]
    wanted = [*targets["files"], *targets["dirs"], *(f"/proc/{p}/environ" for p in targets["pids"])]
    assert tried == wanted, output


def test_as_root_a_hostile_job_under_bwrap_reads_no_secret_of_the_control_plane_or_of_another_tenant(
    tmp_path: Path,
) -> None:
    with demo(tmp_path) as d:
        team_a, team_b = d.client(d.user("team-a")), d.client(d.user("team-b"))
        victim = submit(
            team_b,
            command=["python", "-c", VICTIM],
            env={"VICTIM": {"value": VICTIM_SECRET, "secret": True}},
        )
        wait_until(lambda: logs(team_b, victim).strip(), 60, "the victim's job to run")
        victim_aid = f"{victim}:1"
        safe = victim_aid.replace(":", "_")
        victim_child = int((d.state / "assignments" / safe / "child.pid").read_text())
        shim = int((d.state / "assignments" / safe / "shim.pid").read_text())
        agent_pid = agent_process(d.state)
        pids = [agent_pid, os.getpid(), shim, victim_child]  # the agent, the controller, the other job
        targets = attack_targets(d, victim_aid, pids)
        attacker = submit(team_a, command=["python", "-c", ATTACK], env={"TARGETS": json.dumps(targets)})
        done = wait_until(lambda: finished(team_a, attacker), 60, "the attack")
        assert done["state"] == "SUCCEEDED", done.get("reason")
        output = wait_until(lambda: "UID" in logs(team_a, attacker) and logs(team_a, attacker), 20, "its log")
        assert_attack_failed(output, targets)
        uid = iso.tenant_uid("team-a")
        assert f"UID {uid} {uid} []" in output  # its tenant's uid, no supplementary group
        assert iso.tenant_uid("team-b") != uid

        # its environment: what it asked for and what the agent sets, nothing else
        env = json.loads(output.split("MY-ENV ", 1)[1].splitlines()[0])
        assert set(env) - set(iso.AGENT_SET) - {"TARGETS"} <= {
            "PATH",
            "HOME",
            "TMPDIR",
            "USER",
            "LOGNAME",
            "LANG",
            "PYTHONPATH",  # the local agent passes it in a source checkout
            "PWD",  # bwrap's --chdir sets it
        }
        # its private directory, at its own path (the host's /tmp stays the host's: interpreters live there)
        assert env["HOME"] == env["TMPDIR"] and env["HOME"] not in {"/tmp", "/root"}

        # no secret anywhere it can reach: its log, the API's answers to its tenant, files its uid reads
        values = secrets_of(d)
        answers = [output, json.dumps(job(team_a, attacker)), team_a.get("/jobs").text]
        for name, value in values.items():
            for text in answers:
                assert value not in text, f"the {name} leaked"
        for path in readable_files_of(uid, [d.data, tmp_path]):
            content = path.read_bytes()
            for name, value in values.items():
                assert value.encode() not in content, f"the {name} is readable by uid {uid} in {path}"

        # and none at rest in clear: no file of the data dir holds the other tenant's secret value
        for path in d.data.rglob("*"):
            if path.is_file():
                assert VICTIM_SECRET.encode() not in path.read_bytes(), path
        spec = json.loads((d.state / "assignments" / safe / "spec.json").read_text())
        assert "env" not in spec and spec["argv"] == ["python", "-c", VICTIM] and spec["uid"] != uid
        # the victim got its secret all the same
        import hashlib

        assert logs(team_b, victim).strip() == hashlib.sha256(VICTIM_SECRET.encode()).hexdigest()

        # every file of the data dir is 0600 in 0700 directories (job homes: owned by the job's uid)
        for path in [d.data, *d.data.rglob("*")]:
            mode = stat.S_IMODE(path.lstat().st_mode)
            if path.is_dir():
                assert mode == 0o700, f"{path} is {oct(mode)}"
            elif path.is_file():
                assert mode == 0o600, f"{path} is {oct(mode)}"
        home = d.state / "jobs" / safe
        assert home.stat().st_uid == iso.tenant_uid("team-b")


@contextmanager
def searchable_dir() -> Iterator[Path]:
    """A directory every uid may search (0711 under /tmp), for an agent's state without a sandbox."""
    base = Path(tempfile.mkdtemp(prefix="scalar-iso-", dir="/tmp"))
    os.chmod(base, 0o711)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_without_a_sandbox_tenant_uids_still_keep_a_job_out_of_the_agent_and_other_jobs(
    sqlite_url: str, tmp_path: Path
) -> None:
    with searchable_dir() as base, controller(sqlite_url, tmp_path, auth_required=True) as c:
        state = base / "agent"
        token = c.plane.agents.create_join_token(_join()).token
        node = agent(c.url, token, state, "2xH100-80GB", "--job-user", "per-tenant", "--sandbox", "none")
        node.start()
        try:
            wait_until(lambda: c.plane.agents.agents(), 40, "the agent")
            d = Demo(c, tmp_path, state, c.plane.create_token("default", "admin").token)
            team_a, team_b = d.client(d.user("team-a")), d.client(d.user("team-b"))
            victim = submit(
                team_b,
                command=["python", "-c", VICTIM],
                env={"VICTIM": {"value": VICTIM_SECRET, "secret": True}},
            )
            wait_until(lambda: logs(team_b, victim).strip(), 60, "the victim's job to run")
            safe = f"{victim}_1"
            child = int((state / "assignments" / safe / "child.pid").read_text())
            assert node.proc is not None
            pids = [node.proc.pid, os.getpid(), child]
            targets = {
                "files": [
                    str(state / "identity.json"),
                    str(state / "journal.json"),
                    str(state / "assignments" / safe / "spec.json"),
                ],
                "dirs": [str(state / "jobs" / safe), str(state / "assignments"), str(state / "jobs")],
                "pids": pids,
            }
            attacker = submit(team_a, command=["python", "-c", ATTACK], env={"TARGETS": json.dumps(targets)})
            done = wait_until(lambda: finished(team_a, attacker), 60, "the attack")
            assert done["state"] == "SUCCEEDED", done.get("reason")
            output = wait_until(lambda: "UID" in logs(team_a, attacker) and logs(team_a, attacker), 20, "log")
            assert_attack_failed(output, targets)
            others = json.loads(output.split("OTHER-ENVIRONS ", 1)[1].splitlines()[0])
            assert not [e for e in others if VICTIM_SECRET in e]  # another uid's environ stays unreadable
            uid = iso.tenant_uid("team-a")
            assert f"UID {uid} {uid}" in output
            home = json.loads(output.split("MY-ENV ", 1)[1].splitlines()[0])["HOME"]
            assert home == str(state / "jobs" / f"{attacker}_1")  # its own private directory
            # deleted once the attempt has ended and its output reached the controller
            wait_until(lambda: not Path(home).exists(), 30, "its private directory to go")
            assert (state / "jobs" / f"{victim}_1").is_dir()  # the running one's stays
        finally:
            node.stop()
            kill_tree_of(state)


def _join() -> Any:
    from scalar.wire.agent import JoinTokenRequest

    return JoinTokenRequest(provider="local", ttl_s=600)


def test_a_restarted_agent_readopts_its_sandboxed_jobs_and_new_ones_still_get_their_secrets(
    tmp_path: Path,
) -> None:
    script = (
        "import os, sys, time\n"
        "print('start', os.environ['S'] == 'sealed-value-1', flush=True)\n"
        "time.sleep(float(os.environ['HOLD']))\n"
        "print('end', os.environ['S'] == 'sealed-value-1', flush=True)\n"
    )
    with demo(tmp_path) as d:
        team = d.client(d.user("team-r"))
        secret = {"S": {"value": "sealed-value-1", "secret": True}}
        first = submit(team, command=["python", "-c", script], env={**secret, "HOLD": "8"})
        wait_until(lambda: "start True" in logs(team, first), 60, "the first job")
        journal = json.loads((d.state / "journal.json").read_text())
        [entry] = journal["assignments"]
        assert entry["uid"] == iso.tenant_uid("team-r") and entry["attempt"] == 1
        assert entry["shim_pid"] and entry["shim_ticks"]
        assert "sealed-value-1" not in (d.state / "journal.json").read_text()
        shim = entry["shim_pid"]

        # kill -9 the agent while the job runs; a job submitted meanwhile waits for it
        agent_pid = agent_process(d.state)
        os.kill(agent_pid, signal.SIGKILL)
        second = submit(team, command=["python", "-c", script], env={**secret, "HOLD": "0"})
        time.sleep(1.0)
        assert Path(f"/proc/{shim}").exists()  # the shim and its job outlive the agent
        restarted = start_local_agent(d.c.plane, d.c.url, d.data, d.c.plane.settings, gpus="8xH100-80GB")
        try:
            for job_id in (first, second):
                done = wait_until(lambda j=job_id: finished(team, j), 90, f"{job_id}")
                assert done["state"] == "SUCCEEDED", done.get("reason")
                text = wait_until(lambda j=job_id: "end" in logs(team, j) and logs(team, j), 20, "its log")
                assert "start True" in text and "end True" in text
            journal = json.loads((d.state / "journal.json").read_text())
            firsts = [e for e in journal["assignments"] if e["assignment_id"] == f"{first}:1"]
            assert firsts and firsts[0]["shim_pid"] == shim  # adopted, not started again
        finally:
            stop_local_agent(restarted)


GRACEFUL = (
    "import signal, sys, time\n"
    "def bye(*_):\n"
    "    time.sleep(1.0); print('cleaned up', flush=True); sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, bye)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)
STUBBORN = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def run_shim(tmp_path: Path, name: str, script: str, grace_s: float) -> tuple[dict[str, Any], str, float]:
    """A shim running ``script`` under bwrap as a tenant uid; SIGTERM it once the job is ready."""
    directory = tmp_path / name
    directory.mkdir(mode=0o700)
    home = tmp_path / f"{name}-home"
    home.mkdir(mode=0o700)
    uid = iso.tenant_uid("team-g")
    os.chown(home, uid, uid)
    isolation, _ = iso.resolve("per-tenant", "bwrap", euid=0, bwrap=shutil.which("bwrap"))
    launch = iso.launch_prefix(
        isolation, uid=uid, gid=uid, home=str(home), workdir=None, hidden=[], gpu_indices=[0], euid=0
    )
    spec = {
        "argv": [sys.executable, "-c", script],
        "launch": launch,
        "sandbox": "bwrap",
        "cwd": str(home),
        "uid": uid,
        "stop_grace_s": grace_s,
    }
    (directory / "spec.json").write_text(json.dumps(spec))
    shim = subprocess.Popen(
        [sys.executable, "-m", "scalar.agent.shim", str(directory)],
        stdin=subprocess.PIPE,
        env={**os.environ, "SCALAR_AGENT_NO_CGROUPS": "1"},
        start_new_session=True,
    )
    assert shim.stdin is not None
    shim.stdin.write(json.dumps({"PATH": os.environ["PATH"], "HOME": "/tmp"}).encode())
    shim.stdin.close()
    try:
        wait_until(
            lambda: (
                (directory / "output.log").is_file() and b"ready" in (directory / "output.log").read_bytes()
            ),
            30,
            "the job",
        )
        started = time.monotonic()
        shim.send_signal(signal.SIGTERM)
        shim.wait(30)
        took = time.monotonic() - started
    finally:
        if shim.poll() is None:
            shim.kill()
    outcome = json.loads((directory / "exit.json").read_text())
    return outcome, (directory / "output.log").read_text(), took


def test_stop_grace_is_honoured_through_the_sandbox(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    outcome, output, took = run_shim(tmp_path, "graceful", GRACEFUL, grace_s=5.0)
    assert "cleaned up" in output  # SIGTERM reached the job inside the sandbox ...
    assert outcome["exit_code"] == 0 and outcome["stopped"] == "stopped"  # ... and its own exit came back
    assert 0.9 <= took < 5.0  # it had its second, and was not killed at once nor at the end of the grace
    outcome, output, took = run_shim(tmp_path, "stubborn", STUBBORN, grace_s=1.5)
    assert outcome["signal"] == signal.SIGKILL and 1.4 <= took < 10.0  # killed once the grace was over
