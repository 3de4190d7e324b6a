"""The controller reads no clock, does no I/O and uses no randomness or uuids: replays must be exact."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.domain.test_purity import impurities

ENGINE = Path(__file__).resolve().parents[2] / "src" / "scalar" / "engine"
MORE_FORBIDDEN_IMPORTS = {"random", "uuid", "secrets", "time", "pydantic"}


def engine_impurities(source: str) -> list[str]:
    problems = impurities(source)
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        problems += [
            f"line {node.lineno}: imports {n}" for n in names if n.split(".")[0] in MORE_FORBIDDEN_IMPORTS
        ]
    return problems


@pytest.mark.parametrize("path", sorted(ENGINE.rglob("*.py")), ids=lambda p: p.name)
def test_engine_module_is_pure(path: Path) -> None:
    problems = engine_impurities(path.read_text())
    assert not problems, f"{path.name} is not pure: " + "; ".join(problems)


@pytest.mark.parametrize("source", ["import uuid\n", "from time import monotonic\n", "import random\n"])
def test_the_scanner_flags_ids_and_clocks(source: str) -> None:
    assert engine_impurities(source)
