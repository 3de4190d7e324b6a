"""RunPod's request options and streams: a request's webhook and its delivery, its own execution
timeout and time to live; the chunks a streaming handler yields.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26

Plain SQLAlchemy types only, as in 0001. Kept equal to ``scalar.store.schema_endpoints`` (test_migrations).
Requests stored before this revision have no webhook, no timeout of their own and no time to live.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("endpoint_requests") as batch:
        batch.add_column(sa.Column("webhook", sa.String(length=2048), nullable=True))
        batch.add_column(sa.Column("webhook_status", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("webhook_attempts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("webhook_next_at", TIMESTAMP, nullable=True))
        batch.add_column(sa.Column("webhook_error", sa.Text(), nullable=True))
        batch.add_column(sa.Column("execution_timeout_ms", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("expires_at", TIMESTAMP, nullable=True))
    op.create_table(
        "endpoint_stream_chunks",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("output", sa.JSON(), nullable=True),
        sa.Column("taken", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_endpoint_stream_chunks"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_endpoint_stream_chunks_request_id_seq", "endpoint_stream_chunks", ["request_id", "seq"]
    )


def downgrade() -> None:
    op.drop_table("endpoint_stream_chunks")
    with op.batch_alter_table("endpoint_requests") as batch:
        for column in (
            "expires_at",
            "execution_timeout_ms",
            "webhook_error",
            "webhook_next_at",
            "webhook_attempts",
            "webhook_status",
            "webhook",
        ):
            batch.drop_column(column)
