"""Where the built-in market keeps its state: an engine, its tables, and its one write lock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, insert, make_url, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from scalar.providers.builtin import schema
from scalar.providers.builtin.config import MarketConfigError

SQLITE_BUSY_TIMEOUT_S = 30.0
SCHEMA_LOCK_KEY = 0x5CA1A4  # PostgreSQL advisory lock taken while creating the market's tables


def market_engine(url: str) -> Engine:
    """An engine for a SQLite or PostgreSQL URL (``postgresql://`` uses psycopg 3).

    SQLite gets WAL, a 30 s busy timeout and its parent directory created, so several processes can share
    one market file.
    """
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return create_engine(parsed.set(drivername="postgresql+psycopg"), pool_pre_ping=True)
    if backend != "sqlite":
        raise MarketConfigError(
            f"the built-in market cannot keep its state in a {backend!r} database",
            "use sqlite:///path/market.db or postgresql+psycopg://user@host/db",
        )
    database = parsed.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    return engine


def create_market_tables(engine: Engine, seed: int | None) -> int:
    """Create the ``market_*`` tables and the meta row if missing; return the market's seed.

    A new market takes ``seed`` (0 if ``None``). A market that already exists keeps its seed: asking for
    another one explicitly is an error (its books and nodes were drawn from the stored seed).
    """
    for attempt in range(3):
        try:
            with engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
                schema.market_metadata.create_all(conn)
                row = conn.execute(select(schema.meta.c.seed).where(schema.meta.c.id == 1)).first()
                if row is None:
                    chosen = 0 if seed is None else seed
                    conn.execute(
                        insert(schema.meta).values(id=1, seed=chosen, clock_us=0, event_seq=0, version=0)
                    )
                    return chosen
                stored = int(row.seed)
        except (IntegrityError, OperationalError):
            # Another process created the tables or the meta row at the same moment: look again.
            if attempt == 2:
                raise
            continue
        if seed is not None and stored != seed:
            raise MarketConfigError(
                f"this database already holds a built-in market with seed {stored}, not {seed}",
                f"use seed {stored} (or leave it unset), or give the market a fresh database",
            )
        return stored
    raise AssertionError("unreachable")


_TAKE_LOCK = update(schema.meta).where(schema.meta.c.id == 1).values(version=schema.meta.c.version + 1)


@contextmanager
def locked(engine: Engine) -> Iterator[Connection]:
    """A write transaction holding the market's lock (serialises every writer, in every process)."""
    with engine.begin() as conn:
        conn.execute(_TAKE_LOCK)
        yield conn


def is_busy(error: DBAPIError) -> bool:
    """True for errors that asking again may cure (a locked SQLite file, a dropped connection)."""
    return isinstance(error, OperationalError) or bool(error.connection_invalidated)
