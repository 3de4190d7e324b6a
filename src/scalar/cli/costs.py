"""``scalar costs``: spend by provider and over time, $ per delivered GPU-hour, what idle GPUs cost (read as
``GET /costs``'s model, ``wire/views.py``'s ``CostsOut``)."""

from __future__ import annotations

from decimal import Decimal

import typer

from scalar.cli.cluster_output import fetch, hours, table, usd
from scalar.cli.errors import fail, user_errors
from scalar.cli.jobs import server_option
from scalar.cli.output import Col, print_json, say, show, when, wide_option
from scalar.wire.views import CostsOut

BAR_WIDTH = 30


def bar(value: Decimal, most: Decimal) -> str:
    return "#" * (round(BAR_WIDTH * value / most) if most > 0 else 0)


def print_costs(c: CostsOut, wide: bool = False) -> None:
    rows = [
        [
            p.provider,
            p.blocks,
            usd(p.accrued, 4),
            usd(p.committed),
            hours(p.paid_gpu_hours),
            hours(p.delivered_gpu_hours),
            hours(p.idle_gpu_hours),
            usd(p.idle_cost, 4),
            hours(p.sold_back_gpu_hours),
            usd(p.sold_back_revenue, 4),
            usd(p.cost_per_delivered_gpu_hour, 4),
        ]
        for p in c.by_provider
    ]
    total = [
        "TOTAL",
        sum(p.blocks for p in c.by_provider),
        usd(c.accrued, 4),
        usd(c.committed),
        hours(c.paid_gpu_hours),
        hours(c.delivered_gpu_hours),
        hours(c.idle_gpu_hours),
        usd(c.idle_cost, 4),
        hours(c.sold_back_gpu_hours),
        usd(c.sold_back_revenue, 4),
        usd(c.cost_per_delivered_gpu_hour, 4),
    ]
    headers = [
        Col("provider", "key"),
        Col("blocks", "num"),
        Col("spend", "num"),
        Col("committed", "num", wide=True),
        Col("paid_gpu_h", "num", wide=True),
        Col("delivered_gpu_h", "num"),
        Col("idle_gpu_h", "num", wide=True),
        Col("idle_cost", "num"),
        Col("resold_gpu_h", "num", wide=True),
        Col("resold_usd", "num", wide=True),
        Col("per_delivered_gpu_h", "num"),
    ]
    show(table(headers, rows, "COSTS BY PROVIDER (USD)", total, wide=wide))
    tenants = c.by_tenant
    if tenants:
        # Each tenant's GPU-hours and cost, and (idle): paid for, held by no job (an admin sees all rows).
        trows = [[t.tenant, hours(t.gpu_hours), usd(t.cost, 4)] for t in tenants]
        tenant_cols = [Col("tenant", "key"), Col("gpu_h", "num"), Col("cost", "num")]
        show(table(tenant_cols, trows, "COSTS BY TENANT (USD)"))
    series = c.series
    if series:
        spends = [Decimal(p.spend or 0) for p in series]
        most = max(spends)
        srows = [
            [
                when(p.at),
                usd(p.spend, 4),
                usd(p.spend_in_interval, 4),
                bar(s, most),
            ]
            for p, s in zip(series, spends, strict=True)
        ]
        series_cols = [
            Col("at", "time"),
            Col("spend", "num"),
            Col("in_interval", "num"),
            Col("cumulative", "key"),
        ]
        show(table(series_cols, srows, "SPEND OVER TIME"))
    else:
        say("no contracts bought yet: nothing spent")


def register(app: typer.Typer) -> None:
    @app.command("costs")
    @user_errors
    def costs(
        points: int = typer.Option(12, "--points", help="Points in the spend-over-time series (2-500)."),
        as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer."),
        wide: bool = wide_option(),
        server: str = server_option(),
    ) -> None:
        """Spend by provider and over time, $ per delivered GPU-hour and what idle GPUs cost."""
        if not 2 <= points <= 500:
            fail(f"--points: must be from 2 to 500, got {points}")
        answer = fetch(server, "its costs", lambda c: c.costs(points))
        if as_json:
            print_json(answer)
            return
        print_costs(CostsOut.model_validate(answer), wide)
