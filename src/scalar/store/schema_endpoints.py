"""Tables for serverless endpoints, their durable requests and scaling decisions (issue 7); created by migration 0003."""

from __future__ import annotations

from scalar.store.schema import metadata

__all__ = ["metadata"]
