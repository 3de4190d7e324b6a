"""Database fixtures: every test gets its own real database, on SQLite and on PostgreSQL.

- ``db_url``: a fresh, empty database URL, parametrized over ``sqlite`` (a file under the test's tmp_path)
  and ``postgresql`` (``CREATE DATABASE scalar_test_<pid>_<hex>`` on the server at ``$SCALAR_TEST_PG_URL``,
  default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``, dropped ``WITH (FORCE)`` after the test).
- ``migrated_url``: the same, already migrated to head (PostgreSQL clones a migrated template database made
  once per test process, which is cheaper than migrating each time).
- ``store``: a ``Store`` opened on ``migrated_url``. ``sqlite_url`` / ``pg_url``: one backend, empty.
- ``fresh_database(backend, tmp_path)``: a context manager, for tests that need several databases.

Names are unique per test process and test, so the fixtures are safe under pytest-xdist. Dropping a
PostgreSQL database waits for a server checkpoint (about a second on a busy machine), so the fixtures hand
drops to a background thread of the ``pg_server`` session fixture, which drops whatever has queued up in
parallel (concurrent drops share one checkpoint) and finishes them, and the template, at session end. Databases left behind by a killed test process (its pid is gone) are dropped the first
time a process creates one. PostgreSQL must be running: these tests fail (never skip) when it is not.

Use from the top-level conftest: ``pytest_plugins = ["tests.dbfixtures"]``, or import the fixtures by name.
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import make_url
from sqlalchemy.engine import URL

from scalar.store import Store, migrate

PG_ADMIN_URL_ENV = "SCALAR_TEST_PG_URL"
DEFAULT_PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgresql")
DB_PREFIX = "scalar_test_"
_TEST_DB_NAME = re.compile(rf"^{DB_PREFIX}(\d+)_[0-9a-f]+$")
_PARALLEL_DROPS = 6
_orphans_checked = False


def pg_admin_url() -> URL:
    return make_url(os.environ.get(PG_ADMIN_URL_ENV) or DEFAULT_PG_ADMIN_URL)


def _admin_connection() -> psycopg.Connection:
    url = pg_admin_url()
    try:
        conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        return psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise RuntimeError(
            f"PostgreSQL is not reachable at {url.render_as_string(hide_password=True)}: {exc}. "
            f"Start it, or point ${PG_ADMIN_URL_ENV} at a server where this user may CREATE DATABASE."
        ) from exc


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drop(admin: psycopg.Connection, name: str) -> None:
    if not _TEST_DB_NAME.match(name):
        raise ValueError(f"refusing to drop {name!r}: not a test database")
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _drop_orphans(admin: psycopg.Connection) -> None:
    """Drop test databases whose creating process is dead (a worker killed before its teardown)."""
    rows = admin.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE %s", (DB_PREFIX + "%",)
    ).fetchall()
    for (name,) in rows:
        match = _TEST_DB_NAME.match(name)
        if match and not pid_alive(int(match.group(1))):
            _drop(admin, name)


def _url_of(name: str) -> str:
    url = pg_admin_url().set(drivername="postgresql+psycopg", database=name)
    return url.render_as_string(hide_password=False)


def create_pg_database(template: str | None = None) -> str:
    """Create a database (empty, or a copy of ``template``) and return its SQLAlchemy URL."""
    global _orphans_checked
    name = f"{DB_PREFIX}{os.getpid()}_{secrets.token_hex(6)}"
    with _admin_connection() as admin:
        if not _orphans_checked:
            _orphans_checked = True
            _drop_orphans(admin)
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        admin.execute(statement)
    return _url_of(name)


def drop_pg_database(url: str) -> None:
    name = make_url(url).database or ""
    with _admin_connection() as admin:
        _drop(admin, name)


class PgTestServer:
    """Per-process helper: a migrated template database and a background dropper."""

    def __init__(self) -> None:
        self._template: str | None = None
        self._drops: queue.Queue[str | None] = queue.Queue()
        self._dropper: threading.Thread | None = None
        self._errors: list[BaseException] = []

    def create(self, *, migrated: bool) -> str:
        if not migrated:
            return create_pg_database()
        if self._template is None:
            url = create_pg_database()
            migrate(url)
            self._template = make_url(url).database
        return create_pg_database(template=self._template)

    def drop_later(self, url: str) -> None:
        if self._dropper is None:
            self._dropper = threading.Thread(target=self._drop_loop, name="pg-test-dropper", daemon=True)
            self._dropper.start()
        self._drops.put(url)

    def _drop_loop(self) -> None:
        # Each DROP DATABASE waits for a server checkpoint; concurrent drops share one, so everything
        # queued meanwhile is dropped at once, in parallel.
        while True:
            batch = [self._drops.get()]
            while True:
                try:
                    batch.append(self._drops.get_nowait())
                except queue.Empty:
                    break
            urls = [u for u in batch if u is not None]
            if urls:
                with ThreadPoolExecutor(max_workers=min(_PARALLEL_DROPS, len(urls))) as pool:
                    list(pool.map(self._drop_quietly, urls))
            if None in batch:
                return

    def _drop_quietly(self, url: str) -> None:
        try:
            drop_pg_database(url)
        except BaseException as exc:
            self._errors.append(exc)

    def close(self) -> None:
        if self._dropper is not None:
            self._drops.put(None)
            self._dropper.join(timeout=300)
        if self._template is not None:
            drop_pg_database(_url_of(self._template))
        if self._errors:
            raise RuntimeError(f"could not drop {len(self._errors)} test database(s): {self._errors[0]}")


@contextmanager
def fresh_database(
    backend: str, tmp_path: Path, *, migrated: bool = False, server: PgTestServer | None = None
) -> Iterator[str]:
    """A new database of ``backend`` ('sqlite' or 'postgresql'), empty or migrated, removed afterwards."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / f'scalar-{secrets.token_hex(4)}.db'}"
        if migrated:
            migrate(url)
        yield url
        return
    if backend != "postgresql":
        raise ValueError(f"unknown backend {backend!r}, expected one of {BACKENDS}")
    if server is None:
        url = create_pg_database()
        if migrated:
            migrate(url)
        try:
            yield url
        finally:
            drop_pg_database(url)
        return
    url = server.create(migrated=migrated)
    try:
        yield url
    finally:
        server.drop_later(url)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgTestServer]:
    server = PgTestServer()
    try:
        yield server
    finally:
        server.close()


def _server_for(request: pytest.FixtureRequest, backend: str) -> PgTestServer | None:
    if backend != "postgresql":
        return None
    server = request.getfixturevalue("pg_server")
    assert isinstance(server, PgTestServer)
    return server


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL; every test using it runs on SQLite and on PostgreSQL."""
    with fresh_database(request.param, tmp_path, server=_server_for(request, request.param)) as url:
        yield url


@pytest.fixture(params=BACKENDS)
def migrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database migrated to head, on SQLite and on PostgreSQL."""
    server = _server_for(request, request.param)
    with fresh_database(request.param, tmp_path, migrated=True, server=server) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Iterator[str]:
    with fresh_database("sqlite", tmp_path) as url:
        yield url


@pytest.fixture
def pg_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database("postgresql", tmp_path, server=_server_for(request, "postgresql")) as url:
        yield url


@pytest.fixture
def store(migrated_url: str) -> Iterator[Store]:
    """A migrated ``Store`` on a fresh database (both backends)."""
    opened = Store.open(migrated_url)
    try:
        yield opened
    finally:
        opened.close()
