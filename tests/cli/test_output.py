"""The CLI's shared output rules as invariants: a table laid out for a width fits it and drops nothing,
ids stay whole on one line, one time format, server hints as commands, and stray words found wherever
they sit before ``--``."""

from __future__ import annotations

import io
import string
from datetime import UTC, datetime, timedelta

import typer.main
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from scalar.cli.errors import cli_hints
from scalar.cli.main import app
from scalar.cli.output import Col, Kind, cell, fit, make_table, when
from scalar.cli.stray import find_stray

NOW = datetime(2026, 11, 26, 20, 31, 5, tzinfo=UTC)
ID_CHARS = string.ascii_lowercase + string.digits + "-_"
WORD = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=30)
TEXT = st.lists(WORD, min_size=0, max_size=8).map(" ".join)
KINDS: st.SearchStrategy[Kind] = st.sampled_from(["id", "key", "num", "text", "time"])


def render(table: object, width: int) -> list[str]:
    buffer = io.StringIO()
    Console(file=buffer, width=width, soft_wrap=False).print(table)
    return buffer.getvalue().splitlines()


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[Col], list[list[str]]]:
    kinds = draw(st.lists(KINDS, min_size=1, max_size=7))
    cols = [Col(f"c{i}_{k}", k, ratio=draw(st.integers(1, 3))) for i, k in enumerate(kinds)]
    n_rows = draw(st.integers(0, 6))
    rows = []
    for _ in range(n_rows):
        row = []
        for c in cols:
            if c.kind == "id":
                row.append(draw(st.text(ID_CHARS, min_size=1, max_size=34)))
            elif c.kind in ("key", "num"):
                row.append(draw(st.text(ID_CHARS, min_size=1, max_size=10)))
            else:
                row.append(draw(TEXT))
        rows.append(row)
    return cols, rows


@given(tables(), st.integers(30, 200))
def test_a_laid_out_table_fits_when_it_can_keeps_ids_whole_and_drops_nothing(
    spec: tuple[list[Col], list[list[str]]], width: int
) -> None:
    cols, rows = spec
    table = make_table(cols, rows)
    at = fit(table, width)
    lines = render(table, at)

    assert all(len(line) <= at for line in lines)
    words = {w for line in lines for w in line.split()}
    for row in rows:
        for c, value in zip(cols, row, strict=True):
            if c.kind in ("id", "key", "num"):
                assert value in words  # whole, on one line
    printed = sum(len(line.replace(" ", "")) for line in lines) - sum(line.count("─") for line in lines)
    cells = sum(len(cell(v).replace(" ", "")) for row in rows for v in row)  # "" shows as "-"
    headers = sum(len(c.name) for c in cols)
    assert printed == cells + headers  # folding moves characters, it never drops one


@given(tables())
def test_a_table_too_wide_is_squeezed_to_the_width_or_printed_whole_never_in_between(
    spec: tuple[list[Col], list[list[str]]],
) -> None:
    cols, rows = spec
    natural = fit(make_table(cols, rows), None)
    width = max(30, natural - 15)
    table = make_table(cols, rows)
    at = fit(table, width)
    assert at <= width or at == natural  # fits, or (ids and text floors too wide) rows printed whole
    assert at <= natural
    if all(c.kind in ("id", "key", "num") for c in cols):
        assert at == natural  # nothing may wrap: whole rows


def test_wide_columns_show_only_with_wide() -> None:
    cols = [Col("id", "id"), Col("extra", "key", wide=True), Col("why", "text")]
    narrow = make_table(cols, [["job-1", "x", "because"]], wide=False)
    wide = make_table(cols, [["job-1", "x", "because"]], wide=True)
    assert [c.header for c in narrow.columns] == ["ID", "WHY"]
    assert [c.header for c in wide.columns] == ["ID", "EXTRA", "WHY"]


def test_one_time_format_absolute_then_relative() -> None:
    assert when("2026-11-26T20:28:05Z", NOW) == "2026-11-26T20:28:05Z (3m ago)"
    assert when("2026-11-26T20:28:05.5Z", NOW) == "2026-11-26T20:28:05Z (2m ago)"  # whole units, rounded down
    assert when("2026-11-26T22:31:05+00:00", NOW) == "2026-11-26T22:31:05Z (in 2h)"
    assert when("2026-11-26T21:31:05+01:00", NOW) == "2026-11-26T20:31:05Z (now)"
    assert when("2026-11-24T20:31:04", NOW) == "2026-11-24T20:31:04Z (2d ago)"  # naive: UTC
    assert when(NOW.timestamp() - 42, NOW) == "2026-11-26T20:30:23Z (42s ago)"
    assert when(None, NOW) is None and when("", NOW) is None
    assert when("soon", NOW) == "soon"  # not a time: shown as it is


@given(st.integers(-10 * 86_400, 10 * 86_400))
def test_the_relative_part_is_one_unit_and_says_past_or_future(offset_s: int) -> None:
    shown = when((NOW - timedelta(seconds=offset_s)).isoformat(), NOW)
    assert shown is not None
    relative = shown.split(" (", 1)[1].rstrip(")")
    if offset_s == 0:
        assert relative == "now"
    elif offset_s > 0:
        assert relative.endswith(" ago") and relative.count(" ") == 1
    else:
        assert relative.startswith("in ") and relative.count(" ") == 1


def test_server_hints_name_commands_not_routes() -> None:
    assert (
        cli_hints("give a job id as returned by POST /jobs (GET /jobs lists them)")
        == "give a job id as returned by `scalar submit` (`scalar jobs` lists them)"
    )
    assert cli_hints("list nodes with `scalar nodes` (or GET /agents)") == "list nodes with `scalar nodes`"
    assert cli_hints("GET /tokens lists them") == "`scalar token list` lists them"
    assert cli_hints("the preview (POST /jobs/preview)") == "the preview (`scalar submit --dry-run`)"
    assert cli_hints("GET /jobsfoo stays") == "GET /jobsfoo stays"


SUBMIT = typer.main.get_command(app).commands["submit"]  # type: ignore[attr-defined]
VALUED = ["--gpus", "--duration", "--tier", "--name", "--server", "--gpu-model"]
FLAGS = ["-y", "--json", "--dry-run", "--share-gpu"]
WORDS = st.text(string.ascii_lowercase, min_size=1, max_size=8)


@st.composite
def submit_lines(draw: st.DrawFn) -> list[str]:
    args: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            args += [draw(st.sampled_from(VALUED)), draw(WORDS)]
        else:
            args.append(draw(st.sampled_from(FLAGS)))
    return args


@given(submit_lines(), st.lists(WORDS, max_size=4))
def test_words_after_dashdash_are_the_command(options: list[str], command: list[str]) -> None:
    assert find_stray(SUBMIT, [*options, "--", *command]) is None
    assert find_stray(SUBMIT, options) is None


@given(submit_lines(), st.sampled_from(VALUED), WORDS, WORDS, submit_lines())
def test_a_word_after_an_options_value_is_found_with_that_option(
    before: list[str], option: str, value: str, word: str, after: list[str]
) -> None:
    stray = find_stray(SUBMIT, [*before, option, value, word, *after, "--", "true"])

    assert stray is not None
    assert (stray.word, stray.option, stray.value) == (word, option, value)


def test_a_column_a_command_sets_to_no_wrap_is_never_squeezed_so_never_cut() -> None:
    table = make_table(["node", "result"], [["node-c", "insufficient_gpus"]])
    table.columns[1].no_wrap = True  # as `scalar place` does after make_table

    lines = render(table, fit(table, 20))

    assert any("insufficient_gpus" in line.split() for line in lines)
