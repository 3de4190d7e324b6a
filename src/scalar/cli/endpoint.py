"""``scalar endpoint validate``: check a serverless endpoint spec (seed 004) and print it normalized."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from scalar.cli.errors import user_errors
from scalar.cli.inputs import InputError, parse_json_file
from scalar.cli.output import console, make_table, print_json
from scalar.domain.endpoints import ServerlessEndpoint
from scalar.domain.errors import InvalidSpecError
from scalar.wire.endpoints import EndpointSpecFile, endpoint_to_json

endpoint_app = typer.Typer(
    name="endpoint",
    help="Serverless endpoint specs: which GPU groups and CUDA versions an endpoint may use.",
    no_args_is_help=True,
)


def load_endpoint(path: Path) -> ServerlessEndpoint:
    """Read SPEC.json into a normalized spec; every problem is an ``InputError`` naming file and field."""
    spec_file = parse_json_file(path, EndpointSpecFile)
    try:
        return spec_file.to_domain()
    except InvalidSpecError as exc:
        problem = exc.problem if exc.hint is None else f"{exc.problem}. To fix: {exc.hint}"
        raise InputError(str(path), exc.field, problem) from None


def _print_summary(spec: ServerlessEndpoint) -> None:
    out = console()
    data = endpoint_to_json(spec)
    rows = [[key, data[key]] for key in data if key not in {"gpus", "cudaVersions"}]
    summary = make_table(["field", "value"], rows, f"ENDPOINT {spec.name} ({spec.kind.value})")
    summary.columns[1].overflow = "fold"
    out.print(summary)
    group_rows = [
        [
            rank,
            group.value,
            group.memory_gb,
            " ".join(a.value for a in group.architectures),
            f"{group.min_cuda}+ (rec. {group.recommended_cuda})",
            " ".join(v.value for v in spec.cuda_versions_for(group)) if spec.cuda_versions else "any",
            " ".join(group.model_names),
        ]
        for rank, group in enumerate(spec.gpus, start=1)
    ]
    out.print(
        make_table(
            ["order", "group", "memory_gb", "arch", "cuda", "usable_cuda", "models"],
            group_rows,
            "GPU GROUPS (preference order)",
        )
    )


def validate(
    spec_path: Path = typer.Argument(..., metavar="SPEC.json", help="The endpoint spec to check."),
    as_json: bool = typer.Option(False, "--json", help="Print the normalized spec as JSON."),
) -> None:
    """Check SPEC.json and print the normalized spec, or exit 2 naming the invalid field."""
    spec = load_endpoint(spec_path)
    for note in spec.notes:
        sys.stderr.write(f"note: {spec_path}: {note.message}\n")
    if as_json:
        print_json(endpoint_to_json(spec))
    else:
        _print_summary(spec)


def register(app: typer.Typer) -> None:
    endpoint_app.command("validate")(user_errors(validate))
    app.add_typer(endpoint_app, name="endpoint")
