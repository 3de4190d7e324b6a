"""``scalar submit``'s cost preview and confirmation (POST /jobs/preview, read as its model, ``wire/views.py``'s
``PreviewOut``), and ``--wait``'s progress."""

from __future__ import annotations

import sys
import time
from decimal import Decimal, InvalidOperation
from typing import Any

import typer

from scalar.api.client import ScalarClient, ServerProblem, ServerUnreachable
from scalar.cli.cluster_output import table, usd
from scalar.cli.errors import USAGE_ERROR, fail
from scalar.cli.jobs import one_line_reason, print_problem_and_exit
from scalar.cli.output import console, duration, print_json
from scalar.wire.jobs import JobOut
from scalar.wire.views import PreviewOut

NOT_CONFIRMED = 1
SETTLED = {"RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "REJECTED", "PREEMPTED"}
WAIT_TIMEOUT_S = 600.0
POLL_S = 0.5


def fetch_preview(server: str, fields: dict[str, Any]) -> dict[str, Any] | None:
    """The server's preview, or ``None`` from a server without one (an older server: no route)."""
    with ScalarClient(server) as client:
        try:
            return client.preview_job(fields)
        except ServerProblem as exc:
            if exc.status in (404, 405):  # a server without the route: submit as before, unpreviewed
                return None
            print_problem_and_exit(exc)
        except ServerUnreachable as exc:
            print_problem_and_exit(exc)


def read_preview(p: dict[str, Any]) -> PreviewOut:
    """The server's preview as its model (``wire/views.py``'s ``PreviewOut``)."""
    return PreviewOut.model_validate(p)


def _rows(p: PreviewOut) -> list[list[Any]]:
    buy, node = p.purchase, p.node
    if buy is not None:
        where: str | None = f"{buy.node_count}x {buy.instance_type} on {buy.provider}"
        price: str | None = buy.price_per_gpu_hour
    else:
        where = None if node is None else f"{node.node_id} ({node.provider})"
        price = None if node is None else node.price_per_gpu_hour
    return [
        ["needs_purchase", p.needs_purchase],
        ["runs_on", where],
        ["price_per_gpu_hour", usd(price, 4)],
        ["job_cost", usd(p.job_cost, 4)],
        ["new_commitment", usd(p.new_commitment, 4)],
        ["contract", None if buy is None else duration(buy.contract_s)],
    ]


def show_preview(p: PreviewOut, *, to_stderr: bool = False) -> None:
    out = console()
    if to_stderr:
        out = type(out)(file=sys.stderr, soft_wrap=False, width=out.width)
    preview = table(["cost_preview", "value"], _rows(p), "COST PREVIEW (USD)")
    out.print(preview)
    out.print(p.reason or "", markup=False, highlight=False, soft_wrap=True)


def dry_run(p: dict[str, Any] | None, as_json: bool) -> None:
    if p is None:
        fail("--dry-run needs the server's cost preview (POST /jobs/preview); nothing was submitted")
    if as_json:
        print_json(p)
        return
    show_preview(read_preview(p))
    console().print("dry run: nothing submitted", markup=False, highlight=False)


def commits_money(p: PreviewOut) -> bool:
    """Whether submitting would commit money now: a purchase with a cost. A job no offer fits yet waits
    for capacity and commits nothing, so there is nothing to confirm."""
    if not p.needs_purchase:
        return False
    try:
        return Decimal(p.new_commitment or "0") > 0
    except (InvalidOperation, ValueError):
        return True


def confirm(p: PreviewOut) -> None:
    """Ask before money is committed; no answer (stdin closed) is not a yes."""
    question = f"Submit it and commit {usd(p.new_commitment, 4)} to a purchase?"
    try:
        ok = typer.confirm(question, default=False, err=True)
    except typer.Abort:
        sys.stderr.write("\n")
        fail("not confirmed (no answer on stdin): pass -y to submit without asking; nothing was submitted")
    if not ok:
        sys.stderr.write("not submitted\n")
        raise typer.Exit(NOT_CONFIRMED)


def follow(server: str, job: dict[str, Any], *, quiet: bool) -> dict[str, Any]:
    """Poll the job (``GET /jobs/{id}``, read as ``JobOut``) until it runs or ends, with a spinner showing
    its state and reason; returns the last answer as the API sent it."""
    job_id = JobOut.model_validate(job).id
    out = console()
    if quiet or not out.is_terminal:
        out = type(out)(file=sys.stderr, soft_wrap=True)
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    last = None
    with ScalarClient(server) as client, out.status(f"job {job_id}: {job.get('state')}") as status:
        while True:
            try:
                job = client.get_job(job_id)
            except (ServerProblem, ServerUnreachable) as exc:
                print_problem_and_exit(exc)
            typed = JobOut.model_validate(job)
            line = f"job {job_id}: {typed.state} - {one_line_reason(typed) or ''}"
            if line != last:
                status.update(line)
                out.print(line, markup=False, highlight=False)
                last = line
            if typed.state in SETTLED:
                return job
            if time.monotonic() > deadline:
                sys.stderr.write(f"error: job {job_id} still {typed.state} after {WAIT_TIMEOUT_S:.0f} s\n")
                raise typer.Exit(USAGE_ERROR)
            time.sleep(POLL_S)
