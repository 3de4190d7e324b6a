"""Printing results: a rich table for people, ``--json`` for programs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

MISSING = "-"


def print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")


def cell(value: Any) -> str:
    if value is None or value == "":
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.4f}".rstrip("0").rstrip(".")
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or MISSING
    return str(value)


def make_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> Table:
    """A table with UPPER_SNAKE headers and ``-`` for missing values."""
    table = Table(title=title, header_style="bold", title_justify="left")
    for h in headers:
        table.add_column(h.upper().replace(" ", "_"))
    for row in rows:
        table.add_row(*(cell(v) for v in row))
    return table


def console() -> Console:
    return Console(soft_wrap=False, width=max(100, Console().width))
