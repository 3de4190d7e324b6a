"""Tables for serverless endpoints, their durable requests and scaling decisions.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_endpoints`` (test_migrations).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
MONEY = sa.Numeric().with_variant(sa.String(length=64), "sqlite")


def upgrade() -> None:
    op.create_table(
        "endpoints",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("target", sa.String(length=16), nullable=False),
        sa.Column("handler", sa.String(length=200), nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("remote_id", sa.String(length=200), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.Column("deleted_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_endpoints"),
    )
    op.create_index("ix_endpoints_name", "endpoints", ["name"])
    op.create_index("ix_endpoints_state", "endpoints", ["state"])

    op.create_table(
        "endpoint_workers",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("gpu_group", sa.String(length=32), nullable=True),
        sa.Column("gpu_model", sa.String(length=64), nullable=True),
        sa.Column("node_id", sa.String(length=200), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("price_per_gpu_hour", MONEY, nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("served", sa.Integer(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=True),
        sa.Column("ready_at", TIMESTAMP, nullable=True),
        sa.Column("idle_since", TIMESTAMP, nullable=True),
        sa.Column("stopped_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_endpoint_workers"),
    )
    op.create_index("ix_endpoint_workers_endpoint_id", "endpoint_workers", ["endpoint_id"])
    op.create_index("ix_endpoint_workers_job_id", "endpoint_workers", ["job_id"])
    op.create_index("ix_endpoint_workers_state", "endpoint_workers", ["state"])

    op.create_table(
        "endpoint_requests",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("input", sa.JSON(), nullable=True),
        sa.Column("output", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=True),
        sa.Column("run_until", TIMESTAMP, nullable=True),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_endpoint_requests"),
    )
    op.create_index(
        "ix_endpoint_requests_endpoint_id_status_created_at",
        "endpoint_requests",
        ["endpoint_id", "status", "created_at"],
    )

    op.create_table(
        "endpoint_scaling",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=False),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("code", sa.String(length=100), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("workers_before", sa.Integer(), nullable=False),
        sa.Column("workers_target", sa.Integer(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_endpoint_scaling"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_endpoint_scaling_endpoint_id_id", "endpoint_scaling", ["endpoint_id", "id"])


def downgrade() -> None:
    op.drop_table("endpoint_scaling")
    op.drop_table("endpoint_requests")
    op.drop_table("endpoint_workers")
    op.drop_table("endpoints")
