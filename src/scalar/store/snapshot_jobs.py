"""The live jobs of the leader's published decision state, a row per job (``engine/snapshot.py``'s
``job_part``, as JSON text), with ``ord``, its place in the controller's order of jobs.

The leader writes them in its step's transaction, with the rest of that state (``runtime_state`` row
``controller:snapshot``): only the rows of the jobs the step changed (``put``) and removed (``delete``), or
all of them afresh (``replace_all``, a new leader's first step). A reader takes the header and these rows in
one read transaction (``read``), so it sees one step's state whole, never a mix of two.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from scalar.store.schema import snapshot_jobs

CHUNK = 500  # rows per statement (SQLite's bound parameters per statement stay well under its limit)


def put(conn: Connection, rows: Sequence[tuple[str, int, str]]) -> None:
    """Insert or replace ``(job_id, ord, value)`` rows."""
    if not rows:
        return
    insert_fn = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    for i in range(0, len(rows), CHUNK):
        values = [{"job_id": j, "ord": o, "value": v} for j, o, v in rows[i : i + CHUNK]]
        stmt = insert_fn(snapshot_jobs).values(values)
        stmt = stmt.on_conflict_do_update(
            index_elements=[snapshot_jobs.c.job_id],
            set_={"ord": stmt.excluded.ord, "value": stmt.excluded.value},
        )
        conn.execute(stmt)


def delete_jobs(conn: Connection, job_ids: Iterable[str]) -> None:
    ids = list(job_ids)
    for i in range(0, len(ids), CHUNK):
        conn.execute(delete(snapshot_jobs).where(snapshot_jobs.c.job_id.in_(ids[i : i + CHUNK])))


def replace_all(conn: Connection, rows: Sequence[tuple[str, int, str]]) -> None:
    conn.execute(delete(snapshot_jobs))
    if rows:
        for i in range(0, len(rows), CHUNK):
            conn.execute(
                snapshot_jobs.insert(),
                [{"job_id": j, "ord": o, "value": v} for j, o, v in rows[i : i + CHUNK]],
            )


def read(conn: Connection) -> list[list[Any]]:
    """Every row as ``[job_id, part]``, in ``ord`` order (``engine.snapshot.restore``'s ``jobs``)."""
    query = select(snapshot_jobs.c.job_id, snapshot_jobs.c.value).order_by(snapshot_jobs.c.ord)
    return [[row.job_id, json.loads(row.value)] for row in conn.execute(query)]
