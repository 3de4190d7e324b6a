"""Placeholder replaced by the `route` command's module."""

import typer


def register(app: typer.Typer) -> None:
    return None
