"""The controller reads no clock, does no I/O and uses no randomness or uuids: replays must be exact."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.domain.test_purity import impurities

ENGINE = Path(__file__).resolve().parents[2] / "src" / "scalar" / "engine"
MORE_FORBIDDEN_IMPORTS = {"random", "uuid", "secrets", "time", "pydantic"}
# The config file's pydantic model: read at the boundary, never during a step (docs/decisions/engine.md).
BOUNDARY = {"config_file.py": {"pydantic"}}


def engine_impurities(source: str, allowed: frozenset[str] = frozenset()) -> list[str]:
    problems = impurities(source)
    forbidden = MORE_FORBIDDEN_IMPORTS - allowed
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        problems += [f"line {node.lineno}: imports {n}" for n in names if n.split(".")[0] in forbidden]
    return problems


@pytest.mark.parametrize("path", sorted(ENGINE.rglob("*.py")), ids=lambda p: p.name)
def test_engine_module_is_pure(path: Path) -> None:
    problems = engine_impurities(path.read_text(), frozenset(BOUNDARY.get(path.name, ())))
    assert not problems, f"{path.name} is not pure: " + "; ".join(problems)


@pytest.mark.parametrize("source", ["import uuid\n", "from time import monotonic\n", "import random\n"])
def test_the_scanner_flags_ids_and_clocks(source: str) -> None:
    assert engine_impurities(source)


def test_only_the_config_file_boundary_may_use_pydantic() -> None:
    assert engine_impurities("from pydantic import BaseModel\n")
    assert not engine_impurities("from pydantic import BaseModel\n", frozenset(BOUNDARY["config_file.py"]))


def test_building_a_config_in_code_leaves_the_file_model_unloaded() -> None:
    """The engine reads no file: importing it and building a config in code never loads the pydantic model."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from scalar.engine import Controller\n"
        "from scalar.engine.config import ControllerConfig\n"
        "Controller(ControllerConfig())\n"
        "print('scalar.engine.config_file' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
