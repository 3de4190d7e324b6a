"""Initial schema: event log, outbox, projections, decisions, leader lease, spot prices.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Plain SQLAlchemy types only (a revision must not change when the application's code does). The store's
column types map onto these: UTCDateTime -> DateTime(timezone=True), ExactDecimal -> NUMERIC on
PostgreSQL / text on SQLite, JSONDocument -> JSON.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
MONEY = sa.Numeric().with_variant(sa.String(length=64), "sqlite")
PROJECTIONS = ("jobs", "nodes", "blocks", "orders", "scale_groups")


def upgrade() -> None:
    op.create_table(
        "batches",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_batches"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "events",
        sa.Column("seq", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("batch_id", BIG_ID, nullable=False),
        sa.Column("stimulus_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], name="fk_events_batch_id_batches"),
        sa.PrimaryKeyConstraint("seq", name="pk_events"),
        sa.UniqueConstraint("stimulus_id", name="uq_events_stimulus_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_events_batch_id", "events", ["batch_id"])

    op.create_table(
        "actions",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("action_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_seq", BIG_ID, nullable=True),
        sa.Column("batch_id", BIG_ID, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.Column("not_before", TIMESTAMP, nullable=True),
        sa.Column("claimed_by", sa.String(length=200), nullable=True),
        sa.Column("claimed_at", TIMESTAMP, nullable=True),
        sa.Column("completed_at", TIMESTAMP, nullable=True),
        sa.CheckConstraint("status IN ('pending', 'in_flight', 'done', 'failed')", name="ck_actions_status"),
        sa.CheckConstraint("attempts >= 0", name="ck_actions_attempts"),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], name="fk_actions_batch_id_batches"),
        sa.ForeignKeyConstraint(["created_seq"], ["events.seq"], name="fk_actions_created_seq_events"),
        sa.PrimaryKeyConstraint("id", name="pk_actions"),
        sa.UniqueConstraint("action_id", name="uq_actions_action_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_actions_status_id", "actions", ["status", "id"])

    op.create_table(
        "decisions",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("entity_id", sa.String(length=200), nullable=False),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.Column("code", sa.String(length=100), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.Column("batch_id", BIG_ID, nullable=True),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], name="fk_decisions_batch_id_batches"),
        sa.PrimaryKeyConstraint("id", name="pk_decisions"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_decisions_entity_id_id", "decisions", ["entity_id", "id"])

    for name in PROJECTIONS:
        op.create_table(
            name,
            sa.Column("id", sa.String(length=200), nullable=False),
            sa.Column("state", sa.String(length=32), nullable=True),
            sa.Column("parent_id", sa.String(length=200), nullable=True),
            sa.Column("data", sa.JSON(), nullable=False),
            sa.Column("updated_at", TIMESTAMP, nullable=True),
            sa.PrimaryKeyConstraint("id", name=f"pk_{name}"),
        )
        op.create_index(f"ix_{name}_state", name, ["state"])
        op.create_index(f"ix_{name}_parent_id", name, ["parent_id"])

    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_leases"),
    )

    op.create_table(
        "spot_prices",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("zone", sa.String(length=64), nullable=False),
        sa.Column("instance_type", sa.String(length=128), nullable=False),
        sa.Column("gpu_model", sa.String(length=64), nullable=True),
        sa.Column("gpu_count", sa.Double(), nullable=False),
        sa.Column("gpu_memory_gb", sa.Double(), nullable=False),
        sa.Column("vcpu", sa.Double(), nullable=False),
        sa.Column("memory_gb", sa.Double(), nullable=False),
        sa.Column("price_per_hour", MONEY, nullable=False),
        sa.Column("spot", sa.Boolean(), nullable=False),
        sa.Column("interruption_rate", sa.Double(), nullable=True),
        sa.Column("observed_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_spot_prices"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_spot_prices_observed_at", "spot_prices", ["observed_at"])
    op.create_index(
        "ix_spot_prices_shape_observed_at",
        "spot_prices",
        ["provider", "region", "zone", "instance_type", "spot", "observed_at"],
    )


def downgrade() -> None:
    op.drop_table("spot_prices")
    op.drop_table("leases")
    for name in reversed(PROJECTIONS):
        op.drop_table(name)
    op.drop_table("decisions")
    op.drop_table("actions")
    op.drop_table("events")
    op.drop_table("batches")
