"""``scalar cancel JOB...``: ask the server to cancel jobs (DELETE /jobs/{id}), each one on its own.

Every id is tried even when one fails; the command then exits non-zero and says which ids failed and why
(2 when the server refused one, e.g. an unknown or finished job; 1 when the server failed or is down).
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from scalar.api.client import ScalarClient, ServerProblem, ServerUnreachable
from scalar.cli.errors import USAGE_ERROR, cli_hints, user_errors
from scalar.cli.jobs import SERVER_DOWN, print_problem_and_exit, server_option
from scalar.cli.output import print_json, say
from scalar.wire.jobs import JobOut


def _failure(job_id: str, exc: ServerProblem) -> dict[str, Any]:
    problem = exc.problem
    return {
        "id": job_id,
        "status": exc.status,
        "detail": problem.detail,
        "errors": [e.model_dump() for e in problem.errors],
    }


def _cancel_all(server: str, job_ids: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The jobs whose cancellation was accepted and the ids refused (with the server's problem)."""
    accepted: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    with ScalarClient(server) as client:
        for job_id in job_ids:
            try:
                accepted.append(client.cancel_job(job_id))
            except ServerProblem as exc:
                failed.append(_failure(job_id, exc))
            except ServerUnreachable as exc:
                print_problem_and_exit(exc)  # nothing else can succeed
    return accepted, failed


def _accepted_line(answer: dict[str, Any]) -> str:
    """One accepted cancellation (``DELETE /jobs/{id}``'s job, read as ``JobOut``) for people."""
    job = JobOut.model_validate(answer)
    if job.state == "CANCELLED":
        return f"cancelled {job.id}"
    return f"cancelling {job.id}: {job.state} until the controller stops it, then CANCELLED"


def register(app: typer.Typer) -> None:
    @app.command("cancel")
    @user_errors
    def cancel(
        job_ids: list[str] = typer.Argument(
            ..., metavar="JOB...", help="The ids of the jobs to cancel (`scalar jobs` lists them)."
        ),
        as_json: bool = typer.Option(
            False, "--json", help='Print {"cancelled": [jobs], "failed": [{"id", "status", "detail", ...}]}.'
        ),
        server: str = server_option(),
    ) -> None:
        """Cancel jobs: each one stops (its node's GPUs are freed) and shows CANCELLED. Exits non-zero if
        any id could not be cancelled, naming each and why; the others are still cancelled."""
        ids = list(dict.fromkeys(job_ids))
        accepted, failed = _cancel_all(server, ids)
        if as_json:
            print_json({"cancelled": accepted, "failed": failed})
        else:
            for job in accepted:
                say(_accepted_line(job))
        for f in failed:
            sys.stderr.write(f"error: {f['id']}: {cli_hints(f['detail'])}\n")
            for e in f["errors"]:
                if e.get("fix"):
                    sys.stderr.write(f"  fix: {cli_hints(e['fix'])}\n")
        if failed:
            names = ", ".join(f["id"] for f in failed)
            sys.stderr.write(f"error: {len(failed)} of {len(ids)} not cancelled: {names}\n")
            server_failed = any(f["status"] >= 500 for f in failed)
            raise typer.Exit(SERVER_DOWN if server_failed else USAGE_ERROR)
