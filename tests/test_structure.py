"""The source tree does not repeat itself: no block of ``MIN_LINES`` (12) or more lines of ``src/`` stands again
elsewhere in ``src/`` (or elsewhere in the same file).

The rule, as the scan applies it:

- every ``.py`` file under ``src/``, except the Alembic migrations (``src/scalar/store/migrations/versions``:
  each is a frozen copy of a schema step and rightly repeats its neighbours' shape);
- a file is read as its *normalised* lines: runs of white space folded to one space, leading and trailing
  white space dropped; blank lines and comment-only lines left out (so a copy that differs only in
  indentation, blank lines or comments is still a copy);
- a duplicate is a window of ``MIN_LINES`` consecutive normalised lines that occurs at two places (two
  files, or two places of one file that do not overlap); windows made only of import lines (single or
  parenthesised ``import``/``from ... import``) do not count;
- overlapping duplicate windows at the same offset are merged, and each run is reported once with both
  places (``path:first-last`` line numbers as in the file).

A duplicate is fixed by giving the repeated logic one home. ``ALLOWED`` lists the pairs of files whose
shared runs are known and left for now, each with its reason; an entry that no longer matches anything
fails the test too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIN_LINES = 12
SKIPPED = ("src/scalar/store/migrations/versions/",)

# Pairs of files (sorted; a file twice for a repeat within it) whose shared runs are left for now: why.
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True, slots=True)
class Line:
    number: int  # 1-based, in the file
    text: str  # normalised
    is_import: bool


@dataclass(frozen=True, slots=True)
class Run:
    length: int  # normalised lines shared
    first: tuple[str, int, int]  # path, first line, last line
    second: tuple[str, int, int]

    @property
    def files(self) -> tuple[str, str]:
        return (self.first[0], self.second[0])

    def __str__(self) -> str:
        (a, a0, a1), (b, b0, b1) = self.first, self.second
        return f"{self.length} lines: {a}:{a0}-{a1} ~ {b}:{b0}-{b1}"


def normalised_lines(text: str) -> list[Line]:
    """The lines that count: white space folded, blank and comment-only lines left out, import lines
    marked."""
    imports: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        folded = " ".join(raw.split())
        if folded and not folded.startswith("#"):
            lines.append(Line(number, folded, number in imports))
    return lines


def source_files(root: Path) -> dict[str, list[Line]]:
    files = {}
    for path in sorted((root / "src").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not rel.startswith(SKIPPED):
            files[rel] = normalised_lines(path.read_text(encoding="utf-8"))
    return files


def duplicated_runs(files: dict[str, list[Line]], min_lines: int = MIN_LINES) -> list[Run]:
    """Every maximal run of ``min_lines`` or more normalised lines that stands at two places."""
    places: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for path, lines in files.items():
        for start in range(len(lines) - min_lines + 1):
            window = lines[start : start + min_lines]
            if not all(line.is_import for line in window):
                places[tuple(line.text for line in window)].append((path, start))
    matches: set[tuple[str, int, str, int]] = set()
    for where in places.values():
        for i, (a, at) in enumerate(where):
            for b, bt in where[i + 1 :]:
                if a != b or abs(at - bt) >= min_lines:  # two places of one file must not overlap
                    matches.add((a, at, b, bt))
    runs = []
    for a, at, b, bt in sorted(matches):
        if (a, at - 1, b, bt - 1) in matches:
            continue  # the middle of a run already counted from its start
        extra = 0
        while (a, at + extra + 1, b, bt + extra + 1) in matches and (a != b or at + min_lines + extra < bt):
            extra += 1  # (in one file, the first place stops before the second starts)
        length = min_lines + extra
        la, lb = files[a], files[b]
        runs.append(
            Run(
                length,
                (a, la[at].number, la[at + length - 1].number),
                (b, lb[bt].number, lb[bt + length - 1].number),
            )
        )
    return sorted(runs, key=lambda r: (-r.length, str(r)))


def test_no_block_of_twelve_lines_is_duplicated_in_src() -> None:
    runs = duplicated_runs(source_files(ROOT))
    unexplained = [str(r) for r in runs if tuple(sorted(r.files)) not in ALLOWED]
    assert not unexplained, (
        f"duplicated blocks of {MIN_LINES}+ lines in src/ (give the logic one home):\n"
        + "\n".join(unexplained)
    )
    stale = set(ALLOWED) - {tuple(sorted(r.files)) for r in runs}
    assert not stale, f"ALLOWED names pairs that no longer share a run (remove them): {sorted(stale)}"


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, list[Line]]:
    for name, text in files.items():
        path = tmp_path / "src" / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return source_files(tmp_path)


BLOCK = "".join(f"    total += {i} * weight  # step {i}\n" for i in range(12))


def test_the_scan_finds_a_copied_block_despite_indentation_blank_lines_and_comments(tmp_path: Path) -> None:
    indented = "".join(f"        {line.strip()}\n\n" for line in BLOCK.splitlines())
    files = _tree(
        tmp_path,
        {
            "a.py": "def f(weight):\n    total = 0\n" + BLOCK + "    return total\n",
            "b.py": "class C:\n    def g(self, weight):\n        # a comment\n" + indented,
        },
    )
    [run] = duplicated_runs(files)
    assert run.first == ("src/pkg/a.py", 3, 14)
    assert run.second == ("src/pkg/b.py", 4, 26)
    assert run.length == 12
    assert duplicated_runs(files, min_lines=13) == []


def test_the_scan_ignores_imports_and_overlaps_and_finds_repeats_in_one_file(tmp_path: Path) -> None:
    imports = "from os import (\n" + "".join(f"    name{i},\n" for i in range(12)) + ")\n"
    repeating = "x = 1\n" * 30  # every window equals the next: only non-overlapping places count
    files = _tree(tmp_path, {"a.py": imports, "b.py": imports, "c.py": repeating})
    runs = duplicated_runs(files)
    assert runs and all(r.files == ("src/pkg/c.py", "src/pkg/c.py") for r in runs)
    assert all(r.first[2] < r.second[1] for r in runs)  # the two places of a run do not overlap
