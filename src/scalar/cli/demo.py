"""``scalar demo``: ask the decision toolkit each seed's question on the example files, one after another."""

from __future__ import annotations

from pathlib import Path

import typer

from scalar.cli.errors import fail
from scalar.cli.output import console, explain, table_width, wide_option

# (title, command line relative to the examples directory)
DEMO_STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Seed 000 - which price to bid for 8 nodes of 8xH100 on the orderbook",
        ("orderbook", "--book", "{ex}/book_seed000.json", "--nodes", "8"),
    ),
    (
        "Seed 001 - where a 4x60 GB FAST job lands on a partly used cluster",
        (
            "place",
            "--cluster",
            "{ex}/cluster_example.json",
            "--job",
            "{ex}/job_4x60gb.json",
            "--now",
            "2025-06-01T12:00:00Z",
        ),
    ),
    (
        "Seed 002 - the best offer for an 8xH100 workload across clouds",
        (
            "quote",
            "--prices",
            "{ex}/prices_gpu_clouds.json",
            "--requirements",
            "{ex}/requirements_8xh100.json",
        ),
    ),
    (
        "Seed 003 - which scale groups grow for this demand",
        (
            "route",
            "--groups",
            "{ex}/groups_gpu.json",
            "--demand",
            "{ex}/demand_gpu.json",
            "--now",
            "2026-03-01T12:00:00Z",
        ),
    ),
    (
        "Seed 004 - which GPUs a serverless endpoint may use",
        ("endpoint", "validate", "{ex}/endpoint_fallback.json"),
    ),
)


# The steps whose command has a --wide view (``scalar demo --wide`` passes it on).
WIDE_COMMANDS = frozenset({"place", "quote", "route"})


def find_examples(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        candidate = directory / "examples"
        if (candidate / "book_seed000.json").is_file():
            return candidate
    return None


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        examples: Path | None = typer.Option(
            None, help="Directory of example files (default: ./examples of the checkout)."
        ),
        wide: bool = wide_option(),
    ) -> None:
        """Walk through the five decisions on the example files: what Scalar would decide, and why."""
        ex = examples or find_examples(Path.cwd())
        if ex is None or not ex.is_dir():
            fail("cannot find the example files; run from a checkout of Scalar or pass --examples DIR")
        out = console()
        out.width = table_width() or 80  # a rule on a pipe: 80 columns, not the width of whole rows
        for title, argv in DEMO_STEPS:
            out.rule(f"[bold]{title}")
            args = [part.format(ex=ex) for part in argv]
            if wide and argv[0] in WIDE_COMMANDS:
                args.append("--wide")
            explain(f"$ scalar {' '.join(args)}", hang="    ")
            try:
                app(args, standalone_mode=False)
            except SystemExit as exc:  # a command's own exit; the demo goes on
                if exc.code not in (0, None):
                    out.print(f"[red]exit {exc.code}[/red]")
        out.rule()
        explain(
            "Each command also takes --json (and place, quote and route --wide). See docs/formats.md for "
            "the file formats, and `scalar COMMAND --help`."
        )
