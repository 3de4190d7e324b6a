"""The built-in market's own tables (``market_*``), on its own MetaData, created by the market itself.

Times are integer microseconds since the epoch (``*_us``); money is exact decimal text. One row of
``market_meta`` is the market's lock: every write transaction starts by updating it, which serialises
writers on SQLite (the write lock) and PostgreSQL (the row lock) alike, so event sequence numbers are
handed out and committed in order.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

market_metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

meta = Table(
    "market_meta",
    market_metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seed", BigInteger, nullable=False),
    Column("clock_us", BigInteger, nullable=False),  # the latest market time any write has seen
    Column("event_seq", BigInteger, nullable=False),  # the last event sequence number handed out
    Column("version", BigInteger, nullable=False),  # bumped by every write: takes the lock
)

orders = Table(
    "market_orders",
    market_metadata,
    Column("order_id", String(80), primary_key=True),
    Column("provider", String(40), nullable=False),
    Column("idempotency_key", String(255), nullable=False),
    Column("state", String(20), nullable=False),
    Column("reason", Text),
    Column("created_us", BigInteger, nullable=False),
    Column("instance_type", String(200), nullable=False),
    Column("node_count", Integer, nullable=False),
    Column("duration_s", BigInteger, nullable=False),
    Column("limit_price_per_gpu_hour", String(40)),
    Column("tier", String(10), nullable=False),
    Column("gpu_model", String(40)),
    Column("gpus_per_node", Integer, nullable=False),
    Column("spot", Boolean, nullable=False),
    Column("region", String(80)),
    Column("block_id", String(80)),
    Column("total_cents", BigInteger),
    UniqueConstraint("provider", "idempotency_key"),
)

blocks = Table(
    "market_blocks",
    market_metadata,
    Column("block_id", String(80), primary_key=True),
    Column("order_id", String(80), nullable=False),
    Column("provider", String(40), nullable=False),
    Column("instance_type", String(200), nullable=False),
    Column("region", String(80)),
    Column("gpu_model", String(40)),
    Column("gpus_per_node", Integer, nullable=False),
    Column("vram_per_gpu_gb", Float, nullable=False),
    Column("cpu_per_node", Float, nullable=False),
    Column("ram_per_node_gb", Float, nullable=False),
    Column("start_us", BigInteger, nullable=False),
    Column("end_us", BigInteger, nullable=False),
    Column("price_per_gpu_hour", String(40), nullable=False),
    Column("spot", Boolean, nullable=False),
    Column("interruption_rate", Float),
    Column("released_us", BigInteger),
)

nodes = Table(
    "market_nodes",
    market_metadata,
    Column("node_id", String(100), primary_key=True),
    Column("block_id", String(80), nullable=False, index=True),
    Column("provider", String(40), nullable=False),
    Column("idx", Integer, nullable=False),
    Column("state", String(20), nullable=False),
    Column("booting_us", BigInteger, nullable=False),
    Column("initializing_us", BigInteger, nullable=False),
    Column("ready_us", BigInteger, nullable=False),
    Column("fail_cause", String(200)),
    Column("preempt_us", BigInteger),
    Column("end_us", BigInteger, nullable=False),
    Column("next_us", BigInteger, index=True),  # the next move's time; NULL once FAILED or TERMINATED
)

work = Table(
    "market_work",
    market_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node_id", String(100), nullable=False, index=True),
    Column("job_id", String(200), nullable=False),
    Column("started_us", BigInteger, nullable=False),
    Column("finish_us", BigInteger, nullable=False),
    Column("ended_us", BigInteger),
    Column("outcome", String(20)),  # succeeded | killed | stopped
    Index("ix_market_work_open_finish", "ended_us", "finish_us"),
)

# The work a job does, declared by whoever plays its user (``BuiltinMarket.declare_work``): the market runs
# it for ``reference_s / work_rate(model, tier)`` on a node of ``model`` instead of the duration it is told.
job_work = Table(
    "market_job_work",
    market_metadata,
    Column("job_id", String(200), primary_key=True),
    Column("reference_s", Float, nullable=False),
    Column("tier", String(10), nullable=False),
)

fills = Table(
    "market_fills",
    market_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_type", String(40), nullable=False),
    Column("hour", BigInteger, nullable=False),
    Column("level_key", String(40), nullable=False),
    Column("quantity_gpus", Integer, nullable=False),
    Column("price_per_gpu_hour", String(40), nullable=False),
    Column("order_id", String(80), nullable=False),
    Index("ix_market_fills_book", "instance_type", "hour"),
    Index("ix_market_fills_level", "level_key"),
)

sales = Table(  # sell orders on the remaining time of a block's nodes (providers/builtin/sales.py)
    "market_sales",
    market_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("idempotency_key", String(255), nullable=False, unique=True),
    Column("provider", String(40), nullable=False),
    Column("block_id", String(80), nullable=False, index=True),
    Column("instance_type", String(40), nullable=False),
    Column("hour", BigInteger, nullable=False),
    Column("nodes_offered", Integer, nullable=False),
    Column("node_ids_sold", String(4000), nullable=False),  # space-separated
    Column("gpus_per_node", Integer, nullable=False),
    Column("quantity_gpus", Integer, nullable=False),  # GPUs sold (bid depth taken this hour)
    Column("hours", Integer, nullable=False),
    Column("cut_us", BigInteger, nullable=False),
    Column("price_per_gpu_hour", String(40), nullable=False),
    Column("placed_us", BigInteger, nullable=False),
    Index("ix_market_sales_book", "instance_type", "hour"),
)

resales = Table(
    "market_resales",
    market_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_type", String(40), nullable=False),
    Column("block_id", String(80), nullable=False),
    Column("price_per_gpu_hour", String(40), nullable=False),
    Column("quantity_gpus", Integer, nullable=False),
    Column("duration_hours", Integer, nullable=False),
    Column("listed_us", BigInteger, nullable=False),
    Column("expires_us", BigInteger, nullable=False, index=True),
)

events = Table(
    "market_events",
    market_metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("provider", String(40), nullable=False),
    Column("node_id", String(100), nullable=False),
    Column("block_id", String(80), nullable=False),
    Column("at_us", BigInteger, nullable=False),
    Column("state", String(20)),
    Column("job_id", String(200)),
    Column("job_succeeded", Boolean),
    Column("reason", Text),
    Column("details", Text, nullable=False),  # JSON object of strings
    Index("ix_market_events_provider_seq", "provider", "seq"),
)

boot_faults = Table(
    "market_boot_faults",
    market_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("provider", String(40)),
    Column("instance_type", String(200)),
    Column("remaining", Integer, nullable=False),
)
