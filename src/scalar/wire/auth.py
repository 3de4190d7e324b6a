"""HTTP shapes of API tokens and the audit log (``/tokens``, ``/audit``; docs/security.md). The runtime's
``TokenService`` answers these models; the routes send them as they are, and ``scalar token`` and
``scalar audit`` read the answers back into them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class TokenOut(BaseModel):
    """A token as the API shows it: never the secret, nor its hash."""

    id: str
    tenant: str
    role: str
    name: str | None = None
    created_at: str
    revoked_at: str | None = None
    expires_at: str | None = Field(default=None, description="refused from then on; null: never")


class TokenCreated(TokenOut):
    token: str = Field(description="the token; shown this once only (only its hash is stored)")


class AuditEntryOut(BaseModel):
    id: int
    at: str
    tenant: str
    actor: str
    action: str
    entity_id: str
    data: dict[str, Any] = Field(default_factory=dict)


class TokenListOut(BaseModel):
    tokens: list[TokenOut]


class AuditOut(BaseModel):
    """A page of the audit log in the order written; ``next``/``prev``: the cursors around it."""

    entries: list[AuditEntryOut]
    count: int
    limit: int | None = None
    after: str | None = Field(default=None, description="the cursor this page starts after")
    next: str | None = Field(default=None, description="pass as `after` for the next page; null: the last")
    prev: str | None = Field(default=None, description="pass as `after` for the page before; null: the first")
