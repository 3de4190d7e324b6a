"""The repository is self-contained: a copy of its tracked files, alone in an empty directory, runs.

A user's clone has nothing beside it (no ``../shared``): the traces and prices live in ``data/``. This test
copies what git tracks (and untracked files it does not ignore) into a fresh temporary directory, then runs
the data-dependent tests and one ``scalar simulate`` there with that copy's ``src`` first on the path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

DATA_TESTS = [
    "tests/sim/test_protocol_a_smoke.py",
    "tests/sim/test_protocol_b_smoke.py",
    "tests/providers/test_catalog.py::test_curation_script_regenerates_the_packaged_data_byte_for_byte",
]


def tracked_files() -> list[str]:
    done = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [name for name in done.stdout.split("\0") if name]


def copy_checkout(dest: Path) -> Path:
    copy = dest / "scalar-clone"
    for name in tracked_files():
        source = REPO / name
        if not source.is_file():  # deleted in the work tree but still tracked
            continue
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return copy


def test_a_copy_with_nothing_beside_it_runs_the_data_tests_and_simulate(tmp_path: Path) -> None:
    alone = tmp_path / "empty"
    alone.mkdir()
    copy = copy_checkout(alone)
    assert not copy.parent.joinpath("shared").exists() and sorted(p.name for p in alone.iterdir()) == [
        "scalar-clone"
    ]
    assert (copy / "data" / "traces" / "alibaba-gpu-v2023" / "openb_pod_list_default.csv").is_file()
    env = {**os.environ, "PYTHONPATH": str(copy / "src"), "PYTHONDONTWRITEBYTECODE": "1"}

    where = subprocess.run(
        [sys.executable, "-c", "import scalar; print(scalar.__file__)"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve().is_relative_to(copy.resolve()), where.stdout

    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *DATA_TESTS],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "skipped" not in tests.stdout, tests.stdout[-2000:]

    simulate = subprocess.run(
        [
            sys.executable,
            "-m",
            "scalar",
            "simulate",
            "fgd",
            "--policy",
            "best-fit",
            "--seeds",
            "42",
            "--json",
        ],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert simulate.returncode == 0, simulate.stderr
    assert "openb_pod_list_default.csv" in simulate.stdout and str(copy) in simulate.stdout


def test_outside_a_checkout_simulate_asks_for_the_trace_files(tmp_path: Path) -> None:
    """Installed without the repository, ``scalar simulate`` has no default trace and says what to pass."""
    package = tmp_path / "site" / "scalar"
    shutil.copytree(REPO / "src" / "scalar", package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(package.parent), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "scalar", "simulate", "fgd", "--seeds", "42"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--nodes" in done.stderr and "Traceback" not in done.stderr
