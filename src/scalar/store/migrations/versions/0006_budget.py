"""Tables for spend limits.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_budget`` (test_migrations).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)
MONEY = sa.Numeric().with_variant(sa.String(length=64), "sqlite")


def upgrade() -> None:
    op.create_table(
        "budget_limits",
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("usd_per_hour", MONEY, nullable=True),
        sa.Column("usd_per_period", MONEY, nullable=True),
        sa.Column("period", sa.String(length=8), nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_budget_limits"),
    )
    op.create_table(
        "budget_spend",
        sa.Column("action_id", sa.String(length=64), nullable=False),
        sa.Column("usd_per_hour", MONEY, nullable=False),
        sa.Column("starts_at", TIMESTAMP, nullable=False),
        sa.Column("ends_at", TIMESTAMP, nullable=False),
        sa.Column("shares", sa.JSON(), nullable=False),
        sa.Column("recorded_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("action_id", name="pk_budget_spend"),
    )
    op.create_index("ix_budget_spend_ends_at", "budget_spend", ["ends_at"])


def downgrade() -> None:
    op.drop_table("budget_spend")
    op.drop_table("budget_limits")
