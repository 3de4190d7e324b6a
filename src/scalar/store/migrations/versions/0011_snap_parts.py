"""The large parts of the leader's published decision state, a row each (``store/snapshot_parts.py``).

Revision ID: 0011_snap
Revises: 0010_shared
Create Date: 2026-11-27

A step rewrites only the rows it changed (the live jobs it moved or re-routed, the jobs that arrived); the
rest of the decision state stays one ``runtime_state`` document (``controller:snapshot``), written in the
same transaction. A snapshot stored whole by an older version is of an older format: the preview refuses
it until the leader's next step, which writes every row afresh (a new leader always does).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_snap"
down_revision = "0010_shared"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "snapshot_parts",
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("ord", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "key", name="pk_snapshot_parts"),
    )
    op.create_index("ix_snapshot_parts_kind_ord", "snapshot_parts", ["kind", "ord"])


def downgrade() -> None:
    op.drop_index("ix_snapshot_parts_kind_ord", table_name="snapshot_parts")
    op.drop_table("snapshot_parts")
