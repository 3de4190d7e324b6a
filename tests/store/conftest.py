"""Store tests run on real SQLite and real PostgreSQL (a fresh database per test, see tests/dbfixtures.py)."""

from __future__ import annotations

from tests.dbfixtures import db_url, migrated_url, pg_server, pg_url, sqlite_url, store

__all__ = ["db_url", "migrated_url", "pg_server", "pg_url", "sqlite_url", "store"]
