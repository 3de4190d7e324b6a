"""What ``scalar status``, ``explain``, ``nodes``, ``blocks`` and ``costs`` share: money, durations, totals
rows and a spinner while the server answers (tables and times are ``scalar.cli.output``'s)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from rich.table import Table

from scalar.api.client import ScalarClient
from scalar.cli.jobs import call_server
from scalar.cli.output import Col, cell, column, console, make_table
from scalar.domain.money import usd_fixed

T = TypeVar("T")


def usd(value: Any, places: int = 2) -> str | None:
    """``"12.345678"`` -> ``$12.35`` (``None`` stays missing)."""
    if value is None or value == "":
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return str(value)
    return usd_fixed(amount, places)


def hours(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return f"{Decimal(str(value)):,.3f}"
    except InvalidOperation:
        return str(value)


def table(
    headers: Sequence[str | Col],
    rows: Sequence[Sequence[Any]],
    title: str,
    total: Sequence[Any] | None = None,
    *,
    wide: bool = True,
) -> Table:
    """A read table (``output.make_table``) with an optional TOTAL row at the bottom."""
    out = make_table(headers, rows, title, wide=wide)
    if total is not None:
        shown = [i for i, h in enumerate(headers) if wide or not column(h).wide]
        out.add_section()
        out.add_row(*(cell(total[i]) for i in shown), style="bold")
    return out


def fetch(server: str, what: str, call: Callable[[ScalarClient], T]) -> T:
    """Call the server with a spinner on a terminal (nothing on a pipe)."""
    out = console()
    if not out.is_terminal:
        return call_server(server, call)
    with out.status(f"asking {server} for {what}..."):
        return call_server(server, call)
