"""Tables for spend limits; created by migration 0006.

- ``budget_limits``: one row per scope (``global`` or a tenant): USD per hour and USD per period (a UTC
  day or month); ``NULL`` is no limit. Written by ``PUT /budgets`` (and from ``[budgets]`` at start).
- ``budget_spend``: one row per purchase recorded, in the transaction that stores its ``BuyCapacity``:
  its rate (USD per hour), the span it commits (``starts_at`` .. ``ends_at``, moved earlier when the
  purchase is refused, rejected or its block released) and its tenant shares. The limits are checked over
  these rows inside that same (serialised) transaction, so two controllers cannot both spend the last dollar.
"""

from __future__ import annotations

from sqlalchemy import Column, String, Table

from scalar.store.coltypes import ExactDecimal, JSONDocument, UTCDateTime
from scalar.store.schema import metadata

budget_limits = Table(
    "budget_limits",
    metadata,
    Column("scope", String(64), primary_key=True),
    Column("usd_per_hour", ExactDecimal(), nullable=True),
    Column("usd_per_period", ExactDecimal(), nullable=True),
    Column("period", String(8), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)

budget_spend = Table(
    "budget_spend",
    metadata,
    Column("action_id", String(64), primary_key=True),
    Column("usd_per_hour", ExactDecimal(), nullable=False),
    Column("starts_at", UTCDateTime(), nullable=False),
    Column("ends_at", UTCDateTime(), nullable=False, index=True),
    Column("shares", JSONDocument, nullable=False),
    Column("recorded_at", UTCDateTime(), nullable=False),
)

__all__ = ["budget_limits", "budget_spend", "metadata"]
