"""Small JSON documents the leader keeps in step with the event log, e.g. a provider's event cursor.

Write them in the same transaction as the events they describe: then a crash either keeps both or neither,
and a provider's events are never lost nor stored twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.dialects import postgresql, sqlite

from scalar.store import jsoncodec
from scalar.store.schema import runtime_state


def get_state(conn: Connection, key: str) -> dict[str, Any] | None:
    row = conn.execute(select(runtime_state.c.value).where(runtime_state.c.key == key)).first()
    return None if row is None else dict(row.value)


def put_state(conn: Connection, key: str, value: Mapping[str, Any], at: datetime | None = None) -> None:
    insert_fn = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = insert_fn(runtime_state).values(key=key, value=jsoncodec.canonical(value), updated_at=at)
    stmt = stmt.on_conflict_do_update(
        index_elements=[runtime_state.c.key],
        set_={"value": stmt.excluded.value, "updated_at": stmt.excluded.updated_at},
    )
    conn.execute(stmt)


def states_with_prefix(conn: Connection, prefix: str) -> dict[str, dict[str, Any]]:
    query = select(runtime_state.c.key, runtime_state.c.value).where(
        runtime_state.c.key.startswith(prefix, autoescape=True)
    )
    return {row.key: dict(row.value) for row in conn.execute(query)}
