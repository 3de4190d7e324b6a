"""``scalar submit``: send a job to a running Scalar server, from flags or a JOB.json file.

The job is checked here first (same schema as ``POST /jobs``), so a typo is named with its flag or its
file field before anything is sent; the server then checks it against the market and may refuse it with
reasons. Either way the command prints ``error: ...`` and exits 2.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from scalar.cli.errors import USAGE_ERROR, fail, user_errors
from scalar.cli.inputs import read_json
from scalar.cli.jobs import call_server, placement_lines, server_option
from scalar.cli.output import console, print_json
from scalar.wire.jobs import FieldProblem, JobSubmission, submission_problems

FLAGS: dict[str, str] = {
    "gpu_count": "--gpus",
    "vram_per_gpu_gb": "--vram-gb",
    "cpu_cores": "--cpu",
    "ram_gb": "--ram-gb",
    "expected_duration_sec": "--duration",
    "tier": "--tier",
    "priority": "--priority",
    "name": "--name",
    "gpu_models": "--gpu-model",
    "share_gpu": "--share-gpu",
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE)
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}


def parse_duration(text: str) -> float:
    """``90`` or ``90s`` seconds, ``30m``, ``1.5h``, ``2d`` -> seconds; ``ValueError`` otherwise."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"must be seconds or a number with a unit (90s, 30m, 1.5h, 2d), got {text!r}")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2).lower()]
    if not math.isfinite(seconds):
        raise ValueError(f"is too large, got {text!r}")
    return seconds


def _whole(seconds: float) -> float | int:
    return int(seconds) if seconds.is_integer() else seconds


def _print_problems(summary: str, problems: list[FieldProblem], where: dict[str, str]) -> None:
    sys.stderr.write(f"error: {summary}\n")
    for p in problems:
        base = p.field.split("[", 1)[0].split(".", 1)[0]
        label = where.get(base, p.field)
        sys.stderr.write(f"  {label}: {p.problem}\n    fix: {p.fix}\n")


def _check_locally(body: dict[str, Any], from_flags: set[str], file: Path | None) -> JobSubmission:
    try:
        return JobSubmission.model_validate(body)
    except ValidationError as exc:
        problems = submission_problems(exc)
        where: dict[str, str] = {}
        for p in problems:
            base = p.field.split("[", 1)[0].split(".", 1)[0]
            if file is not None and base not in from_flags:
                where[base] = f"{file}: field '{p.field}'"
            elif base in FLAGS:
                where[base] = f"{FLAGS[base]} ({p.field})"
        count = len(problems)
        _print_problems(f"the job is invalid ({count} problem{'s' if count != 1 else ''})", problems, where)
        raise typer.Exit(USAGE_ERROR) from None


def register(app: typer.Typer) -> None:
    @app.command("submit")
    @user_errors
    def submit(
        gpus: int | None = typer.Option(None, "--gpus", help="GPUs the job needs (0: CPU only)."),
        vram_gb: float | None = typer.Option(None, "--vram-gb", help="GB of VRAM per GPU (default 0)."),
        cpu: float | None = typer.Option(None, "--cpu", help="CPU cores (per node for a gang; default 0)."),
        ram_gb: float | None = typer.Option(
            None, "--ram-gb", help="GB of RAM (per node for a gang; default 0)."
        ),
        duration: str | None = typer.Option(
            None, "--duration", help="Expected run time: seconds, or 90s, 30m, 1.5h, 2d (default 1h)."
        ),
        tier: str | None = typer.Option(
            None, "--tier", help="FAST (buy capacity now) or FLEX (wait for cheap capacity); default FAST."
        ),
        priority: int | None = typer.Option(None, "--priority", help="Higher runs first (default 0)."),
        name: str | None = typer.Option(None, "--name", help="A label for the job."),
        gpu_model: list[str] | None = typer.Option(
            None, "--gpu-model", help="Accept only this GPU model (repeat for several, e.g. H100, H200)."
        ),
        share_gpu: bool | None = typer.Option(
            None, "--share-gpu/--no-share-gpu", help="May share a GPU with other jobs (default no)."
        ),
        file: Path | None = typer.Option(
            None, "--file", help="JOB.json: the POST /jobs body (see docs/api.md); flags override its fields."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the accepted job as JSON."),
        server: str = server_option(),
    ) -> None:
        """Submit a job to a running Scalar server (`scalar up`) and print its id and state."""
        from_file: dict[str, Any] = {}
        if file is not None:
            data = read_json(file)
            if not isinstance(data, dict):
                fail(f"{file}: must hold a JSON object with the job's fields (see docs/api.md)")
            from_file = data
        elif gpus is None:
            fail(
                "give the job's GPUs with --gpus N (and --vram-gb, --duration, --tier ...), or --file JOB.json"
            )
        body: dict[str, Any] = dict(from_file)
        flags: dict[str, Any] = {
            "gpu_count": gpus,
            "vram_per_gpu_gb": vram_gb,
            "cpu_cores": cpu,
            "ram_gb": ram_gb,
            "tier": tier,
            "priority": priority,
            "name": name,
            "gpu_models": gpu_model or None,
            "share_gpu": share_gpu,
        }
        if duration is not None:
            try:
                flags["expected_duration_sec"] = _whole(parse_duration(duration))
            except ValueError as exc:
                fail(f"--duration: {exc}")
        given = {k: v for k, v in flags.items() if v is not None}
        body.update(given)
        if file is None:
            body.setdefault("tier", "FAST")
        job = _check_locally(body, set(given), file)

        accepted = call_server(server, lambda c: c.submit_job(job.model_dump(exclude_none=True)))
        if as_json:
            print_json(accepted)
            return
        out = console()
        label = f" ({accepted['name']})" if accepted.get("name") else ""
        reason = f": {accepted['reason']}" if accepted.get("reason") else ""
        out.print(
            f"submitted job {accepted.get('id')}{label}, {accepted.get('state')}{reason}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        for line in placement_lines(accepted):
            out.print(line, markup=False, highlight=False)
        out.print(f"follow it: scalar jobs {accepted.get('id')}", markup=False, highlight=False)
