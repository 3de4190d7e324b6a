"""Projections: the current state of jobs, nodes, blocks, orders and scale groups, for queries.

The HTTP API and the CLI read these tables; they never replay the log. The runtime decides their content
and writes them in the same transaction as the events that changed them. Each row is
``(id, state, parent_id, data, updated_at)``: ``state`` and ``parent_id`` are indexed for listing
(e.g. jobs by state, nodes by block), ``data`` holds the full record as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite

from scalar.store import jsoncodec
from scalar.store.errors import UnknownProjectionError
from scalar.store.schema import PROJECTIONS, projection_tables


@dataclass(frozen=True, slots=True)
class Projection:
    table: str
    id: str
    state: str | None
    parent_id: str | None
    data: dict[str, Any]
    updated_at: datetime | None


def projection_table(name: str) -> Table:
    try:
        return projection_tables[name]
    except KeyError:
        raise UnknownProjectionError(
            f"no projection table {name!r}", f"use one of {', '.join(PROJECTIONS)}"
        ) from None


def _projection(name: str, row: Any) -> Projection:
    return Projection(name, row.id, row.state, row.parent_id, row.data, row.updated_at)


def upsert_projection(
    conn: Connection,
    table: str,
    id: str,
    state: str | None,
    data: Mapping[str, Any],
    *,
    parent_id: str | None = None,
    at: datetime | None = None,
) -> None:
    """Insert or replace the row ``id`` of ``table``."""
    values = {
        "id": id,
        "state": state,
        "parent_id": parent_id,
        "data": jsoncodec.canonical(data),
        "updated_at": at,
    }
    conn.execute(_upsert_statement(conn.dialect.name, table), values)


_UPSERTS: dict[tuple[str, str], Any] = {}


def _upsert_statement(dialect: str, table: str) -> Any:
    """One upsert statement per dialect and table, its values bound at execution: building it anew for
    every row cost about 4 ms (most of a busy step's projection writes)."""
    stmt = _UPSERTS.get((dialect, table))
    if stmt is None:
        t = projection_table(table)
        insert_fn = postgresql.insert if dialect == "postgresql" else sqlite.insert
        base = insert_fn(t)
        stmt = base.on_conflict_do_update(
            index_elements=[t.c.id],
            set_={name: base.excluded[name] for name in ("state", "parent_id", "data", "updated_at")},
        )
        _UPSERTS[(dialect, table)] = stmt
    return stmt


def delete_projection(conn: Connection, table: str, id: str) -> bool:
    """Delete the row ``id``; returns whether it existed."""
    t = projection_table(table)
    return conn.execute(delete(t).where(t.c.id == id)).rowcount == 1


def clear_projection(conn: Connection, table: str) -> int:
    """Delete every row of ``table`` (before rewriting it from a rebuilt state); returns how many."""
    return int(conn.execute(delete(projection_table(table))).rowcount)


def get_projection(conn: Connection, table: str, id: str) -> Projection | None:
    t = projection_table(table)
    row = conn.execute(select(t).where(t.c.id == id)).first()
    return None if row is None else _projection(table, row)


def get_projections(conn: Connection, table: str, ids: Sequence[str]) -> dict[str, Projection]:
    """The rows of ``table`` with these ids (absent ones left out), a few queries for any number of ids
    instead of one each."""
    t = projection_table(table)
    out: dict[str, Projection] = {}
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), _IDS_PER_QUERY):
        chunk = unique[start : start + _IDS_PER_QUERY]
        for row in conn.execute(select(t).where(t.c.id.in_(chunk))):
            out[row.id] = _projection(table, row)
    return out


_IDS_PER_QUERY = 500  # bound parameters per query, well under SQLite's limit


def list_projection(
    conn: Connection,
    table: str,
    state: str | None = None,
    *,
    parent_id: str | None = None,
    limit: int = 100,
    offset: int = 0,
    descending: bool = False,
    after: str | None = None,
) -> list[Projection]:
    """Rows of ``table`` ordered by id (``descending``: the highest first), optionally only those in
    ``state`` and/or under ``parent_id``; ``after``: only those past that id in this order (keyset paging,
    served by the primary key or the ``(state, id)`` index)."""
    t = projection_table(table)
    query = select(t)
    if after is not None:
        query = query.where(t.c.id < after if descending else t.c.id > after)
    if state is not None:
        query = query.where(t.c.state == state)
    if parent_id is not None:
        query = query.where(t.c.parent_id == parent_id)
    order = t.c.id.desc() if descending else t.c.id
    rows = conn.execute(query.order_by(order).limit(limit).offset(offset))
    return [_projection(table, row) for row in rows]


FieldKind = str  # "json" (any JSON value, decoded), "text", "int" or "float" (extracted as that type)


def _field(t: Table, name: str, kind: FieldKind) -> Any:
    element = t.c.data[name]
    if kind == "text":
        return element.as_string()
    if kind == "int":
        return element.as_integer()
    if kind == "float":
        return element.as_float()
    return element


def list_projection_fields(
    conn: Connection, table: str, fields: Mapping[str, FieldKind], state: str | None = None
) -> list[Projection]:
    """Rows of ``table`` (only those in ``state``) in id order with ``data`` holding only ``fields`` (the
    database extracts them; ``text``/``int``/``float`` ones without a JSON decode): for views that need a
    few fields of thousands of rows, where decoding every whole document would cost most of their time."""
    t = projection_table(table)
    names = list(fields)
    columns = [_field(t, f, fields[f]).label(f"f{i}") for i, f in enumerate(names)]
    query = select(t.c.id, t.c.state, t.c.parent_id, t.c.updated_at, *columns)
    if state is not None:
        query = query.where(t.c.state == state)
    out = []
    for row in conn.execute(query.order_by(t.c.id)):
        data = {f: row[4 + i] for i, f in enumerate(names)}
        out.append(Projection(table, row.id, row.state, row.parent_id, data, row.updated_at))
    return out


def count_projection(
    conn: Connection, table: str, state: str | None = None, *, parent_id: str | None = None
) -> int:
    t = projection_table(table)
    query = select(func.count()).select_from(t)
    if state is not None:
        query = query.where(t.c.state == state)
    if parent_id is not None:
        query = query.where(t.c.parent_id == parent_id)
    return int(conn.execute(query).scalar_one())


def count_by_state(conn: Connection, table: str) -> dict[str | None, int]:
    """How many rows of ``table`` are in each state (for dashboards and metrics)."""
    t = projection_table(table)
    rows = conn.execute(select(t.c.state, func.count()).group_by(t.c.state))
    return {state: int(n) for state, n in rows}
