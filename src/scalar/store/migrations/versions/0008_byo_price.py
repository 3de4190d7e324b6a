"""A join token carries the price of the user-owned host it registers (bring your own nodes).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_agents`` (test_migrations).
Tokens created before this revision have no price: their hosts register at 0, as they did.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

MONEY = sa.Numeric().with_variant(sa.String(length=64), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("agent_join_tokens") as batch:
        batch.add_column(sa.Column("price_per_gpu_hour", MONEY, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("agent_join_tokens") as batch:
        batch.drop_column("price_per_gpu_hour")
