"""Placeholder replaced by the `simulate` command's module."""

import typer


def register(app: typer.Typer) -> None:
    return None
