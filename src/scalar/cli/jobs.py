"""``scalar jobs``: the jobs a running Scalar server knows, with their state and why (read as ``GET /jobs``'s
models, ``wire/jobs.py``'s ``JobListOut`` and ``JobOut``).

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
from scalar.wire.jobs import JobListOut, JobOut

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


def one_line_reason(job: JobOut) -> str | None:
    """The job's reason without a leading ``job <id>`` (the row already names the job)."""
    if job.reason is None:
        return None
    return job.reason.removeprefix(f"job {job.id} ") or None


def job_row(job: JobOut) -> list[Any]:
    return [
        job.id,
        job.name,
        job.state,
        job.tier,
        job.gpu_count,
        job.tenant,
        when(job.submitted_at),
        one_line_reason(job),
    ]


def jobs_table(rows: list[list[Any]], title: str | None = None, *, wide: bool = False) -> Table:
    """The jobs table: ids whole, NAME and REASON wrap to fit the terminal; ``--wide`` adds columns."""
    return make_table(JOB_COLUMNS, rows, title, wide=wide)


def job_detail_table(job: JobOut) -> Table:
    """One job, one field per line (all of them; the list shows the main ones)."""
    placements = "; ".join(p.removeprefix("placed on ") for p in placement_lines(job))
    rows: list[list[Any]] = [
        ["id", job.id],
        ["name", job.name],
        ["state", job.state],
        ["reason", job.reason],
        ["tier", job.tier],
        ["gpus", job.gpu_count],
        ["vram_per_gpu_gb", job.vram_per_gpu_gb],
        ["cpu_cores", job.cpu_cores],
        ["ram_gb", job.ram_gb],
        ["expected_duration_sec", job.expected_duration_sec],
        ["priority", job.priority],
        ["gpu_models", job.gpu_models],
        ["share_gpu", job.share_gpu],
        ["restartable", job.restartable],
        ["tenant", job.tenant],
        ["command", " ".join(job.command) if job.command else "none (a reservation: no process)"],
        ["submitted_at", when(job.submitted_at)],
        ["started_at", when(job.started_at)],
        ["finished_at", when(job.finished_at)],
        ["preemptions", job.preemptions],
        ["placements", placements],
    ]
    return make_table([Col("field", "key"), Col("value", "text")], rows, f"JOB {job.id}")


def placement_lines(job: JobOut) -> list[str]:
    lines = []
    for placement in job.placements:
        gpus = ",".join(str(i) for i in placement.gpu_indices) or "-"
        lines.append(f"placed on {placement.node_id} (GPUs {gpus})")
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
            show(job_detail_table(JobOut.model_validate(job)))
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
        listed = JobListOut.model_validate(page)
        rows = [job_row(j) for j in listed.jobs]
        title = f"JOBS at {server}" + (f" in state {listed.state}" if listed.state else "")
        if not rows:
            say(_no_jobs_hint(listed.state, offset))
            return
        show(jobs_table(rows, title, wide=wide))
        if listed.next:
            say(f"showing {len(rows)} jobs, newest first; more with --after {listed.next} (or --all)")
