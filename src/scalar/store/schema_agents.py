"""Tables for node agents, join tokens, assignments and shipped logs (issue 9); created by migration 0004."""

from __future__ import annotations

from scalar.store.schema import metadata

__all__ = ["metadata"]
