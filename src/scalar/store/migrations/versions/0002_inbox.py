"""The inbox (requests any process may insert, the leader consumes once) and runtime_state (cursors).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

Plain SQLAlchemy types only, as in 0001.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "inbox",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("entity_id", sa.String(length=200), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("consumed_at", TIMESTAMP, nullable=True),
        sa.Column("batch_id", BIG_ID, nullable=True),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], name="fk_inbox_batch_id_batches"),
        sa.PrimaryKeyConstraint("id", name="pk_inbox"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_inbox_entity_id", "inbox", ["entity_id"])
    op.create_index("ix_inbox_consumed_at_id", "inbox", ["consumed_at", "id"])

    op.create_table(
        "runtime_state",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("key", name="pk_runtime_state"),
    )


def downgrade() -> None:
    op.drop_table("runtime_state")
    op.drop_table("inbox")
