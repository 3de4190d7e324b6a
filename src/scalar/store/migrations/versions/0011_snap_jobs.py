"""The live jobs of the leader's published decision state, a row per job (``store/snapshot_jobs.py``).

Revision ID: 0011_snap
Revises: 0010_shared
Create Date: 2026-11-27

A step rewrites only the rows of the jobs it changed; the rest of the decision state stays one
``runtime_state`` document (``controller:snapshot``), written in the same transaction. A snapshot stored
whole by an older version is of an older format: the preview refuses it until the leader's next step.
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
        "snapshot_jobs",
        sa.Column("job_id", sa.String(200), primary_key=True),
        sa.Column("ord", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("snapshot_jobs")
