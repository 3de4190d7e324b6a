"""Entry point of the ``scalar`` command."""

from __future__ import annotations

import importlib
import os

import typer

app = typer.Typer(
    name="scalar",
    help="Scalar: buy GPU capacity where it is cheapest, slice it, pack work onto it, and explain why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    token: str | None = typer.Option(
        None,
        "--token",
        help="API token for the server (default $SCALAR_TOKEN, else ./.scalar/admin.token on loopback).",
        show_default=False,
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
    "status",
    "explain",
    "nodes",
    "costs",
    "agent",
    "node",
    "logs",
    "controller",
    "token",
)

for _name in COMMAND_MODULES:
    importlib.import_module(f"scalar.cli.{_name}").register(app)


def main() -> None:
    """Run the CLI. Commands wrap themselves in ``scalar.cli.errors.user_errors``."""
    app()


if __name__ == "__main__":
    main()
