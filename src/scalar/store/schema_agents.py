"""Tables for node agents, join tokens, assignments and shipped logs; created by migration 0004.

- ``agent_join_tokens``: one-time tokens an agent registers with. Only the SHA-256 of the token is kept. A
  token without ``node_id`` registers a user-owned host (a fixed-capacity block of ``provider``); with one,
  it attaches the agent to that node Scalar bought. ``used_at`` set: spent. ``price_per_gpu_hour`` (0008):
  what the user-owned host's block is recorded at (NULL, as before 0008: 0).
- ``agents``: one row per registered agent (its node), the hash of its node token, its host facts, and its
  heartbeat lease: ``last_seen_at``, ``last_seq`` and ``lease_state`` (``ready``, ``suspect``, ``lost``).
- ``agent_assignments``: what an agent must run: one row per attempt of a job on a node
  (``<job id>:<attempt>``), the assignment's spec (argv, env, GPU UUIDs, limits), whether it must stop, and
  the agent's last report about it.
- ``agent_log_chunks``: an assignment's output, in chunks by byte offset (idempotent: one row per offset),
  so a job's logs outlive its node.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, LargeBinary, String, Table

from scalar.store.coltypes import ExactDecimal, JSONDocument, UTCDateTime
from scalar.store.schema import BigId, metadata

LEASE_STATES = ("ready", "suspect", "lost")

agent_join_tokens = Table(
    "agent_join_tokens",
    metadata,
    Column("token_sha256", String(64), primary_key=True),
    Column("provider", String(64), nullable=False),
    Column("tier", String(16), nullable=False),
    Column("node_id", String(200), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("expires_at", UTCDateTime(), nullable=False),
    Column("used_at", UTCDateTime(), nullable=True),
    Column("used_by", String(200), nullable=True),
    Column("price_per_gpu_hour", ExactDecimal(), nullable=True),
)

agents = Table(
    "agents",
    metadata,
    Column("node_id", String(200), primary_key=True),
    Column("token_sha256", String(64), nullable=False),
    Column("provider", String(64), nullable=False),
    Column("hostname", String(255), nullable=False),
    Column("version", String(64), nullable=False),
    Column("facts", JSONDocument, nullable=False),
    Column("registered_at", UTCDateTime(), nullable=False),
    Column("last_seen_at", UTCDateTime(), nullable=False),
    Column("last_seq", BigInteger, nullable=False),
    Column("lease_state", String(16), nullable=False),
    Column("drain", Boolean, nullable=False),
)

agent_assignments = Table(
    "agent_assignments",
    metadata,
    Column("assignment_id", String(255), primary_key=True),
    Column("node_id", String(200), nullable=False, index=True),
    Column("job_id", String(200), nullable=False, index=True),
    Column("attempt", Integer, nullable=False),
    Column("spec", JSONDocument, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("cancel_requested", Boolean, nullable=False),
    Column("state", String(32), nullable=False),
    Column("report", JSONDocument, nullable=True),
    Column("updated_at", UTCDateTime(), nullable=False),
)

agent_log_chunks = Table(
    "agent_log_chunks",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("assignment_id", String(255), nullable=False),
    Column("job_id", String(200), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("start_offset", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("received_at", UTCDateTime(), nullable=False),
    Index("ix_agent_log_chunks_assignment_id_start_offset", "assignment_id", "start_offset", unique=True),
    Index("ix_agent_log_chunks_job_id_attempt", "job_id", "attempt"),
    sqlite_autoincrement=True,
)

__all__ = [
    "LEASE_STATES",
    "agent_assignments",
    "agent_join_tokens",
    "agent_log_chunks",
    "agents",
    "metadata",
]
