"""``scalar providers``: each real provider's state as the running server collects its prices."""

from __future__ import annotations

import typer

from scalar.cli.errors import user_errors
from scalar.cli.jobs import server_option
from scalar.cli.output import Col, make_table, print_json, show, when, wide_option
from scalar.cli.prices import age_text, call_prices
from scalar.wire.providers import ProvidersOut

COLUMNS = [
    Col("provider", "key"),
    Col("state", "key"),
    Col("sells", "key"),
    Col("last_success", "time", wide=True),
    Col("age", "key"),
    Col("offers", "num"),
    Col("flagged", "num", wide=True),
    Col("last_error", "text", ratio=3),
]


def register(app: typer.Typer) -> None:
    @app.command("providers")
    @user_errors
    def providers(
        server: str = server_option(),
        as_json: bool = typer.Option(False, "--json", help="Print the GET /providers response as JSON."),
        wide: bool = wide_option(),
    ) -> None:
        """Each real provider (SFCompute, Prime Intellect, RunPod, AWS, Azure, GCP): ok, stale (last good
        prices kept after a failed fetch), error, disabled (and how to enable it) or pending. SELLS says who
        the controller buys from under that name: live (this real client), builtin (the built-in market; the
        real provider gives prices only) or none."""
        body = call_prices(server, lambda client: client.providers())
        if as_json:
            print_json(body)
            return
        rows = []
        for p in ProvidersOut.model_validate(body).providers:
            rows.append(
                [
                    p.name,
                    p.state,
                    p.sells,
                    when(p.last_success_at),
                    age_text(p.age_s),
                    p.offer_count if p.enabled else None,
                    p.anomaly_count if p.enabled else None,
                    p.disabled_reason if p.state == "disabled" else p.last_error,
                ]
            )
        show(make_table(COLUMNS, rows, title="Real providers (live prices)", wide=wide))
