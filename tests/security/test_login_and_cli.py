"""The dashboard's sign-in (HttpOnly cookie), the CLI's token, ``scalar up``'s first admin token and
``--no-auth``, which is refused unless the server binds to loopback only."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner, Result

from scalar.api.app import create_app
from scalar.api.client import default_token
from scalar.cli.main import app as cli_app
from scalar.runtime import ControlPlane
from scalar.runtime.auth import ensure_local_admin_token, is_loopback_only, token_file
from tests.api.live_server import serve
from tests.conftest import REPO
from tests.runtime.helpers import Clock, settings_for
from tests.security.conftest import Secured


def test_a_browser_signs_in_with_a_token_and_gets_an_httponly_cookie(secured_sqlite: Secured) -> None:
    api = secured_sqlite
    token = api.token("team-a")
    with httpx.Client(base_url=api.url, timeout=30) as browser:
        page = browser.get("/ui/jobs", params={"state": "PENDING"}, headers={"accept": "text/html"})
        assert page.status_code == 303
        assert page.headers["location"] == "/login?next=%2Fui%2Fjobs%3Fstate%3DPENDING"
        form = browser.get("/login")
        assert form.status_code == 200 and 'name="token"' in form.text

        bad = browser.post("/login", data={"token": "scalar.tok_0000000000000000.nope", "next": "/jobs"})
        assert bad.status_code == 401 and "not valid" in bad.text
        assert "set-cookie" not in bad.headers

        good = browser.post("/login", data={"token": token, "next": "/jobs"})
        assert good.status_code == 303 and good.headers["location"] == "/jobs"
        cookie = good.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        assert browser.get("/whoami").json()["tenant"] == "team-a"  # the cookie authenticates

        elsewhere = browser.post("/login", data={"token": token, "next": "//evil.example/x"})
        assert elsewhere.headers["location"] == "/ui"  # no open redirect

        out = browser.post("/logout")
        assert out.status_code == 303
        browser.cookies.clear()
        assert browser.get("/whoami").status_code == 401


def test_without_auth_every_request_is_an_admin_of_default(tmp_path: Path) -> None:
    cp = ControlPlane(settings_for(f"sqlite:///{tmp_path / 'a.db'}", tmp_path), clock=Clock())
    cp.open()
    try:
        with serve(create_app(cp)) as url, httpx.Client(base_url=url) as client:
            assert client.get("/whoami").json() == {
                "token_id": "(auth off)",
                "tenant": "default",
                "role": "admin",
                "auth_required": False,
            }
            job = client.post("/jobs", json={"tier": "FAST", "gpu_count": 1}).json()
            assert job["tenant"] == "default"
            assert client.get("/jobs").json()["count"] == 1
    finally:
        cp.stop()


def test_the_local_admin_token_is_made_once_and_kept_0600(tmp_path: Path) -> None:
    cp = ControlPlane(settings_for(f"sqlite:///{tmp_path / 'a.db'}", tmp_path), clock=Clock())
    cp.open()
    try:
        data_dir = tmp_path / "data"
        first = ensure_local_admin_token(cp.tokens, data_dir)
        assert first is not None
        path = token_file(data_dir)
        assert path.read_text().strip() == first
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert ensure_local_admin_token(cp.tokens, data_dir) is None  # kept: not shown again
        cp.revoke_token(first.split(".")[1])
        again = ensure_local_admin_token(cp.tokens, data_dir)  # revoked: a new one
        assert again is not None and again != first
        assert cp.authenticate(again) is not None
    finally:
        cp.stop()


def test_the_client_finds_its_token(tmp_path: Path) -> None:
    file = tmp_path / "t"
    file.write_text("scalar.tok_1.x\n")
    assert default_token("http://10.0.0.1:8000", {"SCALAR_TOKEN": "abc"}) == "abc"
    assert default_token("http://10.0.0.1:8000", {"SCALAR_TOKEN_FILE": str(file)}) == "scalar.tok_1.x"
    # the data dir's admin token goes to a server on loopback only
    assert default_token("http://example.com:8000", {}) is None


def test_loopback_only() -> None:
    assert is_loopback_only("127.0.0.1") and is_loopback_only("::1") and is_loopback_only("localhost")
    assert not is_loopback_only("0.0.0.0") and not is_loopback_only("::")
    assert not is_loopback_only("10.1.2.3") and not is_loopback_only("no-such-host.invalid")


def _scalar(*args: str, env: dict[str, str] | None = None) -> Result:
    """``scalar ARGS`` in this process (the current directory is the test's)."""
    return CliRunner().invoke(cli_app, list(args), env={"SCALAR_TOKEN": "", **(env or {})})


@pytest.mark.parametrize("command", ["up", "api"])
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3"])
def test_no_auth_is_refused_unless_on_loopback(
    tmp_path: Path, host: str, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _scalar(command, "--no-auth", "--host", host, "--port", "0", "--data-dir", str(tmp_path))
    assert result.exit_code == 2, result.output
    assert "--no-auth: refused" in result.output
    assert not (tmp_path / "scalar.db").exists()  # nothing started


def _start_up(cwd: Path, *, expect_token: bool) -> tuple[subprocess.Popen[str], list[str], str]:
    """``scalar up`` in ``cwd`` (data dir ./.scalar); its banner lines up to the auth ones, and its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "scalar", "up", "--port", "0", "--time-scale", "600", "--seed", "1"],
        cwd=cwd,
        env={**os.environ, "SCALAR_TOKEN": "", "PYTHONPATH": str(REPO / "src")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].startswith("Auth"):
        line = proc.stdout.readline()
        assert line, f"scalar up stopped: {lines}"
        lines.append(line.rstrip("\n"))
    if expect_token:
        lines += [proc.stdout.readline().rstrip("\n") for _ in range(2)]
    url = next(line.split()[1] for line in lines if line.startswith("  API"))
    return proc, lines, url


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_scalar_up_prints_its_admin_token_once_and_the_cli_uses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    proc, lines, url = _start_up(tmp_path, expect_token=True)
    try:
        token = lines[-1].strip()
        assert lines[-2].startswith("Admin token")
        path = tmp_path / ".scalar" / "admin.token"
        assert path.read_text().strip() == token
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert httpx.get(f"{url}/jobs").status_code == 401
        # the CLI, run where `scalar up` was, reads ./.scalar/admin.token
        created = _scalar("token", "create", "--tenant", "team-a", "--server", url)
        assert created.exit_code == 0, created.output
        user_token = created.stdout.strip()
        assert user_token.startswith("scalar.tok_") and "shown only now" in created.stderr
        listed = _scalar("token", "list", "--json", "--server", url)
        assert "team-a" in listed.stdout and user_token.split(".")[2] not in listed.stdout
        submitted = _scalar("--token", user_token, "submit", "-y", "--gpus", "1", "--server", url)
        assert submitted.exit_code == 0, submitted.output
        refused = _scalar("token", "list", "--server", url, "--token", user_token)
        assert refused.exit_code == 2 and "admin" in refused.stderr  # a user token is no admin
        revoked = _scalar("token", "revoke", user_token.split(".")[1], "--server", url)
        assert revoked.exit_code == 0, revoked.output
        gone = _scalar("jobs", "--server", url, env={"SCALAR_TOKEN": user_token})
        assert gone.exit_code == 2 and "valid API token" in gone.stderr
    finally:
        _stop(proc)
    proc, lines, url = _start_up(tmp_path, expect_token=False)
    try:
        assert not any("Admin token" in line for line in lines)  # shown once only
        assert not any(token in line for line in lines)
        jobs = _scalar("jobs", "--json", "--server", url)
        assert jobs.exit_code == 0, jobs.output
        assert len(json.loads(jobs.stdout)["jobs"]) == 1
    finally:
        _stop(proc)
