"""Placeholder replaced by the `endpoint` command's module."""

import typer


def register(app: typer.Typer) -> None:
    return None
