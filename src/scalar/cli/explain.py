"""``scalar explain JOB``: why the job is where it is, with the numbers (GET /jobs/{id}/explain, read as its
model, ``wire/views.py``'s ``ExplanationOut``)."""

from __future__ import annotations

from typing import Any

import typer

from scalar.cli.cluster_output import fetch, table
from scalar.cli.errors import user_errors
from scalar.cli.jobs import server_option
from scalar.cli.output import Col, duration, print_json, say, show, when
from scalar.wire.views import ExplanationOut


def facts(e: ExplanationOut) -> list[list[Any]]:
    """The answer's numbers, one per row."""
    position = e.queue_position
    queue = f"{position} of {e.queue_length}" if position is not None else None
    placement, routing, purchase = e.placement, e.routing, e.purchase
    eta = None
    bought = None
    if purchase is not None:
        if purchase.overdue_s is not None:
            eta = f"overdue by {duration(purchase.overdue_s)}"
        elif purchase.eta_s is not None and purchase.in_flight:
            eta = f"in {duration(purchase.eta_s)}"
        elif purchase.eta_at:
            eta = f"ready at {when(purchase.eta_at)}"
        bought = (
            f"{purchase.order_key} {purchase.status}: {purchase.node_count}x "
            f"{purchase.instance_type} on {purchase.provider}"
        )
    return [
        ["state", e.state],
        ["reason", e.reason],
        ["queue_position", queue],
        ["waiting", duration(e.waiting_s)],
        ["placement", None if placement is None else placement.kind],
        ["nodes_rejected", None if placement is None else placement.nodes_rejected],
        ["routed_to", None if routing is None else routing.group],
        ["purchase", bought],
        ["limit_price_per_gpu_hour", None if purchase is None else purchase.limit_price_per_gpu_hour],
        ["capacity_eta", eta],
        ["eta_basis", None if purchase is None else purchase.eta_basis],
        ["gives_up_at", when(None if purchase is None else purchase.deadline_at)],
        ["source", e.source],
    ]


def print_explanation(e: ExplanationOut, story: int) -> None:
    say(e.summary or "-")
    show(table([Col("field", "key"), Col("value", "text")], facts(e), f"JOB {e.job_id}"))
    placement = e.placement
    if placement is not None and placement.rejections:
        rows = [[r.code, r.count, r.example] for r in placement.rejections]
        show(
            table(
                [Col("reason", "key"), Col("nodes", "num"), Col("example", "text")],
                rows,
                "NODES REJECTED, BY REASON",
                ["TOTAL", placement.nodes_rejected, None],
            )
        )
    say("Why:")
    for line in e.lines:
        say(f"  {line}")
    entries = e.story[-story:] if story > 0 else []
    if entries:
        rows = [[when(s.at), s.kind, s.from_, s.to, s.code, s.message] for s in entries]
        story_cols = [
            Col("at", "time"),
            Col("kind", "key"),
            Col("from", "key"),
            Col("to", "key"),
            Col("code", "key", wide=True),
            Col("message", "text", ratio=2),
        ]
        show(table(story_cols, rows, f"STORY (last {len(entries)})"))
    for note in e.notes:
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
        print_explanation(ExplanationOut.model_validate(answer), story)
