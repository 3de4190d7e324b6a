"""Tables for serverless endpoints, their durable requests and scaling decisions; created by migration 0003.

- ``endpoints``: one row per endpoint: its normalized spec (JSON, ``wire.endpoints.endpoint_to_json``), where
  its workers run (``target``: builtin, local, runpod), the handler of a local endpoint, and ``state``
  (``active`` or ``deleted``; a deleted endpoint is kept, so its requests and decisions stay readable).
- ``endpoint_workers``: one row per worker. A worker is a job (``job_id``) of the control plane; ``state`` is
  the worker lifecycle (``scalar.domain.endpoint_workers``).
- ``endpoint_requests``: the durable request queue. ``attempts`` counts deliveries to a worker, ``retries``
  the deliveries lost with their worker; ``run_until`` is when the modeled service time ends.
- ``endpoint_stream_chunks``: what a streaming handler yielded, in order (``seq``); ``taken`` once
  ``/v2/{id}/stream/{request}`` returned it (each chunk is returned once).
- ``endpoint_scaling``: every scaling decision with its reason (code and sentence) and the numbers it saw.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, String, Table, Text, false

from scalar.store.coltypes import ExactDecimal, JSONDocument, UTCDateTime
from scalar.store.schema import BigId, metadata

endpoints = Table(
    "endpoints",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(64), nullable=False, index=True),
    Column("tenant", String(64), nullable=False, index=True, server_default="default"),
    Column("state", String(16), nullable=False, index=True),
    Column("target", String(16), nullable=False),
    Column("handler", String(200), nullable=True),
    Column("spec", JSONDocument, nullable=False),
    Column("remote_id", String(200), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("deleted_at", UTCDateTime(), nullable=True),
    Index("ix_endpoints_created_at_id", "created_at", "id"),  # the list's order (keyset paging)
)

endpoint_workers = Table(
    "endpoint_workers",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("endpoint_id", String(64), nullable=False, index=True),
    Column("job_id", String(200), nullable=True, index=True),
    Column("state", String(16), nullable=False, index=True),
    Column("gpu_group", String(32), nullable=True),
    Column("gpu_model", String(64), nullable=True),
    Column("node_id", String(200), nullable=True),
    Column("gpu_count", Integer, nullable=False),
    Column("price_per_gpu_hour", ExactDecimal(), nullable=True),
    Column("reason", Text, nullable=True),
    Column("served", Integer, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("started_at", UTCDateTime(), nullable=True),
    Column("ready_at", UTCDateTime(), nullable=True),
    Column("idle_since", UTCDateTime(), nullable=True),
    Column("stopped_at", UTCDateTime(), nullable=True),
)

endpoint_requests = Table(
    "endpoint_requests",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("endpoint_id", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("input", JSONDocument, nullable=True),
    Column("output", JSONDocument, nullable=True),
    Column("error", Text, nullable=True),
    Column("attempts", Integer, nullable=False),
    Column("retries", Integer, nullable=False),
    Column("worker_id", String(64), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("started_at", UTCDateTime(), nullable=True),
    Column("run_until", UTCDateTime(), nullable=True),
    Column("finished_at", UTCDateTime(), nullable=True),
    # RunPod's request options (migration 0009): the webhook and its delivery, the request's own execution
    # timeout (policy.executionTimeout) and when it expires (created + policy.ttl)
    Column("webhook", String(2048), nullable=True),
    Column("webhook_status", String(16), nullable=True),
    Column("webhook_attempts", Integer, nullable=False, server_default="0"),
    Column("webhook_next_at", UTCDateTime(), nullable=True),
    Column("webhook_error", Text, nullable=True),
    Column("execution_timeout_ms", BigInteger, nullable=True),
    Column("expires_at", UTCDateTime(), nullable=True),
    Index("ix_endpoint_requests_endpoint_id_status_created_at", "endpoint_id", "status", "created_at"),
)

endpoint_stream_chunks = Table(
    "endpoint_stream_chunks",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("request_id", String(64), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("output", JSONDocument, nullable=True),
    Column("taken", Boolean, nullable=False, server_default=false()),
    Column("at", UTCDateTime(), nullable=False),
    Index("ix_endpoint_stream_chunks_request_id_seq", "request_id", "seq"),
    sqlite_autoincrement=True,
)

endpoint_scaling = Table(
    "endpoint_scaling",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("endpoint_id", String(64), nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("action", String(16), nullable=False),
    Column("code", String(100), nullable=False),
    Column("message", Text, nullable=False),
    Column("workers_before", Integer, nullable=False),
    Column("workers_target", Integer, nullable=False),
    Column("data", JSONDocument, nullable=True),
    Index("ix_endpoint_scaling_endpoint_id_id", "endpoint_id", "id"),
    sqlite_autoincrement=True,
)

__all__ = [
    "endpoint_requests",
    "endpoint_scaling",
    "endpoint_stream_chunks",
    "endpoint_workers",
    "endpoints",
    "metadata",
]
