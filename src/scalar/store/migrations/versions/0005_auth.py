"""Tables for API tokens, tenants and the audit log.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_auth`` (test_migrations).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("secret_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("revoked_at", TIMESTAMP, nullable=True),
        sa.CheckConstraint("role IN ('user', 'admin')", name="ck_api_tokens_role"),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
    )
    op.create_index("ix_api_tokens_tenant", "api_tokens", ["tenant"])

    op.create_table(
        "audit_log",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("entity_id", sa.String(length=200), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.Column("batch_id", BIG_ID, nullable=True),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], name="fk_audit_log_batch_id_batches"),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_audit_log_tenant_id", "audit_log", ["tenant", "id"])


def downgrade() -> None:
    op.drop_table("audit_log")
    op.drop_table("api_tokens")
