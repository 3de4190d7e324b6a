"""``scalar costs``: spend by provider and over time, $ per delivered GPU-hour, what idle GPUs cost."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import typer

from scalar.cli.cluster_output import fetch, hours, table, usd
from scalar.cli.errors import fail, user_errors
from scalar.cli.jobs import server_option
from scalar.cli.output import Col, print_json, say, show, when, wide_option

BAR_WIDTH = 30


def bar(value: Decimal, most: Decimal) -> str:
    return "#" * (round(BAR_WIDTH * value / most) if most > 0 else 0)


def print_costs(c: dict[str, Any], wide: bool = False) -> None:
    rows = [
        [
            p.get("provider"),
            p.get("blocks"),
            usd(p.get("accrued"), 4),
            usd(p.get("committed")),
            hours(p.get("paid_gpu_hours")),
            hours(p.get("delivered_gpu_hours")),
            hours(p.get("idle_gpu_hours")),
            usd(p.get("idle_cost"), 4),
            hours(p.get("sold_back_gpu_hours")),
            usd(p.get("sold_back_revenue"), 4),
            usd(p.get("cost_per_delivered_gpu_hour"), 4),
        ]
        for p in c.get("by_provider") or []
    ]
    total = [
        "TOTAL",
        sum(p.get("blocks") or 0 for p in c.get("by_provider") or []),
        usd(c.get("accrued"), 4),
        usd(c.get("committed")),
        hours(c.get("paid_gpu_hours")),
        hours(c.get("delivered_gpu_hours")),
        hours(c.get("idle_gpu_hours")),
        usd(c.get("idle_cost"), 4),
        hours(c.get("sold_back_gpu_hours")),
        usd(c.get("sold_back_revenue"), 4),
        usd(c.get("cost_per_delivered_gpu_hour"), 4),
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
    tenants = c.get("by_tenant") or []
    if tenants:
        # Each tenant's GPU-hours and cost, and (idle): paid for, held by no job (an admin sees all rows).
        trows = [[t.get("tenant"), hours(t.get("gpu_hours")), usd(t.get("cost"), 4)] for t in tenants]
        tenant_cols = [Col("tenant", "key"), Col("gpu_h", "num"), Col("cost", "num")]
        show(table(tenant_cols, trows, "COSTS BY TENANT (USD)"))
    series = c.get("series") or []
    if series:
        spends = [Decimal(p.get("spend") or 0) for p in series]
        most = max(spends)
        srows = [
            [
                when(p.get("at")),
                usd(p.get("spend"), 4),
                usd(p.get("spend_in_interval"), 4),
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
        print_costs(answer, wide)
