"""Placeholder replaced by the `quote` command's module."""

import typer


def register(app: typer.Typer) -> None:
    return None
