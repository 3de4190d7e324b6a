"""Tables for API tokens, tenants and the audit log (issue 8); created by migration 0005."""

from __future__ import annotations

from scalar.store.schema import metadata

__all__ = ["metadata"]
