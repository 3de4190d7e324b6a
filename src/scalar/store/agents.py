"""Repositories of the agent tables (``schema_agents``): join tokens, agents, assignments, log chunks.

Plain functions over a SQLAlchemy ``Connection`` (``tx.conn`` of a ``Store.write()``/``read()``), so what
the agent routes record goes in the same transaction as the inbox rows it becomes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from scalar.store.projections import projection_table
from scalar.store.schema_agents import agent_assignments, agent_join_tokens, agent_log_chunks, agents


@dataclass(frozen=True, slots=True)
class JoinToken:
    token_sha256: str
    provider: str
    tier: str
    node_id: str | None
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None
    used_by: str | None
    price_per_gpu_hour: Decimal = Decimal(0)  # a user-owned host's block price (NULL before 0008: 0)


@dataclass(frozen=True, slots=True)
class AgentRow:
    node_id: str
    token_sha256: str
    provider: str
    hostname: str
    version: str
    facts: dict[str, Any]
    registered_at: datetime
    last_seen_at: datetime
    last_seq: int
    lease_state: str
    drain: bool


@dataclass(frozen=True, slots=True)
class AssignmentRow:
    assignment_id: str
    node_id: str
    job_id: str
    attempt: int
    spec: dict[str, Any]
    created_at: datetime
    cancel_requested: bool
    state: str
    report: dict[str, Any] | None
    updated_at: datetime


# ---- join tokens ---------------------------------------------------------------------------------------


def add_join_token(conn: Connection, token: JoinToken) -> None:
    conn.execute(
        insert(agent_join_tokens).values(
            token_sha256=token.token_sha256,
            provider=token.provider,
            tier=token.tier,
            node_id=token.node_id,
            created_at=token.created_at,
            expires_at=token.expires_at,
            used_at=None,
            used_by=None,
            price_per_gpu_hour=token.price_per_gpu_hour,
        )
    )


def get_join_token(conn: Connection, token_sha256: str) -> JoinToken | None:
    row = conn.execute(
        select(agent_join_tokens).where(agent_join_tokens.c.token_sha256 == token_sha256)
    ).first()
    if row is None:
        return None
    return JoinToken(
        row.token_sha256,
        row.provider,
        row.tier,
        row.node_id,
        row.created_at,
        row.expires_at,
        row.used_at,
        row.used_by,
        Decimal(0) if row.price_per_gpu_hour is None else row.price_per_gpu_hour,
    )


def spend_join_token(conn: Connection, token_sha256: str, node_id: str, now: datetime) -> bool:
    """Mark the token used by ``node_id``; False if it was already spent (by anyone)."""
    result = conn.execute(
        update(agent_join_tokens)
        .where(agent_join_tokens.c.token_sha256 == token_sha256, agent_join_tokens.c.used_at.is_(None))
        .values(used_at=now, used_by=node_id)
    )
    return bool(result.rowcount)


# ---- agents --------------------------------------------------------------------------------------------


def _agent(row: Any) -> AgentRow:
    return AgentRow(
        row.node_id,
        row.token_sha256,
        row.provider,
        row.hostname,
        row.version,
        dict(row.facts),
        row.registered_at,
        row.last_seen_at,
        int(row.last_seq),
        row.lease_state,
        bool(row.drain),
    )


def add_agent(conn: Connection, row: AgentRow) -> None:
    conn.execute(
        insert(agents).values(
            node_id=row.node_id,
            token_sha256=row.token_sha256,
            provider=row.provider,
            hostname=row.hostname,
            version=row.version,
            facts=row.facts,
            registered_at=row.registered_at,
            last_seen_at=row.last_seen_at,
            last_seq=row.last_seq,
            lease_state=row.lease_state,
            drain=row.drain,
        )
    )


def get_agent(conn: Connection, node_id: str) -> AgentRow | None:
    row = conn.execute(select(agents).where(agents.c.node_id == node_id)).first()
    return None if row is None else _agent(row)


def list_agents(conn: Connection) -> list[AgentRow]:
    return [_agent(r) for r in conn.execute(select(agents).order_by(agents.c.node_id))]


def update_agent(conn: Connection, node_id: str, **values: Any) -> None:
    conn.execute(update(agents).where(agents.c.node_id == node_id).values(**values))


def set_lease_state(conn: Connection, node_id: str, expected: str, target: str) -> bool:
    """Compare-and-set the lease state: False when someone changed it meanwhile."""
    result = conn.execute(
        update(agents)
        .where(agents.c.node_id == node_id, agents.c.lease_state == expected)
        .values(lease_state=target)
    )
    return bool(result.rowcount)


# ---- assignments ---------------------------------------------------------------------------------------


def _assignment(row: Any) -> AssignmentRow:
    return AssignmentRow(
        row.assignment_id,
        row.node_id,
        row.job_id,
        int(row.attempt),
        dict(row.spec),
        row.created_at,
        bool(row.cancel_requested),
        row.state,
        None if row.report is None else dict(row.report),
        row.updated_at,
    )


def add_assignment(
    conn: Connection,
    assignment_id: str,
    node_id: str,
    job_id: str,
    attempt: int,
    spec: Mapping[str, Any],
    now: datetime,
) -> bool:
    """Insert once; False if it exists already (a start executed twice is one assignment)."""
    if get_assignment(conn, assignment_id) is not None:
        return False
    conn.execute(
        insert(agent_assignments).values(
            assignment_id=assignment_id,
            node_id=node_id,
            job_id=job_id,
            attempt=attempt,
            spec=dict(spec),
            created_at=now,
            cancel_requested=False,
            state="assigned",
            report=None,
            updated_at=now,
        )
    )
    return True


def get_assignment(conn: Connection, assignment_id: str) -> AssignmentRow | None:
    row = conn.execute(
        select(agent_assignments).where(agent_assignments.c.assignment_id == assignment_id)
    ).first()
    return None if row is None else _assignment(row)


def node_assignments(conn: Connection, node_id: str) -> list[AssignmentRow]:
    rows = conn.execute(
        select(agent_assignments)
        .where(agent_assignments.c.node_id == node_id)
        .order_by(agent_assignments.c.created_at, agent_assignments.c.assignment_id)
    )
    return [_assignment(r) for r in rows]


def job_assignments(conn: Connection, job_id: str) -> list[AssignmentRow]:
    rows = conn.execute(
        select(agent_assignments)
        .where(agent_assignments.c.job_id == job_id)
        .order_by(agent_assignments.c.attempt, agent_assignments.c.assignment_id)
    )
    return [_assignment(r) for r in rows]


def update_assignment(conn: Connection, assignment_id: str, **values: Any) -> None:
    conn.execute(
        update(agent_assignments).where(agent_assignments.c.assignment_id == assignment_id).values(**values)
    )


def cancel_job_assignments(conn: Connection, job_id: str, node_id: str, now: datetime) -> int:
    result = conn.execute(
        update(agent_assignments)
        .where(agent_assignments.c.job_id == job_id, agent_assignments.c.node_id == node_id)
        .values(cancel_requested=True, updated_at=now)
    )
    return int(result.rowcount)


# ---- logs ----------------------------------------------------------------------------------------------


def log_length(conn: Connection, assignment_id: str) -> int:
    """Bytes stored for ``assignment_id`` (chunks are contiguous from offset 0)."""
    row = conn.execute(
        select(agent_log_chunks.c.start_offset, func.length(agent_log_chunks.c.data))
        .where(agent_log_chunks.c.assignment_id == assignment_id)
        .order_by(agent_log_chunks.c.start_offset.desc())
        .limit(1)
    ).first()
    return 0 if row is None else int(row[0]) + int(row[1])


def add_log_chunk(
    conn: Connection, assignment_id: str, job_id: str, attempt: int, offset: int, data: bytes, now: datetime
) -> None:
    conn.execute(
        insert(agent_log_chunks).values(
            assignment_id=assignment_id,
            job_id=job_id,
            attempt=attempt,
            start_offset=offset,
            data=data,
            received_at=now,
        )
    )


MAX_CHUNK_BYTES = 2_000_000  # no stored chunk is longer (the API caps a chunk's size)


def read_log(conn: Connection, assignment_id: str, offset: int, limit_bytes: int) -> bytes:
    """Bytes from ``offset`` on, at most about ``limit_bytes``."""
    rows = conn.execute(
        select(agent_log_chunks.c.start_offset, agent_log_chunks.c.data)
        .where(
            agent_log_chunks.c.assignment_id == assignment_id,
            agent_log_chunks.c.start_offset > offset - MAX_CHUNK_BYTES,  # the chunk holding offset, and on
        )
        .order_by(agent_log_chunks.c.start_offset)
    )
    out = bytearray()
    for start, data in rows:
        end = int(start) + len(data)
        if end <= offset:
            continue
        out += bytes(data)[max(0, offset - int(start)) :]
        if len(out) >= limit_bytes:
            break
    return bytes(out[:limit_bytes])


FINISHED_JOB_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclass(frozen=True, slots=True)
class StoredLog:
    """One job's stored output: its tenant, whether it has finished, its bytes and its newest chunk."""

    job_id: str
    tenant: str
    finished: bool
    size_bytes: int
    last_at: datetime


def stored_logs(conn: Connection) -> list[StoredLog]:
    """Every job's stored output, with its tenant (``default`` for a job stored before tenants) and
    whether it has finished (a job that is gone counts as finished)."""
    c = agent_log_chunks.c
    sizes = (
        select(
            c.job_id.label("job_id"),
            func.sum(func.length(c.data)).label("size_bytes"),
            func.max(c.received_at).label("last_at"),
        )
        .group_by(c.job_id)
        .subquery()
    )
    jobs = projection_table("jobs")
    rows = conn.execute(
        select(
            sizes.c.job_id,
            sizes.c.size_bytes,
            sizes.c.last_at,
            jobs.c.state,
            jobs.c.data["tenant"].as_string().label("tenant"),
        ).join(jobs, jobs.c.id == sizes.c.job_id, isouter=True)
    )
    out = []
    for row in rows:
        last = row.last_at
        if isinstance(last, str):  # in case a driver hands back max() of the column as text
            last = datetime.fromisoformat(last)
        if last.tzinfo is None:
            last = last.replace(tzinfo=UTC)
        out.append(
            StoredLog(
                str(row.job_id),
                str(row.tenant or "default"),
                row.state is None or row.state in FINISHED_JOB_STATES,
                int(row.size_bytes or 0),
                last,
            )
        )
    return out


def delete_job_logs(conn: Connection, job_ids: list[str]) -> int:
    """Delete the stored output of ``job_ids``; the number of chunks deleted."""
    deleted = 0
    for start in range(0, len(job_ids), 500):
        chunk = job_ids[start : start + 500]
        deleted += conn.execute(delete(agent_log_chunks).where(agent_log_chunks.c.job_id.in_(chunk))).rowcount
    return deleted
