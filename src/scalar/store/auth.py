"""Repositories of the auth tables (``schema_auth``): API tokens, the audit log, jobs by tenant.

Plain functions over a SQLAlchemy ``Connection`` (``tx.conn`` of a ``Store.write()``/``read()``), so an
audit row is written in the very transaction that records what it audits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, String, literal_column, select, update

from scalar.store import jsoncodec
from scalar.store.projections import Projection, projection_table
from scalar.store.schema_auth import api_tokens, audit_log


@dataclass(frozen=True, slots=True)
class StoredToken:
    """A token as stored: never the token itself, only the SHA-256 of its secret part."""

    id: str
    tenant: str
    role: str
    name: str | None
    secret_sha256: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audited action; ``tenant`` is who it is attributed to, ``actor`` who (or what) did it."""

    at: datetime
    tenant: str
    actor: str
    action: str
    entity_id: str
    data: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class StoredAuditEntry:
    id: int
    at: datetime
    tenant: str
    actor: str
    action: str
    entity_id: str
    data: dict[str, Any] | None
    batch_id: int | None


def _token(row: Any) -> StoredToken:
    return StoredToken(
        row.id,
        row.tenant,
        row.role,
        row.name,
        row.secret_sha256,
        row.created_at,
        row.revoked_at,
        row.expires_at,
    )


def insert_token(conn: Connection, token: StoredToken) -> None:
    conn.execute(
        api_tokens.insert().values(
            id=token.id,
            tenant=token.tenant,
            role=token.role,
            name=token.name,
            secret_sha256=token.secret_sha256,
            created_at=token.created_at,
            revoked_at=token.revoked_at,
            expires_at=token.expires_at,
        )
    )


def get_token(conn: Connection, token_id: str) -> StoredToken | None:
    row = conn.execute(select(api_tokens).where(api_tokens.c.id == token_id)).first()
    return None if row is None else _token(row)


def list_tokens(conn: Connection, *, include_revoked: bool = True) -> list[StoredToken]:
    query = select(api_tokens).order_by(api_tokens.c.created_at, api_tokens.c.id)
    if not include_revoked:
        query = query.where(api_tokens.c.revoked_at.is_(None))
    return [_token(row) for row in conn.execute(query)]


def revoke_token(conn: Connection, token_id: str, *, at: datetime) -> bool:
    """Mark the token revoked; returns whether it existed and was not revoked yet."""
    result = conn.execute(
        update(api_tokens)
        .where(api_tokens.c.id == token_id, api_tokens.c.revoked_at.is_(None))
        .values(revoked_at=at)
    )
    return int(result.rowcount) == 1


def add_audit(conn: Connection, entries: Sequence[AuditEntry], *, batch_id: int | None = None) -> None:
    if not entries:
        return
    conn.execute(
        audit_log.insert(),
        [
            {
                "at": e.at,
                "tenant": e.tenant,
                "actor": e.actor,
                "action": e.action,
                "entity_id": e.entity_id,
                "data": None if e.data is None else jsoncodec.canonical(e.data),
                "batch_id": batch_id,
            }
            for e in entries
        ],
    )


def list_audit(
    conn: Connection,
    *,
    tenant: str | None = None,
    action: str | None = None,
    after_id: int = 0,
    limit: int = 100,
    before_id: int | None = None,
) -> list[StoredAuditEntry]:
    """Audit rows in the order they were written, optionally of one tenant and/or one action; with
    ``before_id``: the rows before that id, the newest first (a page back)."""
    query = select(audit_log).where(audit_log.c.id > after_id)
    if before_id is not None:
        query = query.where(audit_log.c.id < before_id)
    if tenant is not None:
        query = query.where(audit_log.c.tenant == tenant)
    if action is not None:
        query = query.where(audit_log.c.action == action)
    order = audit_log.c.id.desc() if before_id is not None else audit_log.c.id
    rows = conn.execute(query.order_by(order).limit(limit))
    return [
        StoredAuditEntry(
            row.id, row.at, row.tenant, row.actor, row.action, row.entity_id, row.data, row.batch_id
        )
        for row in rows
    ]


def job_owner(dialect: str) -> ColumnElement[str]:
    """The tenant a ``jobs`` row belongs to (``default`` for jobs stored before tenants existed): the same
    expression as the ``ix_jobs_tenant_id`` index (migration 0010), so a tenant's list is read from it."""
    if dialect == "postgresql":
        return literal_column("coalesce(jobs.data ->> 'tenant', 'default')", String)
    return literal_column("coalesce(json_extract(jobs.data, '$.tenant'), 'default')", String)


def list_jobs_of_tenant(
    conn: Connection,
    tenant: str,
    state: str | None = None,
    *,
    limit: int = 100,
    offset: int = 0,
    descending: bool = False,
    after: str | None = None,
) -> list[Projection]:
    """The ``jobs`` projection rows of one tenant (jobs stored before tenants existed belong to
    ``default``), ordered by id (``descending``: newest first), optionally only those in ``state``;
    ``after``: only those past that id in this order (keyset paging)."""
    t = projection_table("jobs")
    query = select(t).where(job_owner(conn.dialect.name) == tenant)
    if state is not None:
        query = query.where(t.c.state == state)
    if after is not None:
        query = query.where(t.c.id < after if descending else t.c.id > after)
    order = t.c.id.desc() if descending else t.c.id
    rows = conn.execute(query.order_by(order).limit(limit).offset(offset))
    return [Projection("jobs", row.id, row.state, row.parent_id, row.data, row.updated_at) for row in rows]


def foreign_job_ids(conn: Connection, tenant: str, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` are jobs of a tenant other than ``tenant`` (ids of no job are not returned)."""
    wanted = sorted(set(ids))
    if not wanted:
        return set()
    t = projection_table("jobs")
    owner = t.c.data["tenant"].as_string()
    found: set[str] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        rows = conn.execute(select(t.c.id, owner.label("owner")).where(t.c.id.in_(chunk)))
        found.update(str(row.id) for row in rows if (row.owner or "default") != tenant)
    return found
