"""``scalar logs JOB [-f]``: a job's output, read from the controller (it outlives the node)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import typer

from scalar.api.client import ScalarClient
from scalar.cli.errors import user_errors
from scalar.cli.jobs import call_server, server_option
from scalar.wire.agent import JobLogsOut
from scalar.wire.jobs import JobOut

FOLLOW_INTERVAL_S = 1.0


def _reader(job_id: str, params: dict[str, int]) -> Callable[[ScalarClient], JobLogsOut]:
    def read(client: ScalarClient) -> JobLogsOut:
        return JobLogsOut.model_validate(client._call("GET", f"/jobs/{job_id}/logs", params=params))

    return read


def why_empty(answer: dict[str, Any], follow: bool) -> str | None:
    """Why a job (``GET /jobs/{id}``'s, read as ``JobOut``) has no output to show (``None``: it may still
    come, keep following)."""
    job = JobOut.model_validate(answer)
    job_id, state = job.id, job.state
    if not job.command:
        return (
            f"job {job_id} has no output: it has no command (a reservation of GPUs, no process runs); "
            f"give one after --: `scalar submit --gpus 1 -- python train.py`"
        )
    if state in ("PENDING", "SCHEDULED"):
        if follow:
            return None
        return f"job {job_id} is {state}: no output yet; `scalar logs -f {job_id}` waits for it"
    if state == "RUNNING":
        return None if follow else f"job {job_id} is RUNNING and has written nothing yet; -f follows it"
    return f"job {job_id} ({state}) wrote no output"


def register(app: typer.Typer) -> None:
    @app.command("logs")
    @user_errors
    def logs(
        job_id: str = typer.Argument(..., help="The job's id (from `scalar submit` or `scalar jobs`)."),
        follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends."),
        attempt: int | None = typer.Option(None, "--attempt", help="Which attempt (default: the latest)."),
        server: str = server_option(),
    ) -> None:
        """Print a job's output (stdout and stderr of its command)."""
        offset = 0
        current = attempt
        said = False
        while True:
            params: dict[str, int] = {"offset": offset}
            if current is not None:
                params["attempt"] = current
            page: JobLogsOut = call_server(server, _reader(job_id, params))
            if current is None and page.attempt is not None and offset == 0:
                current = page.attempt
            elif page.attempt is not None and current is not None and page.attempt != current:
                offset, current = 0, page.attempt
                continue
            data = page.data
            if not data and offset == 0 and not said:
                said = True
                reason = why_empty(call_server(server, lambda c: c.get_job(job_id)), follow)
                if reason is not None:
                    sys.stderr.write(f"{reason}\n")
                    return
            if data:
                sys.stdout.write(data)
                sys.stdout.flush()
            offset = page.next_offset or offset
            if not follow or (page.finished and not data):
                return
            if not data:
                time.sleep(FOLLOW_INTERVAL_S)
