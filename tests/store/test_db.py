"""Database URLs and engines: SQLite by default under the data dir, PostgreSQL when the URL says so."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from scalar.store import (
    UnsupportedDatabaseError,
    database_url_from_env,
    default_database_url,
    describe_url,
    make_engine,
    normalize_url,
)


def test_the_default_is_a_sqlite_file_in_the_data_dir() -> None:
    assert default_database_url(Path(".scalar")) == "sqlite:///.scalar/scalar.db"
    assert default_database_url("/var/lib/scalar") == "sqlite:////var/lib/scalar/scalar.db"


def test_the_environment_overrides_the_default_only_when_asked() -> None:
    pg = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    assert database_url_from_env("d", {}) == "sqlite:///d/scalar.db"
    assert database_url_from_env("d", {"SCALAR_DATABASE_URL": "  "}) == "sqlite:///d/scalar.db"
    assert database_url_from_env("d", {"SCALAR_DATABASE_URL": pg}) == pg


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@127.0.0.1:5432/test",
        "postgres://postgres@127.0.0.1:5432/test",
        "postgresql+psycopg2://postgres@127.0.0.1:5432/test",
    ],
)
def test_postgresql_urls_use_psycopg_3(url: str) -> None:
    assert normalize_url(url).drivername == "postgresql+psycopg"


def test_unsupported_databases_are_refused_with_a_hint() -> None:
    with pytest.raises(UnsupportedDatabaseError, match=r"'mysql' is not supported.*To fix: use SQLite"):
        normalize_url("mysql://root:secret@localhost/scalar")
    with pytest.raises(UnsupportedDatabaseError, match="cannot parse"):
        normalize_url("not a url")


def test_passwords_are_hidden_in_descriptions() -> None:
    assert "secret" not in describe_url("postgresql://scalar:secret@db:5432/scalar")


def test_sqlite_gets_wal_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'nested' / 'dir' / 'scalar.db'}")
    try:
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000
    finally:
        engine.dispose()
    assert (tmp_path / "nested" / "dir" / "scalar.db").exists()


def test_sqlite_enforces_foreign_keys(sqlite_url: str) -> None:
    from sqlalchemy.exc import IntegrityError

    from scalar.store import Store
    from tests.store.timeline import at

    with Store.open(sqlite_url) as store, pytest.raises(IntegrityError), store.write() as tx:
        tx.record_decision("job:1", at(0), "X", "x", batch_id=999)


def test_an_in_memory_sqlite_store_keeps_its_data_across_transactions() -> None:
    from scalar.store import Store
    from tests.store.timeline import at, event

    with Store.open("sqlite://") as store:
        with store.write() as tx:
            tx.append_batch(at(0), [event("s1")])
        assert [e.stimulus_id for e in store.read_events()] == ["s1"]


def test_an_unreachable_database_is_a_clear_error_without_the_password() -> None:
    from scalar.store import DatabaseUnavailableError, Store

    with pytest.raises(DatabaseUnavailableError, match="cannot open the database") as err:
        Store.open("postgresql://scalar:secret@127.0.0.1:1/scalar")
    assert "secret" not in str(err.value) and "To fix:" in str(err.value)


def test_a_sqlite_file_that_cannot_be_created_is_a_clear_error(tmp_path: Path) -> None:
    from scalar.store import DatabaseUnavailableError, Store

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(DatabaseUnavailableError, match="cannot create the data directory"):
        Store.open(f"sqlite:///{blocker / 'scalar.db'}")
    with pytest.raises(DatabaseUnavailableError, match="cannot open the database"):
        Store.open(f"sqlite:///{tmp_path}")  # a directory, not a database file


def test_a_new_sqlite_database_is_private(tmp_path: Path) -> None:
    """scalar.db (and its -wal/-shm) hold token hashes, sealed secrets and every job: 0600 in a 0700 dir."""
    import stat

    from scalar.store import Store

    data = tmp_path / "data"
    store = Store.open(f"sqlite:///{data / 'scalar.db'}")
    try:
        with store.write() as tx:
            tx.add_inbox("test", "k", {"x": 1}, now=datetime.now(UTC))
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        files = sorted(data.iterdir())
        assert {f.name for f in files} >= {"scalar.db"}
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    finally:
        store.close()
    (data / "scalar.db").chmod(0o644)  # an older, world-readable one is made private when opened
    Store.open(f"sqlite:///{data / 'scalar.db'}").close()
    assert stat.S_IMODE((data / "scalar.db").stat().st_mode) == 0o600
