"""Shared test setup: hypothesis profiles and a real-subprocess CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.dbfixtures"]

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
DATA = REPO / "data"  # the traces and published prices kept in the repository (data/README.md)

# HYPOTHESIS_PROFILE=thorough for long local runs; CI uses the default profile.
settings.register_profile(
    "default", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

CliResult = subprocess.CompletedProcess[str]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--snapshot-update",
        action="store_true",
        default=False,
        help="Rewrite the snapshot files of tests/snapshots from the current code (tests/snapshots/conftest.py).",
    )


@pytest.fixture
def run_cli() -> Callable[..., CliResult]:
    """Run ``scalar ARGS...`` as a real process and return its completed result (text stdout/stderr);
    ``env`` adds to (or overrides) the environment, e.g. ``{"COLUMNS": "80"}`` for an 80-column terminal."""

    def _run(*args: str | Path, stdin: str | None = None, env: Mapping[str, str] | None = None) -> CliResult:
        return subprocess.run(
            [sys.executable, "-m", "scalar", *map(str, args)],
            capture_output=True,
            text=True,
            input=stdin,
            cwd=REPO,
            timeout=120,
            env=None if env is None else {**os.environ, **env},
        )

    return _run
