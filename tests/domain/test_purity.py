"""The decision core reads no clock, does no I/O and uses no unseeded randomness."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DOMAIN = Path(__file__).resolve().parents[2] / "src" / "scalar" / "domain"

FORBIDDEN_CALLS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
    ("time", "time"),
    ("time", "monotonic"),
    ("time", "perf_counter"),
    ("time", "sleep"),
    ("random", "random"),
    ("random", "randint"),
    ("random", "choice"),
    ("random", "shuffle"),
    ("random", "uniform"),
    ("os", "environ"),
    ("os", "getenv"),
}
FORBIDDEN_NAMES = {"open", "print", "input"}
FORBIDDEN_IMPORTS = {"socket", "subprocess", "requests", "httpx", "urllib", "sqlite3", "logging", "os"}


def _modules() -> list[Path]:
    return sorted(DOMAIN.rglob("*.py"))


def impurities(source: str) -> list[str]:
    tree = ast.parse(source)
    problems: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base = node.value
            base_name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
            if (base_name, node.attr) in FORBIDDEN_CALLS:
                problems.append(f"line {node.lineno}: {base_name}.{node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in FORBIDDEN_NAMES:
                problems.append(f"line {node.lineno}: {node.func.id}()")
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN_IMPORTS:
                    problems.append(f"line {node.lineno}: import {alias.name}")
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in FORBIDDEN_IMPORTS:
                problems.append(f"line {node.lineno}: from {node.module} import ...")
            if node.module == "random":
                problems.append(f"line {node.lineno}: from random import ... (take an rng parameter)")
    return problems


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_domain_module_is_pure(path: Path) -> None:
    problems = impurities(path.read_text())
    assert not problems, f"{path.name} is not pure: " + "; ".join(problems)


@pytest.mark.parametrize(
    "source",
    [
        "import datetime\nx = datetime.datetime.now()\n",
        "import time\nx = time.time()\n",
        "from random import random\n",
        "import random\nrandom.shuffle([1])\n",
        "print('x')\n",
        "import os\n",
    ],
)
def test_the_scanner_flags_what_it_exists_to_flag(source: str) -> None:
    assert impurities(source)


def test_the_scanner_accepts_a_seeded_rng_parameter() -> None:
    assert not impurities("def f(rng):\n    return rng.random()\n")
