"""Token expiry: created tokens expire (default 90 days), an expired token is refused like an
unknown one, ``never`` and the local admin token of ``scalar up`` do not expire. Time is injected."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from scalar.runtime.auth import ensure_local_admin_token, parse_expires_in
from tests.security.conftest import Secured


def test_a_token_expires_and_is_then_refused_like_an_unknown_one(secured: Secured) -> None:
    with secured.client(secured.admin) as admin:
        short = admin.post("/tokens", json={"tenant": "team-a", "expires_in": "12h"})
        default = admin.post("/tokens", json={"tenant": "team-a"})
        forever = admin.post("/tokens", json={"tenant": "team-a", "expires_in": "never"})
        for r in (short, default, forever):
            assert r.status_code == 201, r.text
        created = datetime.fromisoformat(short.json()["created_at"])
        assert (datetime.fromisoformat(short.json()["expires_at"]) - created).total_seconds() == 12 * 3600
        assert (datetime.fromisoformat(default.json()["expires_at"]) - created).days == 90
        assert forever.json()["expires_at"] is None
        listed = {t["id"]: t for t in admin.get("/tokens").json()["tokens"]}
        assert listed[short.json()["id"]]["expires_at"] == short.json()["expires_at"]
        assert listed[forever.json()["id"]]["expires_at"] is None

        unknown = "scalar.tok_ffffffffffffffff." + "A" * 43
        with secured.client(unknown) as stranger:
            refused_unknown = stranger.get("/jobs")
        assert refused_unknown.status_code == 401

        with secured.client(short.json()["token"]) as client:
            assert client.get("/jobs").status_code == 200
            secured.clock.advance(12 * 3600 - 1)
            assert client.get("/jobs").status_code == 200
            secured.clock.advance(1)
            expired = client.get("/jobs")
        assert expired.status_code == 401
        # No detail leak: the same problem as an unknown token's.
        assert expired.json() == refused_unknown.json()
        assert expired.headers["www-authenticate"] == refused_unknown.headers["www-authenticate"]

        secured.clock.advance(91 * 86400)
        with secured.client(default.json()["token"]) as client:
            assert client.get("/jobs").status_code == 401
        with secured.client(forever.json()["token"]) as client:
            assert client.get("/jobs").status_code == 200


@pytest.mark.parametrize("bad", ["0d", "-1d", "12", "1w", "never!", "99999999d", "3651d", "1e3s", ""])
def test_a_bad_lifetime_is_refused_naming_the_field(secured_sqlite: Secured, bad: str) -> None:
    with secured_sqlite.client(secured_sqlite.admin) as admin:
        before = admin.get("/tokens").json()
        r = admin.post("/tokens", json={"tenant": "team-a", "expires_in": bad})
        after = admin.get("/tokens").json()
    assert r.status_code == 422, r.text
    assert "expires_in" in r.text
    assert before == after


def test_parse_expires_in() -> None:
    assert parse_expires_in("never") is None
    assert parse_expires_in(None) is not None and parse_expires_in(None).days == 90  # type: ignore[union-attr]
    assert parse_expires_in("45m").total_seconds() == 2700  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="expires_in"):
        parse_expires_in("3651d")


def test_the_local_admin_token_never_expires(secured_sqlite: Secured, tmp_path: object) -> None:
    from pathlib import Path

    data_dir = Path(str(tmp_path)) / "data"
    token = ensure_local_admin_token(secured_sqlite.cp.tokens, data_dir)
    assert token is not None
    secured_sqlite.clock.advance(20 * 365 * 86400)
    with secured_sqlite.client(token) as client:
        assert client.get("/whoami").json()["role"] == "admin"


def test_the_cli_creates_and_lists_tokens_with_their_expiry(secured_sqlite: Secured) -> None:
    from typer.testing import CliRunner

    from scalar.cli.main import app as cli_app

    def scalar(*args: str) -> Any:
        return CliRunner().invoke(
            cli_app, [*args, "--server", secured_sqlite.url, "--token", secured_sqlite.admin]
        )

    made = scalar("token", "create", "--tenant", "team-a", "--expires-in", "12h", "--json")
    assert made.exit_code == 0, made.output
    assert made.stdout and json.loads(made.stdout)["expires_at"] is not None
    forever = scalar("token", "create", "--tenant", "team-a", "--expires-in", "never")
    assert forever.exit_code == 0 and "expires never" in forever.stderr
    listed = scalar("token", "list")
    assert listed.exit_code == 0 and "expires" in listed.stdout.lower() and "never" in listed.stdout
    bad = scalar("token", "create", "--tenant", "team-a", "--expires-in", "soon")
    assert bad.exit_code == 2 and "--expires-in" in bad.stderr
