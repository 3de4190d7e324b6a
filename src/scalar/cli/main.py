"""Entry point of the ``scalar`` command."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="scalar",
    help="Scalar: buy GPU capacity where it is cheapest, slice it, pack work onto it, and explain why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Scalar: buy GPU capacity where it is cheapest, slice it, pack work onto it, and explain why."""


# Each module registers its own commands with ``register(app)``.
COMMAND_MODULES = (
    "orderbook",
    "place",
    "quote",
    "prices",
    "providers",
    "route",
    "endpoint",
    "simulate",
    "demo",
    "up",
    "submit",
    "jobs",
    "controller",
)

for _name in COMMAND_MODULES:
    importlib.import_module(f"scalar.cli.{_name}").register(app)


def main() -> None:
    """Run the CLI. Commands wrap themselves in ``scalar.cli.errors.user_errors``."""
    app()


if __name__ == "__main__":
    main()
