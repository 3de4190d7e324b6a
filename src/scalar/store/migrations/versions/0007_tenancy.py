"""Endpoints belong to a tenant; API tokens can expire (issues 7 and 8).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_endpoints`` and
``scalar.store.schema_auth`` (test_migrations). Endpoints created before this revision belong to the
``default`` tenant (the tenant of an unauthenticated server); tokens created before it never expire.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("endpoints") as batch:
        batch.add_column(sa.Column("tenant", sa.String(length=64), nullable=False, server_default="default"))
        batch.create_index("ix_endpoints_tenant", ["tenant"])
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("expires_at", TIMESTAMP, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("expires_at")
    with op.batch_alter_table("endpoints") as batch:
        batch.drop_index("ix_endpoints_tenant")
        batch.drop_column("tenant")
