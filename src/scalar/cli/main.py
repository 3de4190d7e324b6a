"""Entry point of the ``scalar`` command."""

from __future__ import annotations

import importlib
import os
import sys
from importlib.metadata import PackageNotFoundError, version

import typer

from scalar.cli.stray import strict

DISTRIBUTION = "scalar-compute"  # the name pyproject.toml publishes the package under

HELP = "Scalar: buy GPU capacity where it is cheapest, slice it, pack work onto it, and explain why."


def new_app() -> typer.Typer:
    """An empty ``scalar`` application with the root options; ``build`` registers commands on it."""
    app = typer.Typer(
        name="scalar",
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    app.callback()(_root)
    return app


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

# Commands a node runs: only their modules are imported, so `scalar agent` runs on the base install
# (no FastAPI, SQLAlchemy, kubernetes client, numpy, botocore: docs/agent.md).
LIGHT_COMMANDS = {"agent": ("agent",)}

# The import name of each package an extra adds, and the extra (pyproject.toml) that installs it.
EXTRA_OF_PACKAGE = {
    **dict.fromkeys(
        (
            "fastapi",
            "starlette",
            "uvicorn",
            "sqlalchemy",
            "alembic",
            "psycopg",
            "jinja2",
            "yaml",
            "cryptography",
            "fastapi_offline",
            "prometheus_client",
            "ariadne",
            "botocore",
        ),
        "server",
    ),
    "kubernetes": "k8s",
    "paramiko": "ssh",
    **dict.fromkeys(("numpy", "scipy", "matplotlib"), "sim"),
    **dict.fromkeys(("runpod", "cloudpickle"), "runpod"),
}


def missing_extra(err: ModuleNotFoundError) -> str | None:
    """The extra that installs the package ``err`` misses, or None (then it is not an extra's)."""
    return EXTRA_OF_PACKAGE.get((err.name or "").split(".")[0])


def build(names: tuple[str, ...] = COMMAND_MODULES) -> tuple[typer.Typer, dict[str, str]]:
    """The application with the commands of ``names``; a module whose extra is not installed is left out,
    and returned as ``{module: "pip install ..."}`` so its command can say what to install."""
    app = new_app()
    left_out: dict[str, str] = {}
    for name in names:
        try:
            module = importlib.import_module(f"scalar.cli.{name}")
        except ModuleNotFoundError as err:
            extra = missing_extra(err)
            if extra is None:
                raise
            left_out[name] = f"{err.name} is not installed: pip install '{DISTRIBUTION}[{extra}]'"
            continue
        module.register(app)
    strict(app)  # stray words are refused with a hint (scalar.cli.stray)
    return app, left_out


def command_word(argv: list[str]) -> str | None:
    """The command ``argv`` (without the program name) runs: the first word after the root options."""
    words = iter(argv)
    for word in words:
        if word == "--token":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def __getattr__(name: str) -> typer.Typer:
    """``scalar.cli.main.app``: every command, built on first use (importing this module stays light)."""
    if name == "app":
        app, _ = build()
        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. Commands wrap themselves in ``scalar.cli.errors.user_errors``."""
    args = sys.argv[1:] if argv is None else argv
    word = command_word(args)
    app, left_out = build(LIGHT_COMMANDS.get(word or "", COMMAND_MODULES))
    if left_out and word is not None and word not in getattr(typer.main.get_command(app), "commands", {}):
        why = "; ".join(f"scalar.cli.{m}: {reason}" for m, reason in left_out.items())
        sys.stderr.write(
            f"error: no command {word!r} in this install ({why}); install the extra that adds it\n"
        )
        raise SystemExit(2)
    app(args=args, prog_name="scalar")


if __name__ == "__main__":
    main()
