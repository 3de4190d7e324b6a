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

from scalar.cli import submit_preview
from scalar.cli.errors import USAGE_ERROR, fail, user_errors
from scalar.cli.inputs import read_json
from scalar.cli.jobs import call_server, placement_lines, server_option
from scalar.cli.output import console, print_json
from scalar.wire.jobs import FieldProblem, JobOut, JobSubmission, submission_problems

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
    "cuda_versions": "--cuda",
    "ports": "--ports",
    "share_gpu": "--share-gpu",
    "restartable": "--restartable",
    "command": "COMMAND (after --)",
    "env": "--env",
    "workdir": "--workdir",
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


def _env_pairs(items: list[str]) -> dict[str, str]:
    """``--env NAME=VALUE`` flags as a mapping; a flag without ``=`` is named in the error."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            fail(f"--env {item!r}: write NAME=VALUE, e.g. --env SEED=1")
        out[name] = value
    return out


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
            None,
            "--gpu-model",
            help="Accept this GPU model (repeat for several, most preferred first, e.g. H200 then H100).",
        ),
        cuda: list[str] | None = typer.Option(
            None, "--cuda", help="Accept only nodes with this CUDA version, MAJOR.MINOR (repeat for several)."
        ),
        ports: int | None = typer.Option(
            None,
            "--ports",
            help="TCP ports the agent allocates for the command (0-16; env SCALAR_PORTS, PORT).",
        ),
        share_gpu: bool | None = typer.Option(
            None, "--share-gpu/--no-share-gpu", help="May share a GPU with other jobs (default no)."
        ),
        restartable: bool | None = typer.Option(
            None,
            "--restartable/--no-restartable",
            help="May be stopped and restarted on a cheaper node, losing progress since its last checkpoint "
            "(FLEX only; default no).",
        ),
        file: Path | None = typer.Option(
            None, "--file", help="JOB.json: the POST /jobs body (see docs/api.md); flags override its fields."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the accepted job as JSON."),
        yes: bool = typer.Option(False, "-y", "--yes", help="Do not ask before a job that needs a purchase."),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="Only show what the job would cost and whether it needs a purchase."
        ),
        wait: bool = typer.Option(
            False, "--wait", help="Follow the job until it runs or ends, with progress."
        ),
        server: str = server_option(),
        env: list[str] | None = typer.Option(
            None, "--env", help="NAME=VALUE for the command's environment (repeat for several)."
        ),
        workdir: str | None = typer.Option(None, "--workdir", help="The command's working directory."),
        command: list[str] | None = typer.Argument(
            None, help="What to run, after --: `scalar submit --gpus 1 -- python train.py` (default 1 GPU)."
        ),
    ) -> None:
        """Submit a job to a running Scalar server (`scalar up`) and print its id and state.

        It first shows what the job would cost (POST /jobs/preview) and, when capacity must be bought,
        asks before spending: -y skips the question, --dry-run only shows the preview.

        With a command (after --) the job runs as a process on a node with a Scalar agent
        (docs/agent.md); without one it is a pure reservation. Read its output with `scalar logs JOB`."""
        from_file: dict[str, Any] = {}
        if file is not None:
            data = read_json(file)
            if not isinstance(data, dict):
                fail(f"{file}: must hold a JSON object with the job's fields (see docs/api.md)")
            from_file = data
        elif command:
            gpus = 1 if gpus is None else gpus
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
            "cuda_versions": cuda or None,
            "ports": ports,
            "share_gpu": share_gpu,
            "restartable": restartable,
            "command": list(command) if command else None,
            "env": _env_pairs(env) if env else None,
            "workdir": workdir,
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

        fields = job.model_dump(exclude_none=True)
        preview = submit_preview.fetch_preview(server, fields)
        if dry_run:
            submit_preview.dry_run(preview, as_json)
            return
        if preview is not None:
            typed = submit_preview.read_preview(preview)
            submit_preview.show_preview(typed, to_stderr=as_json)
            if submit_preview.commits_money(typed) and not yes:
                submit_preview.confirm(typed)
        accepted = call_server(server, lambda c: c.submit_job(fields))
        if wait:
            accepted = submit_preview.follow(server, accepted, quiet=as_json)
        if as_json:
            print_json(accepted)
            return
        out = console()
        shown = JobOut.model_validate(accepted)
        label = f" ({shown.name})" if shown.name else ""
        reason = f": {shown.reason}" if shown.reason else ""
        out.print(
            f"submitted job {shown.id}{label}, {shown.state}{reason}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        for line in placement_lines(shown):
            out.print(line, markup=False, highlight=False)
        out.print(f"follow it: scalar jobs {shown.id}", markup=False, highlight=False)
