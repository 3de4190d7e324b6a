"""Snapshot tests: the answers of the API, the CLI and the dashboard over one fixed scenario, compared
with the files under ``tests/snapshots/data/``.

``pytest tests/snapshots --snapshot-update`` (or ``SCALAR_UPDATE_SNAPSHOTS=1``) rewrites the files from the
current code; otherwise a difference fails the test with a unified diff. Review a rewritten snapshot like
code: it records what users see.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.snapshots.scenario import scenario

DATA = Path(__file__).resolve().parent / "data"
UPDATE_ENV = "SCALAR_UPDATE_SNAPSHOTS"


__all__ = ["Snapshot", "scenario"]

Snapshot = Callable[[str, str], None]


@pytest.fixture
def snapshot(request: pytest.FixtureRequest) -> Snapshot:
    """``snapshot(name, text)``: ``text`` must equal ``data/<name>``; in update mode, it becomes it."""
    update = bool(request.config.getoption("--snapshot-update")) or os.environ.get(UPDATE_ENV) == "1"

    def check(name: str, text: str) -> None:
        path = DATA / name
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
            return
        if not path.exists():
            pytest.fail(f"no snapshot {path}: run with --snapshot-update (or {UPDATE_ENV}=1) to record it")
        expected = path.read_text(encoding="utf-8")
        if text != expected:
            diff = "".join(
                difflib.unified_diff(
                    expected.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=f"snapshot {name}",
                    tofile="now",
                )
            )
            pytest.fail(
                f"{name} differs from its snapshot (rerun with --snapshot-update if the change is "
                f"intended):\n{diff}",
                pytrace=False,
            )

    return check
