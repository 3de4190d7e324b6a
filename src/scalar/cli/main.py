"""Entry point of the ``scalar`` command."""

from __future__ import annotations

import importlib
import os
from importlib.metadata import PackageNotFoundError, version

import typer

from scalar.cli.stray import strict

DISTRIBUTION = "scalar-compute"  # the name pyproject.toml publishes the package under

app = typer.Typer(
    name="scalar",
    help="Scalar: buy GPU capacity where it is cheapest, slice it, pack work onto it, and explain why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def scalar_version() -> str:
    """``scalar 0.1.0``: the installed package's version (from its metadata)."""
    try:
        return f"scalar {version(DISTRIBUTION)}"
    except PackageNotFoundError:
        return "scalar (version unknown: the package is not installed; `pip install .` installs it)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(scalar_version())
        raise typer.Exit()


@app.callback()
def _root(
    token: str | None = typer.Option(
        None,
        "--token",
        help="API token for the server (default $SCALAR_TOKEN, else ./.scalar/admin.token on loopback).",
        show_default=False,
    ),
    _version: bool = typer.Option(
        False,
        "--version",
        help="Print the version (scalar X.Y.Z) and exit.",
        callback=_print_version,
        is_eager=True,
    ),
) -> None:
    """Scalar: buy GPU capacity where it is cheapest, slice it, pack work onto it, and explain why."""
    if token:  # read by scalar.api.client.default_token
        os.environ["SCALAR_TOKEN"] = token


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
    "cancel",
    "status",
    "explain",
    "nodes",
    "costs",
    "agent",
    "node",
    "logs",
    "controller",
    "api",
    "token",
)

for _name in COMMAND_MODULES:
    importlib.import_module(f"scalar.cli.{_name}").register(app)
strict(app)  # stray words are refused with a hint (scalar.cli.stray)


def main() -> None:
    """Run the CLI. Commands wrap themselves in ``scalar.cli.errors.user_errors``."""
    app(prog_name="scalar")


if __name__ == "__main__":
    main()
