"""``scalar explain JOB``: why the job is where it is, with the numbers (GET /jobs/{id}/explain)."""

from __future__ import annotations

from typing import Any

import typer

from scalar.cli.cluster_output import fetch, table
from scalar.cli.errors import user_errors
from scalar.cli.jobs import server_option
from scalar.cli.output import Col, duration, print_json, say, show, when


def facts(e: dict[str, Any]) -> list[list[Any]]:
    """The answer's numbers, one per row."""
    position = e.get("queue_position")
    queue = f"{position} of {e.get('queue_length')}" if position is not None else None
    placement = e.get("placement") or {}
    routing = e.get("routing") or {}
    purchase = e.get("purchase") or {}
    eta = None
    if purchase:
        if purchase.get("overdue_s") is not None:
            eta = f"overdue by {duration(purchase['overdue_s'])}"
        elif purchase.get("eta_s") is not None and purchase.get("in_flight"):
            eta = f"in {duration(purchase['eta_s'])}"
        elif purchase.get("eta_at"):
            eta = f"ready at {when(purchase['eta_at'])}"
    bought = (
        f"{purchase.get('order_key')} {purchase.get('status')}: {purchase.get('node_count')}x "
        f"{purchase.get('instance_type')} on {purchase.get('provider')}"
        if purchase
        else None
    )
    return [
        ["state", e.get("state")],
        ["reason", e.get("reason")],
        ["queue_position", queue],
        ["waiting", duration(e.get("waiting_s"))],
        ["placement", placement.get("kind")],
        ["nodes_rejected", placement.get("nodes_rejected")],
        ["routed_to", routing.get("group")],
        ["purchase", bought],
        ["limit_price_per_gpu_hour", purchase.get("limit_price_per_gpu_hour")],
        ["capacity_eta", eta],
        ["eta_basis", purchase.get("eta_basis")],
        ["gives_up_at", when(purchase.get("deadline_at"))],
        ["source", e.get("source")],
    ]


def print_explanation(e: dict[str, Any], story: int) -> None:
    say(e.get("summary") or "-")
    show(table([Col("field", "key"), Col("value", "text")], facts(e), f"JOB {e.get('job_id')}"))
    placement = e.get("placement") or {}
    rejections = placement.get("rejections") or []
    if rejections:
        rows = [[r.get("code"), r.get("count"), r.get("example")] for r in rejections]
        show(
            table(
                [Col("reason", "key"), Col("nodes", "num"), Col("example", "text")],
                rows,
                "NODES REJECTED, BY REASON",
                ["TOTAL", placement.get("nodes_rejected"), None],
            )
        )
    say("Why:")
    for line in e.get("lines") or []:
        say(f"  {line}")
    entries = (e.get("story") or [])[-story:] if story > 0 else []
    if entries:
        rows = [
            [
                when(s.get("at")),
                s.get("kind"),
                s.get("from"),
                s.get("to"),
                s.get("code"),
                s.get("message"),
            ]
            for s in entries
        ]
        story_cols = [
            Col("at", "time"),
            Col("kind", "key"),
            Col("from", "key"),
            Col("to", "key"),
            Col("code", "key", wide=True),
            Col("message", "text", ratio=2),
        ]
        show(table(story_cols, rows, f"STORY (last {len(entries)})"))
    for note in e.get("notes") or []:
        say(f"note: {note}")


def register(app: typer.Typer) -> None:
    @app.command("explain")
    @user_errors
    def explain(
        job_id: str = typer.Argument(..., help="The job's id (scalar jobs lists them)."),
        story: int = typer.Option(10, "--story", help="Show the last N decisions about the job (0: none)."),
        as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer."),
        server: str = server_option(),
    ) -> None:
        """Why JOB is where it is: its queue position, the nodes rejected (counted by reason), its routing,
        the purchase made for it and when its capacity is expected."""
        answer = fetch(server, f"job {job_id}", lambda c: c.explain(job_id))
        if as_json:
            print_json(answer)
            return
        print_explanation(answer, story)
