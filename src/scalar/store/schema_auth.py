"""Tables for API tokens, tenants and the audit log; created by migration 0005.

- ``api_tokens``: one row per API token. Only the SHA-256 of the token's secret part is kept
  (``secret_sha256``); the token itself is shown once, when it is created. ``revoked_at`` set: refused.
- ``audit_log``: who spent what. One row per purchase or release and tenant it is attributed to (and per
  token created or revoked), written in the transaction that records the action.
"""

from __future__ import annotations

from sqlalchemy import CheckConstraint, Column, ForeignKey, Index, String, Table

from scalar.store.coltypes import JSONDocument, UTCDateTime
from scalar.store.schema import BigId, metadata

ROLES = ("user", "admin")

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("tenant", String(64), nullable=False, index=True),
    Column("role", String(16), nullable=False),
    Column("name", String(200), nullable=True),
    Column("secret_sha256", String(64), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("revoked_at", UTCDateTime(), nullable=True),
    Column("expires_at", UTCDateTime(), nullable=True),
    CheckConstraint("role IN ('user', 'admin')", name="role"),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime(), nullable=False),
    Column("tenant", String(64), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("action", String(64), nullable=False),
    Column("entity_id", String(200), nullable=False),
    Column("data", JSONDocument, nullable=True),
    Column("batch_id", BigId, ForeignKey("batches.id"), nullable=True),
    Index("ix_audit_log_tenant_id", "tenant", "id"),
    sqlite_autoincrement=True,
)

__all__ = ["ROLES", "api_tokens", "audit_log", "metadata"]
