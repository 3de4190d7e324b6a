"""Printing results: tables that fit the terminal for people, ``--json`` for programs, one time format.

Every command's table goes through ``make_table`` and ``show``:

- columns have a kind: an ``id`` (and any value a user copies: instance types, node ids) is shown whole on
  one line, never cut or folded; a ``text`` column wraps on words and folds a word longer than the column,
  so nothing is cut either; ``key`` and ``num`` columns are short values kept on one line;
- a table wider than the terminal (``$COLUMNS``, else the terminal's width) keeps its id, key and number
  columns at their full width and shares the rest among its text columns by their ``ratio``; on a pipe
  without ``$COLUMNS`` rows are printed whole, one line each;
- columns marked ``wide`` are shown only with ``--wide``.

Times read the same everywhere: ``2026-11-26T20:31:05Z (3m ago)`` for people (``when``), the API's
ISO 8601 string on ``--json``.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any, Literal

import typer
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

from scalar.domain.timefmt import parse_time

MISSING = "-"
UNLIMITED = 10_000
TEXT_MIN = 12  # a text column is never squeezed below this (it folds instead)
TIME_MIN = 20  # ``2026-11-26T20:31:05Z``: the absolute part of a time stays on one line

Kind = Literal["id", "key", "num", "text", "time"]


@dataclass(frozen=True, slots=True)
class Col:
    """A table column: its header, how its cells may be laid out, and whether only ``--wide`` shows it."""

    name: str
    kind: Kind = "key"
    ratio: int = 1  # a text column's share of the width left over by the fixed ones
    wide: bool = False
    floor: int | None = None  # a text column is not squeezed below this (default TEXT_MIN, TIME_MIN)


def column(spec: str | Col) -> Col:
    """A bare header is a text column, or an id column when it is ``id`` or ends in ``_id``."""
    if isinstance(spec, Col):
        return spec
    return Col(spec, "id" if spec == "id" or spec.endswith("_id") else "text")


def wide_option() -> Any:
    return typer.Option(False, "--wide", "-w", help="Show every column (the default fits the terminal).")


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


def make_table(
    headers: Sequence[str | Col],
    rows: Iterable[Sequence[Any]],
    title: str | None = None,
    *,
    wide: bool = True,
) -> Table:
    """A table with UPPER_SNAKE headers and ``-`` for missing values; without ``wide``, the columns marked
    ``wide`` are left out (each row holds a value for every column of ``headers``)."""
    cols = [column(h) for h in headers]
    shown = [i for i, c in enumerate(cols) if wide or not c.wide]
    table = Table(
        title=title,
        header_style="bold",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for i in shown:
        c = cols[i]
        fixed = c.kind in ("id", "key", "num")
        table.columns.append(
            _Column(
                header=c.name.upper().replace(" ", "_"),
                justify="right" if c.kind == "num" else "left",
                no_wrap=fixed,
                overflow="fold",
                min_width=TIME_MIN if c.kind == "time" else None,
                _index=len(table.columns),
                spec=c,
            )
        )
    for row in rows:
        table.add_row(*(Text(cell(row[i])) for i in shown))
    return table


@dataclass
class _Column(Column):
    """A rich column that remembers the ``Col`` it was made from (``fit`` reads its kind and ratio)."""

    spec: Col = field(default_factory=lambda: Col(""))


def _kinds(table: Table) -> list[Col]:
    """Each column's ``Col``; a column set to ``no_wrap`` after it was made is kept whole (a key)."""
    kinds = []
    for c in table.columns:
        spec = c.spec if isinstance(c, _Column) else Col(str(c.header), "text")
        kinds.append(Col(spec.name, "key") if c.no_wrap and spec.kind in ("text", "time") else spec)
    return kinds


def table_width() -> int | None:
    """The width tables must fit: ``$COLUMNS``, else the terminal's; ``None`` on a pipe (rows stay whole)."""
    probe = Console()
    if probe.is_terminal or (os.environ.get("COLUMNS") or "").isdigit():
        return probe.width
    return None


def _content_width(console: Console, table: Table, index: int) -> int:
    """The width column ``index``'s content takes with no limit (its widest cell, header included)."""
    options = console.options.update_width(UNLIMITED)
    column = table.columns[index]
    cells = [column.header, *column.cells]
    return max((Measurement.get(console, options, c).maximum for c in cells), default=1)


def share(room: int, wants: Sequence[int], ratios: Sequence[int], floors: Sequence[int]) -> list[int]:
    """Widths for columns that want ``wants`` within ``room``: each gets at least its floor, at most what
    it wants, and the rest is shared by ratio (what a satisfied column leaves goes to the others)."""
    widths = [min(f, w) for f, w in zip(floors, wants, strict=True)]
    left = room - sum(widths)
    open_ = [i for i, w in enumerate(wants) if widths[i] < w]
    while left > 0 and open_:
        total = sum(ratios[i] for i in open_)
        given = 0
        for i in open_:
            extra = min(wants[i] - widths[i], max(1, left * ratios[i] // total))
            extra = min(extra, left - given)
            widths[i] += extra
            given += extra
        left -= given
        open_ = [i for i in open_ if widths[i] < wants[i]]
        if not given:
            break
    return widths


def _whole_or_two_lines(widths: list[int], wants: list[int], floors: list[int], is_time: list[bool]) -> None:
    """A time column gets its whole width or its floor (``2026-11-26T20:31:05Z`` above ``(3m ago)``), never
    a width that would split ``(3m ago)``; what that frees goes to the text columns that want more."""
    spare = 0
    for j, time_col in enumerate(is_time):
        if time_col and widths[j] < wants[j]:
            spare += widths[j] - floors[j]
            widths[j] = floors[j]
    for j, time_col in enumerate(is_time):
        if not time_col and spare > 0 and widths[j] < wants[j]:
            extra = min(spare, wants[j] - widths[j])
            widths[j] += extra
            spare -= extra


def fit(table: Table, width: int | None, console: Console | None = None) -> int:
    """Lay ``table`` out for ``width`` columns and return the width to print it at.

    When its natural width does not fit, the id, key and number columns keep their full width and the
    text (and time) columns share what is left by their ``ratio``, wrapping and folding within it, none
    narrower than its floor. When even that does not fit (ids wider than the terminal, or ``--wide``
    on a narrow one) rows are printed whole, one line each, rather than cutting anything."""
    out = console or Console(width=UNLIMITED)
    natural = Measurement.get(out, out.options.update_width(UNLIMITED), table).maximum
    if width is None or natural <= width:
        return natural
    kinds = _kinds(table)
    flexible = [i for i, k in enumerate(kinds) if k.kind in ("text", "time")]
    if not flexible:
        return natural  # nothing may shrink: print it whole
    wants = [_content_width(out, table, i) for i in flexible]
    floors = [kinds[i].floor or (TIME_MIN if kinds[i].kind == "time" else TEXT_MIN) for i in flexible]
    room = width - (natural - sum(wants))
    if room < sum(min(f, w) for f, w in zip(floors, wants, strict=True)):
        return natural  # it cannot fit without squeezing text below its floor: whole rows, one line each
    widths = share(max(room, 0), wants, [kinds[i].ratio for i in flexible], floors)
    _whole_or_two_lines(widths, wants, floors, [kinds[i].kind == "time" for i in flexible])
    for i, w in zip(flexible, widths, strict=True):
        table.columns[i].width = w
    return natural - sum(wants) + sum(widths)


class FittingConsole(Console):
    """A console whose tables are laid out by ``fit`` before printing (so no command can cut an id);
    anything else prints as given."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        tables = [o for o in objects if isinstance(o, Table)]
        if not tables:
            super().print(*objects, **kwargs)
            return
        kwargs.setdefault("soft_wrap", False)
        limit = table_width()
        needed = max(fit(t, limit) for t in tables)
        width = self.width
        self.width = needed if limit is None else max(limit, needed)
        try:
            super().print(*objects, **kwargs)
        finally:
            self.width = width


def console(file: IO[str] | None = None) -> FittingConsole:
    """A console for prose and tables: tables fit the terminal's width (``$COLUMNS``; no limit on a pipe),
    prose is soft-wrapped (left whole for the terminal to wrap)."""
    width = table_width()
    return FittingConsole(file=file, soft_wrap=True, width=width if width is not None else UNLIMITED)


def show(table: Table, file: IO[str] | None = None) -> None:
    """Print a table so that it fits the terminal without cutting anything (see ``fit``)."""
    console(file).print(table)


def say(text: str, file: IO[str] | None = None) -> None:
    """A line of prose, never read as markup; it is not hard-wrapped (the terminal wraps it, and a pipe
    gets it whole, so a command or an id in it can be copied)."""
    console(file).print(text, markup=False, highlight=False)


def explain(text: str, *, hang: str = "  ", file: IO[str] | None = None) -> None:
    """A line of a decision's explanation (a reason, a summary, the command a demo runs), wrapped on words
    at the width tables fit (``$COLUMNS``, else the terminal's), its following lines indented by ``hang``
    past its own indent; on a pipe without ``$COLUMNS`` it stays whole, one line. A word is never cut:
    one wider than the terminal (a long path) overflows rather than being split."""
    width = table_width()
    if width is not None and len(text) > width:
        indent = text[: len(text) - len(text.lstrip(" "))]
        text = textwrap.fill(
            text.strip(" "),
            width,
            initial_indent=indent,
            subsequent_indent=indent + hang,
            break_long_words=False,
            break_on_hyphens=False,
        )
    console(file).print(text, markup=False, highlight=False)


def duration(value: Any) -> str | None:
    """``90.5`` seconds -> ``1m 30s`` (two units at most: ``2h 5m``, ``3d 4h``); ``None`` stays missing."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    total = round(abs(value))
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


def _ago(delta_s: float) -> str:
    """``27m ago``, ``in 2h``: the largest whole unit only, so a time reads at a glance."""
    span = abs(delta_s)
    if span < 1:
        return "now"
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)):
        if span >= size:
            text = f"{int(span // size)}{unit}"
            break
    return f"{text} ago" if delta_s >= 0 else f"in {text}"


def when(value: Any, now: datetime | None = None) -> str | None:
    """``2026-11-26T20:31:05Z (3m ago)`` (or ``(in 2h)``): the one way commands show a time to people.

    ``None`` stays missing; a value that is not a time is shown as it is."""
    moment = parse_time(value, epoch=True)  # an API time: ISO 8601 text or epoch seconds
    if moment is None:
        return None if value is None or value == "" else str(value)
    current = now or datetime.now(UTC)
    return f"{moment.strftime('%Y-%m-%dT%H:%M:%SZ')} ({_ago((current - moment).total_seconds())})"
