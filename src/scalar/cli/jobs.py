"""``scalar jobs``: the jobs a running Scalar server knows, with their state and why.

Also holds what ``scalar submit`` shares with it: the ``--server`` option and how server errors print
(``error: <detail>`` and one line per field; exit 2 for a refused request, 1 when the server is down).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar

import typer
from rich import box
from rich.table import Table

from scalar.api.client import DEFAULT_SERVER, SERVER_ENV, ScalarClient, ServerProblem, ServerUnreachable
from scalar.cli.errors import USAGE_ERROR, user_errors
from scalar.cli.output import console, make_table, print_json

T = TypeVar("T")

SERVER_DOWN = 1
JOB_COLUMNS = ["id", "name", "state", "tier", "gpus", "reason"]


def server_option() -> Any:
    return typer.Option(
        DEFAULT_SERVER,
        "--server",
        envvar=SERVER_ENV,
        help=f"URL of the Scalar API (default {DEFAULT_SERVER}, or ${SERVER_ENV}).",
        show_default=False,
    )


def print_problem_and_exit(exc: ServerProblem | ServerUnreachable) -> NoReturn:
    """Print a server error for people; exit 2 when the request was refused, 1 when the server failed."""
    if isinstance(exc, ServerUnreachable):
        sys.stderr.write(f"error: {exc}\n")
        raise typer.Exit(SERVER_DOWN)
    for line in exc.problem.lines():
        sys.stderr.write(line + "\n")
    raise typer.Exit(USAGE_ERROR if 400 <= exc.status < 500 else SERVER_DOWN)


def call_server(server: str, call: Callable[[ScalarClient], T]) -> T:
    with ScalarClient(server) as client:
        try:
            return call(client)
        except (ServerProblem, ServerUnreachable) as exc:
            print_problem_and_exit(exc)


def short_time(value: Any) -> str | None:
    """``2025-01-09 12:00:00Z`` (UTC)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def one_line_reason(job: dict[str, Any]) -> str | None:
    """The job's reason without a leading ``job <id>`` (the row already names the job)."""
    reason = job.get("reason")
    if not isinstance(reason, str):
        return None
    return reason.removeprefix(f"job {job.get('id')} ") or None


def job_row(job: dict[str, Any]) -> list[Any]:
    return [
        job.get("id"),
        job.get("name"),
        job.get("state"),
        job.get("tier"),
        job.get("gpu_count"),
        one_line_reason(job),
    ]


def jobs_table(rows: list[list[Any]], title: str | None = None) -> Table:
    """The jobs table; only REASON wraps, so ids and numbers stay whole on narrow terminals."""
    table = make_table(JOB_COLUMNS, rows, title)
    table.box = box.SIMPLE_HEAD
    for column in table.columns[:-1]:
        column.no_wrap = True
    name = table.columns[1]
    name.max_width, name.overflow = 24, "ellipsis"
    table.columns[-1].min_width = 24
    return table


def job_detail_table(job: dict[str, Any]) -> Table:
    """One job, one field per line (all of them; the list shows the main ones)."""
    placements = "; ".join(p.removeprefix("placed on ") for p in placement_lines(job))
    rows: list[list[Any]] = [
        ["id", job.get("id")],
        ["name", job.get("name")],
        ["state", job.get("state")],
        ["reason", job.get("reason")],
        ["tier", job.get("tier")],
        ["gpus", job.get("gpu_count")],
        ["vram_per_gpu_gb", job.get("vram_per_gpu_gb")],
        ["cpu_cores", job.get("cpu_cores")],
        ["ram_gb", job.get("ram_gb")],
        ["expected_duration_sec", job.get("expected_duration_sec")],
        ["priority", job.get("priority")],
        ["gpu_models", job.get("gpu_models")],
        ["share_gpu", job.get("share_gpu")],
        ["submitted_at", short_time(job.get("submitted_at"))],
        ["started_at", short_time(job.get("started_at"))],
        ["finished_at", short_time(job.get("finished_at"))],
        ["preemptions", job.get("preemptions")],
        ["placements", placements],
    ]
    table = make_table(["field", "value"], rows, f"JOB {job.get('id')}")
    table.columns[0].no_wrap = True
    return table


def placement_lines(job: dict[str, Any]) -> list[str]:
    lines = []
    for placement in job.get("placements") or []:
        gpus = ",".join(str(i) for i in placement.get("gpu_indices") or []) or "-"
        lines.append(f"placed on {placement.get('node_id')} (GPUs {gpus})")
    return lines


def register(app: typer.Typer) -> None:
    @app.command("jobs")
    @user_errors
    def jobs(
        job_id: str | None = typer.Argument(None, help="Show this one job (its state, reason, placements)."),
        state: str | None = typer.Option(
            None, "--state", help="Only jobs in this state (PENDING, RUNNING, SUCCEEDED, ...)."
        ),
        limit: int = typer.Option(100, "--limit", help="At most this many jobs (1-1000)."),
        offset: int = typer.Option(0, "--offset", help="Skip this many jobs first."),
        as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer."),
        server: str = server_option(),
    ) -> None:
        """List the jobs of a running Scalar server (`scalar up`): state and one-line reason."""
        out = console()
        if job_id is not None:
            job = call_server(server, lambda c: c.get_job(job_id))
            if as_json:
                print_json(job)
                return
            out.print(job_detail_table(job))
            return
        page = call_server(server, lambda c: c.list_jobs(state=state, limit=limit, offset=offset))
        if as_json:
            print_json(page)
            return
        rows = [job_row(j) for j in page.get("jobs", [])]
        title = f"JOBS at {server}" + (f" in state {page.get('state')}" if page.get("state") else "")
        out.print(jobs_table(rows, title))
        if not rows:
            out.print("no jobs yet: submit one with `scalar submit --gpus 1`", markup=False, highlight=False)
        elif len(rows) == limit:
            out.print(
                f"showing {len(rows)} jobs from {offset}; more with --offset {offset + limit}",
                markup=False,
                highlight=False,
            )
