"""Placeholder replaced by the `orderbook` command's module."""

import typer


def register(app: typer.Typer) -> None:
    return None
