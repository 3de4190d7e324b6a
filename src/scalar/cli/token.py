"""``scalar token create|list|revoke`` and ``scalar audit``: API tokens and the audit log (admin).

They call a running server with an admin token: ``--token``, ``$SCALAR_TOKEN``, or the one ``scalar up``
saved in its data dir (``./.scalar/admin.token``). ``create`` prints the new token once; only its hash is
kept, so it cannot be shown again (revoke it and create another if it is lost). See docs/security.md.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from scalar.api.client import TOKEN_ENV, ScalarClient, ServerProblem, ServerUnreachable
from scalar.cli.errors import fail, user_errors
from scalar.cli.jobs import print_problem_and_exit, server_option
from scalar.cli.output import Col, make_table, print_json, say, show, when, wide_option
from scalar.runtime.auth import AuthError, parse_expires_in
from scalar.wire.auth import AuditOut, TokenCreated, TokenListOut, TokenOut

TOKEN_COLUMNS = [
    Col("id", "id"),
    Col("tenant", "key"),
    Col("role", "key"),
    Col("name", "text"),
    Col("created", "time", wide=True),
    Col("expires", "time"),
    Col("revoked", "time"),
]
AUDIT_COLUMNS = [
    Col("id", "num"),
    Col("at", "time"),
    Col("tenant", "key"),
    Col("actor", "key", wide=True),
    Col("action", "key"),
    Col("entity", "id"),
    Col("details", "text", ratio=2),
]


def token_option() -> Any:
    return typer.Option(
        None,
        "--token",
        envvar=TOKEN_ENV,
        help=f"An admin API token (default ${TOKEN_ENV}, else ./.scalar/admin.token for a local server).",
        show_default=False,
    )


def _call(server: str, token: str | None, call: Any) -> Any:
    with ScalarClient(server, token=token) as client:
        try:
            return call(client)
        except (ServerProblem, ServerUnreachable) as exc:
            print_problem_and_exit(exc)


def _details(data: dict[str, Any]) -> str:
    keys = ("provider", "instance_type", "node_count", "why", "role", "for_jobs", "bought_for_jobs")
    parts = []
    for k in keys:
        value = data.get(k)
        if value in (None, [], ""):
            continue
        shown = ",".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value)
        parts.append(f"{k}={shown}")
    return " ".join(parts)


def register(app: typer.Typer) -> None:
    tokens = typer.Typer(help="API tokens (admin): create, list, revoke.", no_args_is_help=True)
    app.add_typer(tokens, name="token")

    @tokens.command("create")
    @user_errors
    def create(
        tenant: str = typer.Option(..., "--tenant", help="The tenant the token acts for (e.g. team-a)."),
        role: str = typer.Option("user", "--role", help="user (its tenant's jobs) or admin (everything)."),
        name: str | None = typer.Option(None, "--name", help="A label to recognize the token by."),
        expires_in: str = typer.Option(
            "90d", "--expires-in", help="Lifetime: 30d, 12h, 45m, 3600s (at most 3650d) or never."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer."),
        server: str = server_option(),
        token: str | None = token_option(),
    ) -> None:
        """Create a token and print it once (it is stored hashed and cannot be shown again)."""
        if role not in ("user", "admin"):
            fail(f"--role: must be user or admin, got {role!r}")
        try:
            parse_expires_in(expires_in)
        except AuthError as exc:
            fail(f"--expires-in: {exc.problem}; {exc.fix}")
        created = _call(server, token, lambda c: c.create_token(tenant, role, name, expires_in))
        if as_json:
            print_json(created)
            return
        made = TokenCreated.model_validate(created)
        sys.stdout.write(f"{made.token}\n")
        expires = made.expires_at or "never"
        sys.stderr.write(
            f"created token {made.id} for tenant {made.tenant} ({made.role}, "
            f"expires {expires}); it is "
            "shown only now: keep it somewhere safe (e.g. export SCALAR_TOKEN=...)\n"
        )

    @tokens.command("list")
    @user_errors
    def list_(
        as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer."),
        wide: bool = wide_option(),
        server: str = server_option(),
        token: str | None = token_option(),
    ) -> None:
        """List the tokens (never the tokens themselves: their ids, tenants and roles)."""
        page = _call(server, token, lambda c: c.list_tokens())
        if as_json:
            print_json(page)
            return
        rows = [
            [
                t.id,
                t.tenant,
                t.role,
                t.name,
                when(t.created_at),
                when(t.expires_at) if t.expires_at else "never",
                when(t.revoked_at),
            ]
            for t in TokenListOut.model_validate(page).tokens
        ]
        if not rows:
            say("no tokens yet: create one with `scalar token create --tenant NAME`")
            return
        show(make_table(TOKEN_COLUMNS, rows, f"TOKENS at {server}", wide=wide))

    @tokens.command("revoke")
    @user_errors
    def revoke(
        token_id: str = typer.Argument(..., help="The token's id (tok_..., from `scalar token list`)."),
        server: str = server_option(),
        token: str | None = token_option(),
    ) -> None:
        """Revoke a token: every request with it is refused from now on."""
        revoked = TokenOut.model_validate(_call(server, token, lambda c: c.revoke_token(token_id)))
        sys.stdout.write(f"revoked {revoked.id} (tenant {revoked.tenant}, {revoked.role})\n")

    @app.command("audit")
    @user_errors
    def audit(
        tenant: str | None = typer.Option(None, "--tenant", help="Only this tenant's rows."),
        action: str | None = typer.Option(None, "--action", help="Only this action (buy, release...)."),
        limit: int = typer.Option(100, "--limit", help="At most this many rows (1-1000)."),
        as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer."),
        wide: bool = wide_option(),
        server: str = server_option(),
        token: str | None = token_option(),
    ) -> None:
        """The audit log (admin): every purchase and release with the tenant it is attributed to."""
        page = _call(server, token, lambda c: c.audit(tenant=tenant, action=action, limit=limit))
        if as_json:
            print_json(page)
            return
        rows = [
            [e.id, when(e.at), e.tenant, e.actor, e.action, e.entity_id, _details(e.data)]
            for e in AuditOut.model_validate(page).entries
        ]
        if not rows:
            filters = " ".join(f"--{k} {v}" for k, v in (("tenant", tenant), ("action", action)) if v)
            say(
                f"no audit entries for {filters}: drop the filter to see every entry"
                if filters
                else "no audit entries yet: purchases and releases are logged as the controller makes them"
            )
            return
        show(make_table(AUDIT_COLUMNS, rows, f"AUDIT at {server}", wide=wide))
