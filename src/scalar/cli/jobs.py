"""``scalar jobs``: the jobs a running Scalar server knows, with their state and why.

Also holds what ``scalar submit`` shares with it: the ``--server`` option and how server errors print
(``error: <detail>`` and one line per field; exit 2 for a refused request, 1 when the server is down).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.table import Table

from scalar.api.client import DEFAULT_SERVER, SERVER_ENV, ScalarClient, ServerProblem, ServerUnreachable
from scalar.cli.errors import USAGE_ERROR, cli_hints, user_errors
from scalar.cli.output import Col, make_table, print_json, say, show, when, wide_option

T = TypeVar("T")

SERVER_DOWN = 1
JOB_COLUMNS = [
    Col("id", "id"),
    Col("name", "text", floor=8),
    Col("state", "key"),
    Col("tier", "key"),
    Col("gpus", "num"),
    Col("tenant", "key", wide=True),
    Col("submitted", "time", wide=True),
    Col("reason", "text", ratio=3),
]


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
        sys.stderr.write(cli_hints(line) + "\n")
    raise typer.Exit(USAGE_ERROR if 400 <= exc.status < 500 else SERVER_DOWN)


def call_server(server: str, call: Callable[[ScalarClient], T]) -> T:
    with ScalarClient(server) as client:
        try:
            return call(client)
        except (ServerProblem, ServerUnreachable) as exc:
            print_problem_and_exit(exc)


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
        job.get("tenant"),
        when(job.get("submitted_at")),
        one_line_reason(job),
    ]


def jobs_table(rows: list[list[Any]], title: str | None = None, *, wide: bool = False) -> Table:
    """The jobs table: ids whole, NAME and REASON wrap to fit the terminal; ``--wide`` adds columns."""
    return make_table(JOB_COLUMNS, rows, title, wide=wide)


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
        ["restartable", job.get("restartable", False)],
        ["tenant", job.get("tenant")],
        ["command", " ".join(job["command"]) if job.get("command") else "none (a reservation: no process)"],
        ["submitted_at", when(job.get("submitted_at"))],
        ["started_at", when(job.get("started_at"))],
        ["finished_at", when(job.get("finished_at"))],
        ["preemptions", job.get("preemptions")],
        ["placements", placements],
    ]
    return make_table([Col("field", "key"), Col("value", "text")], rows, f"JOB {job.get('id')}")


def placement_lines(job: dict[str, Any]) -> list[str]:
    lines = []
    for placement in job.get("placements") or []:
        gpus = ",".join(str(i) for i in placement.get("gpu_indices") or []) or "-"
        lines.append(f"placed on {placement.get('node_id')} (GPUs {gpus})")
    return lines


def _no_jobs_hint(state: Any, offset: int) -> str:
    """Why the list is empty and what to try."""
    if offset:
        return f"no jobs from --offset {offset} on: there are fewer; try a smaller --offset"
    if state:
        return f"no jobs in state {state}: `scalar jobs` lists every state"
    return "no jobs yet: submit one with `scalar submit --gpus 1` (a command to run goes after --)"


def register(app: typer.Typer) -> None:
    @app.command("jobs")
    @user_errors
    def jobs(
        job_id: str | None = typer.Argument(None, help="Show this one job (its state, reason, placements)."),
        state: str | None = typer.Option(
            None, "--state", help="Only jobs in this state (PENDING, RUNNING, SUCCEEDED, ...)."
        ),
        limit: int = typer.Option(100, "--limit", help="At most this many jobs per page (1-1000)."),
        after: str | None = typer.Option(
            None, "--after", help="Start after this cursor (the `next` a previous page printed)."
        ),
        every: bool = typer.Option(False, "--all", help="Every page: all the jobs (newest first)."),
        offset: int = typer.Option(0, "--offset", help="Skip this many jobs first (prefer --after)."),
        as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer."),
        wide: bool = wide_option(),
        server: str = server_option(),
    ) -> None:
        """List the jobs of a running Scalar server (`scalar up`): state and one-line reason."""
        if job_id is not None:
            job = call_server(server, lambda c: c.get_job(job_id))
            if as_json:
                print_json(job)
                return
            show(job_detail_table(job))
            return
        if every:
            page = call_server(
                server,
                lambda c: c.every_page("/jobs", "jobs", state=state, limit=limit, after=after),
            )
        else:
            page = call_server(
                server, lambda c: c.list_jobs(state=state, limit=limit, offset=offset, after=after)
            )
        if as_json:
            print_json(page)
            return
        rows = [job_row(j) for j in page.get("jobs", [])]
        title = f"JOBS at {server}" + (f" in state {page.get('state')}" if page.get("state") else "")
        if not rows:
            say(_no_jobs_hint(page.get("state"), offset))
            return
        show(jobs_table(rows, title, wide=wide))
        if page.get("next"):
            say(f"showing {len(rows)} jobs, newest first; more with --after {page['next']} (or --all)")
