"""Database URLs and engines: SQLite (WAL) by default, PostgreSQL (psycopg 3) by URL.

The store never reads the environment on its own; ``database_url_from_env`` is the one explicit place that
looks at ``SCALAR_DATABASE_URL``, and the caller decides whether to use it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, func, make_url, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from scalar.store import jsoncodec
from scalar.store.errors import DatabaseUnavailableError, UnsupportedDatabaseError

DATABASE_URL_ENV = "SCALAR_DATABASE_URL"
SQLITE_FILENAME = "scalar.db"
# How long a SQLite writer waits for another writer before failing with "database is locked".
SQLITE_BUSY_TIMEOUT_S = 30.0
# Execution option read by the SQLite "begin" hook: "IMMEDIATE" takes the write lock at BEGIN.
SQLITE_BEGIN_OPTION = "scalar_sqlite_begin"


def default_database_url(data_dir: str | Path) -> str:
    """``sqlite:///<data_dir>/scalar.db``; ``data_dir`` may be relative (``./.scalar``)."""
    return f"sqlite:///{Path(data_dir) / SQLITE_FILENAME}"


def database_url_from_env(data_dir: str | Path, environ: Mapping[str, str] | None = None) -> str:
    """``$SCALAR_DATABASE_URL`` when set and not blank, else the SQLite file under ``data_dir``."""
    env = os.environ if environ is None else environ
    url = env.get(DATABASE_URL_ENV, "").strip()
    return url or default_database_url(data_dir)


def normalize_url(url: str | URL) -> URL:
    """Parse a database URL and pick Scalar's driver: ``postgresql://`` and ``postgres://`` mean psycopg 3.

    Raises ``UnsupportedDatabaseError`` for anything but SQLite and PostgreSQL.
    """
    text = url if isinstance(url, str) else url.render_as_string(hide_password=False)
    if text.startswith("postgres://"):
        text = "postgresql://" + text[len("postgres://") :]
    try:
        parsed = make_url(text)
    except ArgumentError as exc:
        raise UnsupportedDatabaseError(
            f"cannot parse database URL {text!r}: {exc}",
            "use sqlite:///path/to/scalar.db or postgresql+psycopg://user@host:5432/dbname",
        ) from None
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        # psycopg 3 is the one PostgreSQL driver Scalar ships with, whatever driver the URL names.
        return parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if parsed.drivername != "sqlite":
            raise UnsupportedDatabaseError(
                f"SQLite driver {parsed.drivername!r} is not supported", "use a plain sqlite:///path URL"
            )
        return parsed
    raise UnsupportedDatabaseError(
        f"database backend {backend!r} is not supported (URL {parsed.render_as_string(hide_password=True)})",
        "use SQLite (sqlite:///path/to/scalar.db) or PostgreSQL (postgresql+psycopg://user@host/db)",
    )


def describe_url(url: str | URL) -> str:
    """The URL with its password hidden, for logs and messages."""
    return normalize_url(url).render_as_string(hide_password=True)


def is_postgres(bind: Connection | Engine) -> bool:
    return bind.dialect.name == "postgresql"


def make_engine(url: str | URL, *, echo: bool = False, pool_size: int = 5) -> Engine:
    """An engine for ``url``, configured the way the store needs it.

    SQLite: the parent directory is created (``sqlite://`` is an in-memory database on one shared
    connection, for single-threaded tests); every connection gets WAL, foreign keys, ``synchronous=NORMAL``
    and a busy timeout; SQLAlchemy (not the sqlite3 driver) emits ``BEGIN`` so that write transactions can
    take the write lock up front (``BEGIN IMMEDIATE``, see ``Store.write``). PostgreSQL: psycopg 3 with
    pre-ping, so a restarted server does not break a long-running controller.
    """
    parsed = normalize_url(url)
    common: dict[str, Any] = {
        "echo": echo,
        "json_serializer": jsoncodec.dumps,
        "json_deserializer": jsoncodec.loads,
    }
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        in_memory = database in ("", ":memory:")
        if not in_memory and not database.startswith("file:"):
            directory = Path(database).expanduser().parent
            try:
                directory.mkdir(parents=True, exist_ok=True, mode=0o700)  # a new one is private
            except OSError as exc:
                raise DatabaseUnavailableError(
                    f"cannot create the data directory {directory}: {exc.strerror or exc}",
                    "choose a writable --data-dir, or set SCALAR_DATABASE_URL",
                ) from exc
            path = Path(database).expanduser()
            if not path.is_dir():  # (a directory is refused when SQLite opens it, with its own message)
                try:
                    private_file(path)
                except OSError as exc:
                    raise DatabaseUnavailableError(
                        f"cannot create the database file {path}: {exc.strerror or exc}",
                        "choose a writable --data-dir, or set SCALAR_DATABASE_URL",
                    ) from exc
        if in_memory:
            # One shared connection, so every transaction sees the same database: single-threaded use only.
            common["poolclass"] = StaticPool
        engine = create_engine(
            parsed,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
            **common,
        )
        _install_sqlite_hooks(engine)
        return engine
    return create_engine(
        parsed,
        pool_pre_ping=True,
        pool_size=pool_size,
        connect_args={"connect_timeout": 10},
        **common,
    )


def private_file(path: Path) -> None:
    """Create the database file 0600 before SQLite does (SQLite gives its -wal and -shm files the same
    mode); an existing one is set to 0600. It holds token hashes, sealed secrets and every job's data."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)


def _install_sqlite_hooks(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy emit BEGIN itself (the driver's legacy mode would skip it before SELECTs and DDL).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(SQLITE_BEGIN_OPTION, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


# pg_advisory_xact_lock key that serializes the store's write transactions on PostgreSQL ("SCALWRIT").
WRITE_LOCK_KEY = int.from_bytes(b"SCALWRIT", "big") & 0x7FFF_FFFF_FFFF_FFFF


def serialize_writes(conn: Connection) -> None:
    """Make this transaction the only writing one until it ends, as SQLite's ``BEGIN IMMEDIATE`` does.

    On PostgreSQL: a transaction-scoped advisory lock (re-entrant, released at commit or rollback). Taken
    first, before any row lock, so write transactions cannot deadlock, seqs are assigned in commit order and
    a takeover of the lease waits for the writes in flight. No-op on SQLite (the write lock is already held).
    """
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(WRITE_LOCK_KEY)))


def begin_immediate(conn: Connection) -> Connection:
    """Mark a not-yet-begun SQLite connection so its next transaction starts with ``BEGIN IMMEDIATE``
    (takes the write lock first, so read-then-write cannot fail with SQLITE_BUSY). No-op elsewhere."""
    if conn.dialect.name == "sqlite":
        return conn.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})
    return conn
