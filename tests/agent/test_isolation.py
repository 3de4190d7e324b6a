"""How a job runs on its node (scalar.agent.isolation): its uid, its environment, its bwrap command line,
and the settings and flags that choose them. The real processes are in tests/security/test_job_isolation.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.agent import isolation as iso
from scalar.agent.__main__ import parse
from scalar.agent.runner import Entry, Runner
from scalar.cli.agent import local_agent_env, local_isolation_args
from scalar.runtime import SettingsError, load_settings
from tests.agent.harness import wait_until


@given(st.text(min_size=1, max_size=40), st.integers(1000, 10**6), st.integers(0, 10**5))
def test_a_tenant_always_gets_the_same_uid_inside_the_range(tenant: str, low: int, width: int) -> None:
    uid_range = (low, low + width)
    uid = iso.tenant_uid(tenant, uid_range)
    assert low <= uid <= low + width
    assert iso.tenant_uid(tenant, uid_range) == uid


def test_tenants_get_uids_of_their_own() -> None:
    uids = {iso.tenant_uid(f"team-{i}") for i in range(50)}
    assert len(uids) == 50 and all(200000 <= u <= 265535 for u in uids)


def test_the_uid_range_is_parsed_and_bad_ones_are_refused() -> None:
    assert iso.parse_uid_range("300000-300100") == (300000, 300100)
    assert iso.parse_uid_range([300000, 300100]) == (300000, 300100)
    for bad in ("300000", "a-b", "10-20", "300100-300000", "1000-2147483647"):
        with pytest.raises(iso.IsolationError, match="uid_range"):
            iso.parse_uid_range(bad)


AGENT_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "en_US.UTF-8",
    "SCALAR_SECRET_KEY": "key-of-the-controller",
    "SCALAR_JOIN_TOKEN": "sjt_x",
    "SCALAR_DATABASE_URL": "postgresql://u:p@db/scalar",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "PYTHONPATH": "/src",
    "HOME": "/root",
}


def test_the_environment_is_the_allow_list_and_nothing_else_of_the_agent() -> None:
    agent_set = {
        "CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "SCALAR_JOB_ID": "job-1",
        "SCALAR_PYTHON": "/opt/venv/bin/python",
        "SCALAR_CONTROLLER_URL": "http://127.0.0.1:8000",
        "SCALAR_PORTS": "4000,4001",
        "PORT": "4000",
        "SCALAR_GPU_MODEL": "H100",
        "NOT_ALLOWED": "x",  # the agent sets only the allow-listed names
    }
    requested = {"MODEL": "llama", "CUDA_VISIBLE_DEVICES": "0,1,2,3", "HOME": "/work"}
    env = iso.job_env(requested, agent_set, AGENT_ENV, home="/tmp", user="scalar-team-a")
    assert env == {
        "PATH": "/opt/venv/bin:/usr/bin:/bin",  # dirname(SCALAR_PYTHON) first
        "HOME": "/work",  # the job asked for its own
        "TMPDIR": "/tmp",
        "USER": "scalar-team-a",
        "LOGNAME": "scalar-team-a",
        "LANG": "en_US.UTF-8",
        "MODEL": "llama",
        "CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b",  # a job cannot pick other GPUs
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "SCALAR_JOB_ID": "job-1",
        "SCALAR_PYTHON": "/opt/venv/bin/python",
        "SCALAR_CONTROLLER_URL": "http://127.0.0.1:8000",
        "SCALAR_PORTS": "4000,4001",
        "PORT": "4000",
        "SCALAR_GPU_MODEL": "H100",
    }
    passed = iso.job_env({}, {}, AGENT_ENV, home="/h", user="u", pass_env=("PYTHONPATH", "UNSET"))
    assert passed["PYTHONPATH"] == "/src" and "UNSET" not in passed
    assert "SCALAR_SECRET_KEY" not in passed and passed["LANG"] == "en_US.UTF-8"


def test_the_bwrap_command_line() -> None:
    argv = iso.bwrap_prefix(
        "/usr/bin/bwrap",
        home="/var/lib/agent/jobs/job-1_1",
        workdir=None,
        hidden=["/var/lib/agent", "/srv/scalar-data"],
        gpu_indices=[2, 5],
    )
    assert argv == [
        "/usr/bin/bwrap",
        "--ro-bind", "/", "/",
        "--bind-try", "/tmp", "/tmp",  # the host's /tmp as it is (CUDA MPS's pipes, interpreters under it)
        "--dev", "/dev",
        "--proc", "/proc",
        "--dev-bind-try", "/dev/nvidiactl", "/dev/nvidiactl",
        "--dev-bind-try", "/dev/nvidia-uvm", "/dev/nvidia-uvm",
        "--dev-bind-try", "/dev/nvidia-uvm-tools", "/dev/nvidia-uvm-tools",
        "--dev-bind-try", "/dev/nvidia2", "/dev/nvidia2",
        "--dev-bind-try", "/dev/nvidia5", "/dev/nvidia5",
        "--tmpfs", "/var/lib/agent",
        "--tmpfs", "/srv/scalar-data",
        "--bind", "/var/lib/agent/jobs/job-1_1", "/var/lib/agent/jobs/job-1_1",  # after the hidden state dir
        "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        "--chdir", "/var/lib/agent/jobs/job-1_1",
        "--",
    ]  # fmt: skip
    # the job keeps the host network and its session (the shim signals its process group)
    assert not {"--unshare-all", "--unshare-net", "--new-session", "--share-net"} & set(argv)
    with_workdir = iso.bwrap_prefix(
        "bwrap", home="/h", workdir="/data", hidden=["/data/agent"], gpu_indices=[]
    )
    at = with_workdir.index("--bind")
    assert with_workdir[at : at + 8] == [
        "--bind", "/data", "/data",  # the workdir first ...
        "--tmpfs", "/data/agent",  # ... so a hidden path inside it stays hidden
        "--bind", "/h", "/h",
    ]  # fmt: skip
    assert with_workdir[-3:] == ["--chdir", "/data", "--"]


def test_the_launch_drops_to_the_tenant_uid_inside_bwrap_or_directly() -> None:
    boxed = iso.Isolation(iso.PER_TENANT, "bwrap", bwrap="/usr/bin/bwrap", setpriv="/usr/bin/setpriv")
    argv = iso.launch_prefix(
        boxed, uid=200007, gid=200007, home="/j", workdir=None, hidden=[], gpu_indices=[0], euid=0
    )
    assert argv[0] == "/usr/bin/bwrap"
    inner = argv[argv.index("--") + 1 :]
    assert inner == [
        "/usr/bin/setpriv",
        "--reuid", "200007",
        "--regid", "200007",
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]  # fmt: skip
    direct = iso.Isolation(iso.PER_TENANT, "none", setpriv="setpriv")
    assert iso.launch_prefix(
        direct, uid=200007, gid=200007, home="/j", workdir=None, hidden=[], gpu_indices=[], euid=0
    ) == ["setpriv", *inner[1:]]
    same = iso.Isolation(iso.SAME_USER, "none")
    assert (
        iso.launch_prefix(same, uid=0, gid=0, home="/j", workdir=None, hidden=[], gpu_indices=[], euid=0)
        == []
    )


def test_what_the_agent_resolves_and_says_at_start() -> None:
    root, notes = iso.resolve(None, "auto", euid=0, bwrap="/usr/bin/bwrap")
    assert (root.job_user, root.sandbox, root.refuse) == ("per-tenant", "bwrap", None) and not notes
    bare, notes = iso.resolve(None, "auto", euid=0, bwrap=None)
    assert bare.sandbox == "none" and "install bubblewrap" in notes[0]
    user, notes = iso.resolve(None, "auto", euid=1000, bwrap="/usr/bin/bwrap")
    assert user.sandbox == "none" and user.refuse is not None
    assert "uid 1000, not root" in user.refuse and "--job-user same-user" in user.refuse
    assert notes[0].startswith("refusing tenant jobs")
    same, notes = iso.resolve("same-user", "auto", euid=1000, bwrap=None)
    assert same.refuse is None and "same-user" in notes[0]
    with pytest.raises(iso.IsolationError, match="bubblewrap"):
        iso.resolve(None, "bwrap", euid=0, bwrap=None)
    with pytest.raises(iso.IsolationError, match="per-tenant or same-user"):
        iso.resolve("nobody", "auto", euid=0, bwrap=None)


def test_a_root_agent_without_setpriv_cannot_run_per_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(iso.IsolationError, match="setpriv"):
        iso.resolve("per-tenant", "none", euid=0, bwrap=None)
    same, _ = iso.resolve("same-user", "none", euid=0, bwrap=None)
    assert same.job_user == "same-user"


def test_a_non_root_agent_refuses_tenant_jobs_with_the_reason(tmp_path: Path) -> None:
    refusing, _ = iso.resolve(None, "none", euid=1000, bwrap=None)
    runner = Runner(tmp_path / "state", base_env={}, isolation=refusing)
    runner.start(
        {"assignment_id": "job-1:1", "job_id": "job-1", "attempt": 1, "argv": ["true"], "tenant": "a"}
    )
    [report] = runner.reports()
    assert report["state"] == "failed_to_start" and "not root" in report["error"]


def test_a_workdir_the_uid_cannot_read_or_inside_the_agents_state_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    runner = Runner(tmp_path / "state", base_env={}, isolation=iso.Isolation(iso.PER_TENANT, "bwrap"))
    for aid, workdir, why in (
        ("job-1:1", str(locked), "is not readable by the job's uid"),
        ("job-2:1", str(tmp_path / "state"), "which jobs on this node may not see"),
    ):
        runner.start(
            {"assignment_id": aid, "job_id": aid[:5], "attempt": 1, "argv": ["true"], "workdir": workdir}
        )
        report = runner.report(runner.entries[aid])
        assert report["state"] == "failed_to_start" and why in report["error"], report


def test_uid_cannot_walks_every_directory() -> None:
    base = Path(tempfile.mkdtemp(prefix="scalar-uid-", dir="/tmp"))  # /tmp: every uid may search it
    try:
        os.chmod(base, 0o755)
        inner = base / "top" / "inner"
        inner.mkdir(parents=True)
        target = inner / "file"
        target.write_text("x")
        os.chmod(target, 0o640)
        os.chmod(inner, 0o755)
        os.chmod(base / "top", 0o700)
        uid, other = 200123, 200124
        why = iso.uid_cannot(target, uid, uid, os.R_OK)
        assert why is not None and "cannot search" in why and str(base / "top") in why
        os.chown(base / "top", uid, uid)
        assert iso.uid_cannot(base / "top", uid, uid, os.R_OK | os.X_OK) is None
        assert "cannot read" in str(iso.uid_cannot(target, uid, uid, os.R_OK))  # root's, not for others
        os.chown(target, 0, uid)  # group read
        assert iso.uid_cannot(target, uid, uid, os.R_OK) is None
        assert iso.uid_cannot(target, uid, uid, os.W_OK) is not None
        assert iso.uid_cannot(target, other, other, os.R_OK) is not None
        assert iso.uid_cannot(target, 0, 0, os.R_OK | os.W_OK) is None
    finally:
        shutil.rmtree(base)


def test_the_settings_and_the_flags(tmp_path: Path) -> None:
    toml = tmp_path / "scalar.toml"
    toml.write_text(
        '[agents]\njob_user = "same-user"\nsandbox = "none"\nuid_range = "300000-300999"\n'
        "log_max_bytes_per_attempt = 1024\n[logs]\nmax_bytes_per_tenant = 2048\nretention_s = 60\n"
    )
    s = load_settings(toml, {}, {})
    assert (s.agent_job_user, s.agent_sandbox, s.agent_uid_range) == ("same-user", "none", (300000, 300999))
    assert (s.agent_log_max_bytes_per_attempt, s.logs_max_bytes_per_tenant, s.logs_retention_s) == (
        1024,
        2048,
        60.0,
    )
    defaults = load_settings(None, {}, {})
    assert defaults.agent_job_user == "per-tenant" and defaults.agent_log_max_bytes_per_attempt == 64 * 2**20
    assert defaults.logs_max_bytes_per_tenant == 2**30 and defaults.logs_retention_s == 7 * 86400
    for body, key in (
        ('[agents]\njob_user = "root"', "[agents].job_user"),
        ('[agents]\nsandbox = "docker"', "[agents].sandbox"),
        ('[agents]\nuid_range = "5-10"', "[agents].uid_range"),
        ("[logs]\nmax_bytes_per_tenant = 0", "[logs].max_bytes_per_tenant"),
    ):
        toml.write_text(body)
        with pytest.raises(SettingsError) as err:
            load_settings(toml, {}, {})
        assert key in str(err.value)
    flags = "--job-user same-user --sandbox none --uid-range 300000-300009 --hide /srv/data"
    flags += " --pass-env PYTHONPATH --log-max-bytes-per-attempt 4096"
    options = parse(["--controller", "http://x", *flags.split()])
    assert (options.job_user, options.sandbox, options.uid_range) == ("same-user", "none", (300000, 300009))
    assert options.hide == ("/srv/data",) and "PYTHONPATH" in options.pass_env
    assert options.log_max_bytes_per_attempt == 4096


def test_the_demo_agent_gets_a_scrubbed_environment_and_falls_back_to_same_user_when_not_root() -> None:
    env = local_agent_env({**AGENT_ENV, "SCALAR_TOKEN": "st_x"})
    assert env == {"PATH": "/usr/bin:/bin", "LANG": "en_US.UTF-8", "PYTHONPATH": "/src", "HOME": "/root"}
    settings = load_settings(None, {}, {})
    args, warning = local_isolation_args(settings, euid=1000)
    assert args[:2] == ["--job-user", "same-user"] and warning is not None and "not root" in warning
    args, warning = local_isolation_args(settings, euid=0)
    assert args[:4] == ["--job-user", "per-tenant", "--sandbox", "auto"] and warning is None
    assert args[-2:] == ["--log-max-bytes-per-attempt", str(64 * 2**20)]


def test_an_assignment_whose_shim_never_got_its_environment_is_started_again(tmp_path: Path) -> None:
    state = tmp_path / "s"
    runner = Runner(state, base_env={})
    directory = state / "assignments" / "job-1_1"
    directory.mkdir()
    (directory / "spec.json").write_text(json.dumps({"argv": ["true"], "cwd": str(tmp_path)}))
    # the agent died before it wrote the environment: the shim gets an empty stdin and leaves no trace
    shim = subprocess.run([sys.executable, "-m", "scalar.agent.shim", str(directory)], input=b"", timeout=60)
    assert shim.returncode == 2
    assert not (directory / "shim.pid").exists() and not (directory / "exit.json").exists()
    runner.entries["job-1:1"] = Entry("job-1:1", str(directory), time.time())
    runner.save()

    again = Runner(state, base_env={})  # the restarted agent forgets it ...
    assert not again.has("job-1:1") and not directory.exists()
    # ... and starts it from the next heartbeat reply, which carries the environment again
    check = "import os, sys; sys.exit(0 if os.environ['S'].endswith('-7f3a') else 3)"
    again.start(
        {"assignment_id": "job-1:1", "job_id": "job-1", "attempt": 1, "argv": [sys.executable, "-c", check]}
        | {"env": {"S": "sealed-7f3a"}}
    )
    report = wait_until(
        lambda: (r := again.report(again.entries["job-1:1"]))["state"] == "exited" and r, 60, "the job"
    )
    assert report["exit_code"] == 0
    spec = json.loads((directory / "spec.json").read_text())
    assert "env" not in spec
    for path in [state, *state.rglob("*")]:
        assert path.is_dir() or b"sealed-7f3a" not in path.read_bytes(), path
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"


def test_an_older_agents_spec_with_the_environment_is_sealed_on_restart(tmp_path: Path) -> None:
    state = tmp_path / "s"
    directory = state / "assignments" / "job-1_1"
    directory.mkdir(parents=True)
    old_spec = {
        "argv": ["sleep", "60"],
        "env": {"TOKEN": "secret-9d2c", "CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"},
    }
    (directory / "spec.json").write_text(json.dumps(old_spec))
    (directory / "exit.json").write_text(json.dumps({"exit_code": 0, "finished_at": time.time()}))
    journal = {"assignments": [{"assignment_id": "job-1:1", "directory": str(directory), "started_at": 1.0}]}
    (state / "journal.json").write_text(json.dumps(journal))
    runner = Runner(state, base_env={})
    assert runner.has("job-1:1") and runner.entries["job-1:1"].gpu_uuids == ["GPU-a", "GPU-b"]
    assert b"secret-9d2c" not in (directory / "spec.json").read_bytes()
    assert json.loads((directory / "spec.json").read_text())["gpu_uuids"] == ["GPU-a", "GPU-b"]


def test_scalar_agent_refuses_a_bad_isolation_flag_naming_it() -> None:
    from typer.testing import CliRunner

    from scalar.cli.main import app

    runner = CliRunner()
    for args, named in (
        (["--job-user", "root"], "--job-user 'root': use per-tenant or same-user"),
        (["--sandbox", "docker"], "--sandbox 'docker': use auto, bwrap or none"),
        (["--uid-range", "5-10"], "--uid-range"),
    ):
        result = runner.invoke(app, ["agent", "--controller", "http://127.0.0.1:9", *args])
        assert result.exit_code == 2 and named in result.output, result.output
    bad = subprocess.run(
        [sys.executable, "-m", "scalar.agent", "--controller", "http://127.0.0.1:9", "--uid-range", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--uid-range" in bad.stderr


def test_the_local_agent_offers_the_gpus_this_machine_can_feed() -> None:
    from scalar.agent.facts import FactsError
    from scalar.cli.agent import local_fake_gpus

    assert local_fake_gpus(2, 25.0) == "1xH100-80GB"  # a small machine: one, so a command still runs
    assert local_fake_gpus(16, 64.0) == "2xH100-80GB"  # memory-bound: 64 GB feeds two at 32 GB each
    assert local_fake_gpus(16, 256.0) == "4xH100-80GB"  # CPU-bound: 4 vCPUs each
    assert local_fake_gpus(256, 4096.0) == "8xH100-80GB"  # at most a server's eight
    assert local_fake_gpus(2, 25.0, "8xA100-40GB") == "8xA100-40GB"  # $SCALAR_FAKE_GPUS wins
    with pytest.raises(FactsError, match="8xH100"):
        local_fake_gpus(2, 25.0, "lots")
