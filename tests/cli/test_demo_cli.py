"""`scalar demo` (what `make run` starts until the control plane does) walks all five decisions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import EXAMPLES, CliResult


def test_demo_answers_every_seed_question(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("demo", "--examples", EXAMPLES)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for seed in ("Seed 000", "Seed 001", "Seed 002", "Seed 003", "Seed 004"):
        assert seed in out
    assert "$25.00/GPU-h at sorted ask 2" in out  # the orderbook formula's answer, not the ASCII table's
    assert "exit " not in out  # no step failed
    assert "Traceback" not in result.stderr


def test_demo_without_examples_says_how_to_fix(run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    result = run_cli("demo", "--examples", tmp_path / "nowhere")
    assert result.returncode == 2
    assert "--examples" in result.stderr and "Traceback" not in result.stderr
