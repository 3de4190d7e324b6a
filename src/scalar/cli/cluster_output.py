"""What ``scalar status``, ``explain``, ``nodes``, ``blocks`` and ``costs`` share: money, durations, totals
rows and a spinner while the server answers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from rich import box
from rich.console import Console
from rich.table import Table

from scalar.api.client import ScalarClient
from scalar.cli.jobs import call_server
from scalar.cli.output import cell, console, make_table

T = TypeVar("T")


def usd(value: Any, places: int = 2) -> str | None:
    """``"12.345678"`` -> ``$12.35`` (``None`` stays missing)."""
    if value is None or value == "":
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return str(value)
    return f"${amount:,.{places}f}"


def hours(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return f"{Decimal(str(value)):,.3f}"
    except InvalidOperation:
        return str(value)


def seconds(value: Any) -> str | None:
    """``90.5`` -> ``1m 30s``; ``None`` stays missing."""
    if not isinstance(value, int | float):
        return None
    total = round(value)
    days, rest = divmod(total, 86_400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if days:
        return f"{days}d {h}h"
    if h:
        return f"{h}h {m}m"
    if m:
        return f"{m}m {s}s"
    return f"{s}s"


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str, total: Sequence[Any] | None = None
) -> Table:
    """A read table (UPPER_SNAKE headers, ``-`` for missing) with an optional TOTAL row at the bottom."""
    out = make_table(headers, rows, title)
    out.box = box.SIMPLE_HEAD
    if total is not None:
        out.add_section()
        out.add_row(*(cell(v) for v in total), style="bold")
    return out


def fetch(server: str, what: str, call: Callable[[ScalarClient], T]) -> T:
    """Call the server with a spinner on a terminal (nothing on a pipe)."""
    out = console()
    if not out.is_terminal:
        return call_server(server, call)
    with out.status(f"asking {server} for {what}..."):
        return call_server(server, call)


def say(text: str) -> None:
    console().print(text, markup=False, highlight=False, soft_wrap=True)


def wide_console() -> Console:
    """The terminal's width on a terminal; 260 columns on a pipe, so ids and times are never cut."""
    probe = Console()
    return Console(soft_wrap=False, width=probe.width if probe.is_terminal else 260)


def show(t: Table) -> None:
    """Print a read table: every column but the last stays on one line."""
    for column in t.columns[:-1]:
        column.no_wrap = True
    wide_console().print(t)
