"""Placeholder replaced by the `place` command's module."""

import typer


def register(app: typer.Typer) -> None:
    return None
