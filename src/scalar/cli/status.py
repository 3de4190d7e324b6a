"""``scalar status``: is the server up, who leads, how many jobs in each state, GPUs, spend and slices (read
as ``GET /status``'s model, ``wire/views.py``'s ``StatusOut``)."""

from __future__ import annotations

import typer

from scalar.cli.cluster_output import fetch, table, usd
from scalar.cli.errors import user_errors
from scalar.cli.jobs import server_option
from scalar.cli.output import print_json, say, show, when
from scalar.wire.views import StatusOut


def print_status(server: str, s: StatusOut) -> None:
    health = s.health
    role = health.get("role", "-")
    leader = health.get("lease_holder") or "-"
    say(
        f"Scalar at {server}: {health.get('status', '-')}, this process is the {role} "
        f"(lease held by {leader}, epoch {health.get('epoch', '-')}), last step {when(health.get('last_step_at')) or '-'}"
    )
    jobs = s.jobs_by_state
    show(table(["state", "jobs"], list(jobs.items()), "JOBS", ["TOTAL", s.jobs_total]))
    nodes = s.nodes_by_state
    slices = s.slices.model_dump()
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
    gpus = s.gpus
    spend = s.spend
    show(
        table(
            ["provider", "spend_usd"],
            [[p, usd(v, 4)] for p, v in spend.by_provider.items()],
            "SPEND",
            ["TOTAL", usd(spend.accrued, 4)],
        )
    )
    latency = s.step_latency
    mean = latency.mean_s
    say(
        f"GPUs on READY nodes: {gpus.allocated} of {gpus.total} allocated, "
        f"{gpus.idle} idle ({gpus.utilization:.0%} utilization)"
    )
    say(
        f"Contracts: {usd(spend.committed)} committed, {usd(spend.open_price_per_hour)}/h for "
        f"the open ones; {s.inbox_pending} submissions not stepped yet"
    )
    say(
        f"Controller steps: {latency.count}"
        + (
            f", {mean * 1000:.1f} ms mean, {(latency.max_s or 0) * 1000:.1f} ms max"
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
        print_status(server, StatusOut.model_validate(answer))
