"""The API's token buckets, shared by every API process on the database (``store/ratelimit.py``).

Revision ID: 0010_shared
Revises: 0010_lists
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_shared"
down_revision = "0010_lists"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_buckets",
        sa.Column("key", sa.String(300), primary_key=True),
        sa.Column("level", sa.Double(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("granted", sa.Integer(), nullable=False),
    )
    op.create_index("ix_rate_buckets_at", "rate_buckets", ["at"])


def downgrade() -> None:
    op.drop_index("ix_rate_buckets_at", table_name="rate_buckets")
    op.drop_table("rate_buckets")
