"""Indexes for lists that page with a cursor (``GET /jobs``, ``/nodes``, ``/blocks``, ``/endpoints``).

Revision ID: 0010_lists
Revises: 0009
Create Date: 2026-11-26

- ``ix_<projection>_state_id``: a list filtered by state comes out in id order without a sort.
- ``ix_endpoints_created_at_id``: endpoints in creation order.
- ``ix_jobs_tenant_id``: a tenant's jobs in id order. An expression index over the job's ``tenant``
  (``default`` when the job has none), spelled per dialect; ``scalar.store.auth.job_owner`` is the same
  expression, so the planner uses it. Alembic cannot compare expression indexes, so it is not in
  ``schema.metadata`` and ``migrate.schema_diff`` leaves it out (``EXPRESSION_INDEXES``).
"""

from __future__ import annotations

from alembic import op

revision = "0010_lists"
down_revision = "0009"
branch_labels = None
depends_on = None

PROJECTIONS = ("jobs", "nodes", "blocks", "orders", "scale_groups")
TENANT_INDEX = {
    "sqlite": "CREATE INDEX ix_jobs_tenant_id ON jobs (coalesce(json_extract(data, '$.tenant'), 'default'), id)",
    "postgresql": "CREATE INDEX ix_jobs_tenant_id ON jobs ((coalesce(data ->> 'tenant', 'default')), id)",
}


def upgrade() -> None:
    for name in PROJECTIONS:
        op.create_index(f"ix_{name}_state_id", name, ["state", "id"])
    op.create_index("ix_endpoints_created_at_id", "endpoints", ["created_at", "id"])
    op.execute(TENANT_INDEX[op.get_bind().dialect.name])


def downgrade() -> None:
    op.drop_index("ix_jobs_tenant_id", table_name="jobs")
    op.drop_index("ix_endpoints_created_at_id", table_name="endpoints")
    for name in PROJECTIONS:
        op.drop_index(f"ix_{name}_state_id", table_name=name)
