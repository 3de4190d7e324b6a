"""One health shape: ``/healthz`` says ok | starting | degraded with a problem code and names no
database, host or process; while the database is down every route answers 503 with Retry-After, never 500."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import httpx
from psycopg import sql
from sqlalchemy import make_url

from scalar.api.app import create_app
from scalar.runtime import ControlPlane
from tests.api.live_server import serve
from tests.dbfixtures import _admin_connection
from tests.runtime.helpers import Clock, settings_for
from tests.security.conftest import Secured, secured_api

HIDDEN_WORDS = ("postgresql", "sqlite", "127.0.0.1", "5432", "scalar_test_", "psycopg", "connection")


def _no_internals(response: httpx.Response, api: Secured) -> None:
    text = response.text
    assert api.cp.settings.holder not in text
    assert api.cp.settings.holder.split(":")[0] not in text  # the host
    for word in HIDDEN_WORDS:
        assert word not in text.lower(), (word, text)


def test_healthz_is_public_and_names_nothing_but_admins_see_the_details(secured_sqlite: Secured) -> None:
    api = secured_sqlite
    with api.client() as anonymous:
        health = anonymous.get("/healthz")
    assert health.status_code == 200
    assert health.json() == {
        "status": "ok",
        "problem": None,
        "role": "follower",
        "last_step_at": None,
    }
    _no_internals(health, api)
    with api.client(api.token("team-a")) as user:
        assert user.get("/healthz/details").status_code == 403
        status = user.get("/status").json()["health"]
        assert "database" not in status and "holder" not in status and "lease_holder" not in status
    with api.client(api.admin) as admin:
        details = admin.get("/healthz/details").json()
        assert details["database"].startswith("sqlite:///") and details["holder"] == api.cp.settings.holder
        assert admin.get("/status").json()["health"]["holder"] == api.cp.settings.holder


@contextmanager
def _database_down(url: str) -> Iterator[None]:
    """The database of ``url`` gone (its sessions ended, renamed away); back afterwards."""
    name = make_url(url).database
    assert name is not None
    away = name + "_away"
    with _admin_connection() as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        admin.execute(
            sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(name), sql.Identifier(away))
        )
    try:
        yield
    finally:
        with _admin_connection() as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (away,)
            )
            admin.execute(
                sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(away), sql.Identifier(name))
            )


def _unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 1
    body = response.json()
    assert body["type"] == "urn:scalar:problem:unavailable", body
    assert "database" in body["detail"]


def test_while_the_database_is_down_every_route_answers_503(pg_url: str, tmp_path: Path) -> None:
    with secured_api(pg_url, tmp_path) as api:
        user = api.token("team-a")
        open_app = create_app(api.cp, auth_required=False)  # the routes themselves, without the token check
        with serve(open_app) as open_url, api.client(user) as client, api.client() as anonymous:
            job = client.post("/jobs", json={"tier": "FLEX", "gpu_count": 1})
            assert job.status_code == 201, job.text
            with _database_down(pg_url):
                health = anonymous.get("/healthz")
                assert health.status_code == 503 and int(health.headers["retry-after"]) >= 1
                assert (health.json()["status"], health.json()["problem"]) == (
                    "degraded",
                    "database-unavailable",
                )
                _no_internals(health, api)
                for method, path in [
                    ("GET", "/jobs"),
                    ("POST", "/jobs"),
                    ("GET", f"/jobs/{job.json()['id']}/explain"),
                    ("GET", "/budgets"),
                    ("GET", "/endpoints"),
                ]:
                    body = {"tier": "FLEX", "gpu_count": 1} if method == "POST" else None
                    _unavailable(client.request(method, path, json=body))
                    _unavailable(httpx.request(method, open_url + path, json=body, timeout=30))
                details = httpx.get(open_url + "/healthz/details", timeout=30)
                assert details.status_code == 503
                assert details.json()["error"]  # the driver's text, for admins only
            assert client.get("/jobs").status_code == 200  # back once the database is


def test_no_leader_for_longer_than_the_lease_is_degraded(secured_sqlite: Secured) -> None:
    api = secured_sqlite
    store = api.cp.store
    assert store is not None
    ttl = api.cp.settings.lease_ttl_s
    now = api.clock()
    store.try_acquire(api.cp.settings.lease_name, "another-host:1:x", now - timedelta(seconds=3 * ttl), ttl)
    with api.client() as anonymous:
        health = anonymous.get("/healthz")
        assert health.status_code == 503 and int(health.headers["retry-after"]) >= 1
        assert (health.json()["status"], health.json()["problem"]) == ("degraded", "no-leader")
        assert "another-host" not in health.text
        store.try_acquire(api.cp.settings.lease_name, "another-host:1:x", now, ttl)  # it renews: ok again
        assert anonymous.get("/healthz").json()["status"] == "ok"


def test_a_control_plane_still_opening_is_starting(tmp_path: Path) -> None:
    cp = ControlPlane(settings_for(f"sqlite:///{tmp_path / 's.db'}", tmp_path), clock=Clock())
    with cp.core.open_lock:  # another thread is opening (migrating) the database
        health = cp.health()
    assert (health.status, health.problem) == ("starting", "not-open")
    cp.open()
    try:
        assert cp.health().status == "ok"
    finally:
        cp.stop()
