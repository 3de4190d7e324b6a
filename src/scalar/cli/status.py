"""``scalar status``: is the server up, who leads, how many jobs in each state, GPUs, spend and slices."""

from __future__ import annotations

from typing import Any

import typer

from scalar.cli.cluster_output import fetch, table, usd
from scalar.cli.errors import user_errors
from scalar.cli.jobs import server_option
from scalar.cli.output import print_json, say, show, when


def print_status(server: str, s: dict[str, Any]) -> None:
    health = s.get("health") or {}
    role = health.get("role", "-")
    leader = health.get("lease_holder") or "-"
    say(
        f"Scalar at {server}: {health.get('status', '-')}, this process is the {role} "
        f"(lease held by {leader}, epoch {health.get('epoch', '-')}), last step {when(health.get('last_step_at')) or '-'}"
    )
    jobs = s.get("jobs_by_state") or {}
    show(table(["state", "jobs"], list(jobs.items()), "JOBS", ["TOTAL", s.get("jobs_total", 0)]))
    nodes = s.get("nodes_by_state") or {}
    slices = s.get("slices") or {}
    states = list(dict.fromkeys([*slices, *nodes]))
    rows = [[st, nodes.get(st), slices.get(st)] for st in states]
    show(
        table(
            ["state", "nodes", "slices"],
            rows,
            "NODES AND SLICES",
            ["TOTAL", sum(nodes.values()), sum(slices.values())],
        )
    )
    gpus = s.get("gpus") or {}
    spend = s.get("spend") or {}
    by_provider = spend.get("by_provider") or {}
    show(
        table(
            ["provider", "spend_usd"],
            [[p, usd(v, 4)] for p, v in by_provider.items()],
            "SPEND",
            ["TOTAL", usd(spend.get("accrued"), 4)],
        )
    )
    latency = s.get("step_latency") or {}
    mean = latency.get("mean_s")
    say(
        f"GPUs on READY nodes: {gpus.get('allocated', 0)} of {gpus.get('total', 0)} allocated, "
        f"{gpus.get('idle', 0)} idle ({float(gpus.get('utilization') or 0):.0%} utilization)"
    )
    say(
        f"Contracts: {usd(spend.get('committed'))} committed, {usd(spend.get('open_price_per_hour'))}/h for "
        f"the open ones; {s.get('inbox_pending', 0)} submissions not stepped yet"
    )
    say(
        f"Controller steps: {latency.get('count', 0)}"
        + (
            f", {mean * 1000:.1f} ms mean, {latency.get('max_s', 0) * 1000:.1f} ms max"
            if mean is not None
            else ""
        )
    )


def register(app: typer.Typer) -> None:
    @app.command("status")
    @user_errors
    def status(
        as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer (GET /status)."),
        server: str = server_option(),
    ) -> None:
        """Health, who leads, jobs by state, nodes and slices by state, GPUs in use and spend."""
        answer = fetch(server, "its status", lambda c: c.status())
        if as_json:
            print_json(answer)
            return
        print_status(server, answer)
