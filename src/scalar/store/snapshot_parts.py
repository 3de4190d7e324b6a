"""The large, slowly changing parts of the leader's published decision state, a row each
(``runtime/snapshot_store.py`` says what they are): ``kind`` (``job``: a live job, ``arrived``: a job of the
demand forecast), ``key`` (unique within the kind), ``ord`` (the part's place in its kind's order) and
``value`` (the part as canonical JSON text).

The leader writes them in its step's transaction, with the rest of that state (``runtime_state`` row
``controller:snapshot``): only the rows the step changed (``put``) and removed (``delete_keys``,
``delete_below``), or every row of a kind afresh (``replace_kind``, a new leader's first step). A reader
takes the header and these rows in one read transaction (``read``), so it sees one step's state whole, never
a mix of two.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from scalar.store.schema import snapshot_parts

CHUNK = 500  # rows per statement (SQLite's bound parameters per statement stay well under its limit)

Row = tuple[str, int, str]  # key, ord, JSON text


def put(conn: Connection, kind: str, rows: Sequence[Row]) -> None:
    """Insert or replace rows of ``kind``."""
    insert_fn = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    t = snapshot_parts
    for i in range(0, len(rows), CHUNK):
        values = [{"kind": kind, "key": k, "ord": o, "value": v} for k, o, v in rows[i : i + CHUNK]]
        stmt = insert_fn(t).values(values)
        stmt = stmt.on_conflict_do_update(
            index_elements=[t.c.kind, t.c.key], set_={"ord": stmt.excluded.ord, "value": stmt.excluded.value}
        )
        conn.execute(stmt)


def delete_keys(conn: Connection, kind: str, keys: Iterable[str]) -> None:
    t = snapshot_parts
    chosen = list(keys)
    for i in range(0, len(chosen), CHUNK):
        conn.execute(delete(t).where(t.c.kind == kind, t.c.key.in_(chosen[i : i + CHUNK])))


def delete_below(conn: Connection, kind: str, ord_: int) -> None:
    """Delete the rows of ``kind`` placed before ``ord_``."""
    t = snapshot_parts
    conn.execute(delete(t).where(t.c.kind == kind, t.c.ord < ord_))


def replace_kind(conn: Connection, kind: str, rows: Sequence[Row]) -> None:
    """``rows`` become every row of ``kind``."""
    conn.execute(delete(snapshot_parts).where(snapshot_parts.c.kind == kind))
    for i in range(0, len(rows), CHUNK):
        conn.execute(
            snapshot_parts.insert(),
            [{"kind": kind, "key": k, "ord": o, "value": v} for k, o, v in rows[i : i + CHUNK]],
        )


def read(conn: Connection, kind: str) -> list[tuple[str, Any]]:
    """Every row of ``kind`` as ``(key, value)``, in ``ord`` order."""
    t = snapshot_parts
    query = select(t.c.key, t.c.value).where(t.c.kind == kind).order_by(t.c.ord)
    return [(row.key, json.loads(row.value)) for row in conn.execute(query)]
