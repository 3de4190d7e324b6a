"""``/whoami``, ``/tokens`` and ``/audit``: who the caller is, API tokens and the audit log (admin).

Each route declares who may call it (``scalar.api.access``); the middleware in ``scalar.api.auth`` checks
tokens, tenants and limits in front of them. See docs/security.md.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from scalar.api import paging
from scalar.api.access import ADMIN, USER
from scalar.api.auth import AuthPort, current_principal, require_admin
from scalar.api.problems import ApiProblem, ProblemRoute
from scalar.runtime.auth import EXPIRES_IN_PATTERN, AuthError
from scalar.wire.auth import AuditEntryOut, AuditOut, TokenCreated, TokenListOut, TokenOut
from scalar.wire.jobs import FieldProblem, ProblemDetails

_PROBLEM = {"model": ProblemDetails, "content": {"application/problem+json": {}}}
_AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {**_PROBLEM, "description": "no valid API token"},
    403: {**_PROBLEM, "description": "an admin token is needed"},
    422: {**_PROBLEM, "description": "a bad field"},
}


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    role: str = Field(default="user", pattern=r"^(user|admin)$")
    name: str | None = Field(default=None, min_length=1, max_length=200)
    expires_in: str | None = Field(
        default=None,
        max_length=12,
        pattern=EXPIRES_IN_PATTERN,
        description="the token's lifetime: 30d, 12h, 45m, 3600s (at most 3650d) or never; default 90d",
    )


class WhoAmI(BaseModel):
    token_id: str
    tenant: str
    role: str
    auth_required: bool


def auth_router(port: AuthPort | None, auth_required: bool) -> APIRouter:
    router = APIRouter(route_class=ProblemRoute, tags=["auth"])

    @router.get(
        "/whoami",
        response_model=WhoAmI,
        responses={401: _AUTH_RESPONSES[401]},
        summary="Who am I",
        dependencies=[USER],
    )
    def whoami() -> Any:
        principal = current_principal()
        return WhoAmI(
            token_id=principal.token_id,
            tenant=principal.tenant,
            role=principal.role,
            auth_required=auth_required,
        )

    if port is None:
        return router

    @router.post(
        "/tokens",
        status_code=201,
        response_model=TokenCreated,
        responses=_AUTH_RESPONSES,
        summary="Create an API token (admin); the token is shown once",
        dependencies=[ADMIN],
    )
    def create_token(body: TokenCreate) -> Any:
        actor = require_admin().token_id
        try:
            return port.create_token(
                body.tenant, body.role, body.name, actor=actor, expires_in=body.expires_in
            )
        except AuthError as exc:
            raise ApiProblem(
                422,
                "invalid-request",
                str(exc),
                [FieldProblem(field=exc.field, problem=exc.problem, fix=exc.fix)],
            ) from None

    @router.get(
        "/tokens",
        response_model=TokenListOut,
        responses=_AUTH_RESPONSES,
        summary="List API tokens (admin)",
        dependencies=[ADMIN],
    )
    def list_tokens() -> Any:
        require_admin()
        return TokenListOut(tokens=port.list_tokens())

    @router.delete(
        "/tokens/{token_id}",
        response_model=TokenOut,
        responses={**_AUTH_RESPONSES, 404: {**_PROBLEM, "description": "no such token"}},
        summary="Revoke an API token (admin); it is refused from the next request on",
        dependencies=[ADMIN],
    )
    def revoke_token(token_id: str = Path(min_length=1, max_length=32)) -> Any:
        actor = require_admin().token_id
        try:
            return port.revoke_token(token_id, actor=actor)
        except KeyError:
            raise ApiProblem(
                404,
                "not-found",
                f"no token with id {token_id!r}",
                [FieldProblem(field="token_id", problem="is not a token's id", fix="GET /tokens lists them")],
            ) from None

    @router.get(
        "/audit",
        response_model=AuditOut,
        responses=_AUTH_RESPONSES,
        summary="The audit log (admin): every purchase, release and token change, with its tenant",
        dependencies=[ADMIN],
    )
    def audit(
        tenant: str | None = Query(None, min_length=1, max_length=64, description="only this tenant's rows"),
        action: str | None = Query(None, min_length=1, max_length=64, description="e.g. buy, release"),
        after_id: int = Query(0, ge=0, le=2**62, description="rows after this id (prefer `after`)"),
        limit: int = Query(100, ge=1, le=1000, description="at most this many rows (1 to 1000)"),
        after: str | None = Query(
            None, max_length=paging.MAX_CURSOR_LENGTH, description="a page's `next` or `prev` cursor"
        ),
    ) -> Any:
        require_admin()
        listing = paging.fingerprint("audit", tenant=tenant, action=action, after_id=after_id)
        cursor = paging.decode(after, listing)

        def fetch(key: Any, reverse: bool, n: int) -> list[AuditEntryOut]:
            if reverse:
                return port.audit(tenant, action, after_id, n, int(key))
            return port.audit(tenant, action, after_id if key is None else int(key), n)

        found = paging.page(fetch, lambda row: row.id, limit, cursor, listing)
        return AuditOut(
            entries=found.items,
            count=len(found.items),
            limit=limit,
            after=after or None,
            next=found.next,
            prev=found.prev,
        )

    return router
