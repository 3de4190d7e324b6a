"""Tables for spend limits and cost attribution (issue 8); created by migration 0006."""

from __future__ import annotations

from scalar.store.schema import metadata

__all__ = ["metadata"]
