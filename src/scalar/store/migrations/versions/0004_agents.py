"""Tables for node agents, join tokens, assignments and shipped logs.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_agents`` (test_migrations).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "agent_join_tokens",
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("node_id", sa.String(length=200), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
        sa.Column("used_at", TIMESTAMP, nullable=True),
        sa.Column("used_by", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("token_sha256", name="pk_agent_join_tokens"),
    )
    op.create_table(
        "agents",
        sa.Column("node_id", sa.String(length=200), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("registered_at", TIMESTAMP, nullable=False),
        sa.Column("last_seen_at", TIMESTAMP, nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("lease_state", sa.String(length=16), nullable=False),
        sa.Column("drain", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("node_id", name="pk_agents"),
    )
    op.create_table(
        "agent_assignments",
        sa.Column("assignment_id", sa.String(length=255), nullable=False),
        sa.Column("node_id", sa.String(length=200), nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("assignment_id", name="pk_agent_assignments"),
    )
    op.create_index("ix_agent_assignments_node_id", "agent_assignments", ["node_id"])
    op.create_index("ix_agent_assignments_job_id", "agent_assignments", ["job_id"])
    op.create_table(
        "agent_log_chunks",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("assignment_id", sa.String(length=255), nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("start_offset", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("received_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_agent_log_chunks"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_agent_log_chunks_assignment_id_start_offset",
        "agent_log_chunks",
        ["assignment_id", "start_offset"],
        unique=True,
    )
    op.create_index("ix_agent_log_chunks_job_id_attempt", "agent_log_chunks", ["job_id", "attempt"])


def downgrade() -> None:
    op.drop_table("agent_log_chunks")
    op.drop_table("agent_assignments")
    op.drop_table("agents")
    op.drop_table("agent_join_tokens")
