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

FOLLOW_INTERVAL_S = 1.0


def _reader(job_id: str, params: dict[str, int]) -> Callable[[ScalarClient], dict[str, Any]]:
    def read(client: ScalarClient) -> dict[str, Any]:
        return dict(client._call("GET", f"/jobs/{job_id}/logs", params=params))

    return read


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
        while True:
            params: dict[str, int] = {"offset": offset}
            if current is not None:
                params["attempt"] = current
            page: dict[str, Any] = call_server(server, _reader(job_id, params))
            if current is None and page.get("attempt") is not None and offset == 0:
                current = int(page["attempt"])
            elif page.get("attempt") is not None and current is not None and page["attempt"] != current:
                offset, current = 0, int(page["attempt"])
                continue
            data = str(page.get("data") or "")
            if data:
                sys.stdout.write(data)
                sys.stdout.flush()
            offset = int(page.get("next_offset") or offset)
            if not follow or (page.get("finished") and not data):
                return
            if not data:
                time.sleep(FOLLOW_INTERVAL_S)
