"""The tables. Migrations (``migrations/versions``) create them; a test checks they match this metadata.

- ``batches`` / ``events``: the event log. One batch per ``Controller.step`` worth of new input events, all
  written in one transaction; ``events.seq`` is the replay order, ``stimulus_id`` makes re-delivery a no-op.
- ``actions``: the transactional outbox of provider calls, keyed by ``action_id`` (the idempotency key).
- ``jobs``, ``nodes``, ``blocks``, ``orders``, ``scale_groups``: projections for queries (JSON ``data`` plus
  indexed ``state`` and ``parent_id``), rewritten in the same transaction as the events.
- ``decisions``: why things happened, per entity (a story, as Dask's ``story(key)``).
- ``leases``: the leader lease with its fencing epoch.
- ``spot_prices``: market observations, append-only.
- ``inbox``: requests (job submissions, cancellations) any process may insert; the leader consumes each one
  exactly once, in the transaction that appends the events it becomes.
- ``runtime_state``: small JSON documents the leader keeps in step with the log (a provider's event cursor),
  written in the same transaction as the events they describe.
- ``snapshot_parts``: the large parts of the leader's published decision state, a row each (a live job, a
  job of the demand forecast; the rest of that state is ``runtime_state`` row ``controller:snapshot``),
  rewritten only where a step changed them (``store/snapshot_parts.py``).
- ``rate_buckets``: the API's token buckets (per token, node, worker, failing address), shared by every API
  process on the database (``store/ratelimit.py``).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

from scalar.store.coltypes import ExactDecimal, JSONDocument, UTCDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

# 64-bit ids on PostgreSQL; on SQLite an INTEGER PRIMARY KEY is already 64-bit and must be spelled INTEGER
# to be the rowid (AUTOINCREMENT: ids are never reused, even after deletes).
BigId = BigInteger().with_variant(Integer(), "sqlite")

ACTION_STATUSES = ("pending", "in_flight", "done", "failed")
PROJECTIONS = ("jobs", "nodes", "blocks", "orders", "scale_groups")

batches = Table(
    "batches",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime(), nullable=False),
    Column("holder", String(200), nullable=True),
    Column("epoch", BigInteger, nullable=True),
    sqlite_autoincrement=True,
)

events = Table(
    "events",
    metadata,
    Column("seq", BigId, primary_key=True, autoincrement=True),
    Column("batch_id", BigId, ForeignKey("batches.id"), nullable=False, index=True),
    Column("stimulus_id", String(200), nullable=False, unique=True),
    Column("kind", String(100), nullable=False),
    Column("payload", JSONDocument, nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    sqlite_autoincrement=True,
)

actions = Table(
    "actions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("action_id", String(200), nullable=False, unique=True),
    Column("kind", String(100), nullable=False),
    Column("payload", JSONDocument, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("result", JSONDocument, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_seq", BigId, ForeignKey("events.seq"), nullable=True),
    Column("batch_id", BigId, ForeignKey("batches.id"), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("not_before", UTCDateTime(), nullable=True),
    Column("claimed_by", String(200), nullable=True),
    Column("claimed_at", UTCDateTime(), nullable=True),
    Column("completed_at", UTCDateTime(), nullable=True),
    CheckConstraint(
        "status IN ('pending', 'in_flight', 'done', 'failed')",
        name="status",
    ),
    CheckConstraint("attempts >= 0", name="attempts"),
    Index("ix_actions_status_id", "status", "id"),
    sqlite_autoincrement=True,
)

decisions = Table(
    "decisions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("entity_id", String(200), nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("code", String(100), nullable=False),
    Column("message", Text, nullable=False),
    Column("data", JSONDocument, nullable=True),
    Column("batch_id", BigId, ForeignKey("batches.id"), nullable=True),
    Index("ix_decisions_entity_id_id", "entity_id", "id"),
    sqlite_autoincrement=True,
)


def _projection(name: str) -> Table:
    return Table(
        name,
        metadata,
        Column("id", String(200), primary_key=True),
        Column("state", String(32), nullable=True, index=True),
        Column("parent_id", String(200), nullable=True, index=True),
        Column("data", JSONDocument, nullable=False),
        Column("updated_at", UTCDateTime(), nullable=True),
        # lists filtered by state come out in id order from this index (keyset paging, no sort)
        Index(f"ix_{name}_state_id", "state", "id"),
    )


projection_tables: dict[str, Table] = {name: _projection(name) for name in PROJECTIONS}

leases = Table(
    "leases",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("holder", String(200), nullable=True),
    Column("epoch", BigInteger, nullable=False),
    Column("expires_at", UTCDateTime(), nullable=True),
)

spot_prices = Table(
    "spot_prices",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("provider", String(64), nullable=False),
    Column("region", String(64), nullable=False),
    Column("zone", String(64), nullable=False),
    Column("instance_type", String(128), nullable=False),
    Column("gpu_model", String(64), nullable=True),
    Column("gpu_count", Double, nullable=False),
    Column("gpu_memory_gb", Double, nullable=False),
    Column("vcpu", Double, nullable=False),
    Column("memory_gb", Double, nullable=False),
    Column("price_per_hour", ExactDecimal(), nullable=False),
    Column("spot", Boolean, nullable=False),
    Column("interruption_rate", Double, nullable=True),
    Column("observed_at", UTCDateTime(), nullable=False, index=True),
    Index(
        "ix_spot_prices_shape_observed_at",
        "provider",
        "region",
        "zone",
        "instance_type",
        "spot",
        "observed_at",
    ),
    sqlite_autoincrement=True,
)

inbox = Table(
    "inbox",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("kind", String(32), nullable=False),
    Column("entity_id", String(200), nullable=False, index=True),
    Column("payload", JSONDocument, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("consumed_at", UTCDateTime(), nullable=True),
    Column("batch_id", BigId, ForeignKey("batches.id"), nullable=True),
    Index("ix_inbox_consumed_at_id", "consumed_at", "id"),
    sqlite_autoincrement=True,
)

runtime_state = Table(
    "runtime_state",
    metadata,
    Column("key", String(200), primary_key=True),
    Column("value", JSONDocument, nullable=False),
    Column("updated_at", UTCDateTime(), nullable=True),
)

# The large parts of the published decision state (store/snapshot_parts.py): ``value`` a part as JSON text,
# ``ord`` its place in its kind's order.
snapshot_parts = Table(
    "snapshot_parts",
    metadata,
    Column("kind", String(16), nullable=False),
    Column("key", String(200), nullable=False),
    Column("ord", BigInteger(), nullable=False),
    Column("value", Text(), nullable=False),
    PrimaryKeyConstraint("kind", "key", name="pk_snapshot_parts"),
    Index("ix_snapshot_parts_kind_ord", "kind", "ord"),
)

# Token buckets shared by every API process on this database (store/ratelimit.py): ``level`` tokens at
# ``at`` (epoch seconds of the process that last took one), ``granted`` the outcome of that last take.
rate_buckets = Table(
    "rate_buckets",
    metadata,
    Column("key", String(300), primary_key=True),
    Column("level", Double(), nullable=False),
    Column("at", Double(), nullable=False),
    Column("granted", Integer(), nullable=False),
    Index("ix_rate_buckets_at", "at"),
)


# Each concern's tables live in its own module over the same ``metadata`` (imported last: they use it).
from scalar.store import schema_agents, schema_auth, schema_budget, schema_endpoints  # noqa: E402, F401
