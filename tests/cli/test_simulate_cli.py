"""`scalar simulate fgd`: Protocol A from the command line, its JSON shape and its errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from scalar.sim.synthetic import generate
from scalar.sim.traces import write_nodes, write_pods
from tests.conftest import CliResult

Run = Callable[..., CliResult]


@pytest.fixture
def small_trace(tmp_path: Path) -> tuple[Path, Path]:
    nodes, pods = generate(4, n_nodes=25, n_pods=200)
    write_nodes(tmp_path / "nodes.csv", nodes)
    write_pods(tmp_path / "pods.csv", pods)
    return tmp_path / "nodes.csv", tmp_path / "pods.csv"


def test_json_has_the_protocol_a_shape(run_cli: Run, small_trace: tuple[Path, Path]) -> None:
    nodes, pods = small_trace
    result = run_cli(
        "simulate", "fgd", "--nodes", nodes, "--pods", pods, "--policy", "fgd", "--seeds", "42-44", "--json"
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["policy"] == "fgd" and data["seeds"] == [42, 43, 44] and data["tie_break"] == "name"
    assert "smallest node name" in data["tie_break_rule"]
    assert set(data["allocation_ratio"]) == {"80", "90", "100", "110", "120", "130"}
    assert len(data["per_seed"]) == 3
    per_seed_130 = [run["allocation_ratio"]["130"] for run in data["per_seed"]]
    assert data["allocation_ratio"]["130"] == round(sum(per_seed_130) / 3, 2)
    assert data["pods"] == round(sum(run["pods"] for run in data["per_seed"]) / 3, 1)
    assert data["failed_pods"] == round(sum(run["failed_pods"] for run in data["per_seed"]) / 3, 1)
    assert 0 < data["fragmentation_ratio_at_90"] < 100
    assert "Traceback" not in result.stderr


def test_default_policy_is_scalar_and_a_list_of_seeds_works(
    run_cli: Run, small_trace: tuple[Path, Path]
) -> None:
    nodes, pods = small_trace
    result = run_cli("simulate", "fgd", "--nodes", nodes, "--pods", pods, "--seeds", "7,9", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["policy"] == "scalar" and data["seeds"] == [7, 9]


def test_random_tie_break_is_stated(run_cli: Run, small_trace: tuple[Path, Path]) -> None:
    nodes, pods = small_trace
    result = run_cli(
        "simulate",
        "fgd",
        "--nodes",
        nodes,
        "--pods",
        pods,
        "--policy",
        "best-fit",
        "--seeds",
        "1",
        "--tie-break",
        "random",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tie_break"] == "random" and "random" in data["tie_break_rule"]


def test_table_output_names_protocol_policy_and_tie_break(
    run_cli: Run, small_trace: tuple[Path, Path]
) -> None:
    nodes, pods = small_trace
    result = run_cli(
        "simulate", "fgd", "--nodes", nodes, "--pods", pods, "--policy", "best-fit", "--seeds", "3"
    )
    assert result.returncode == 0, result.stderr
    assert "Protocol A" in result.stdout and "best-fit" in result.stdout
    assert "Tie-break: name" in result.stdout and "AT_130" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "tetris"], "unknown policy 'tetris'"),
        (["--seeds", "51-42"], "--seeds: '51-42'"),
        (["--seeds", "x"], "--seeds: 'x' is not a seed"),
        (["--seeds", "1,1"], "lists a seed twice"),
        (["--tie-break", "first"], "unknown tie-break 'first'"),
    ],
)
def test_bad_options_exit_2(
    run_cli: Run, small_trace: tuple[Path, Path], args: list[str], message: str
) -> None:
    nodes, pods = small_trace
    result = run_cli("simulate", "fgd", "--nodes", nodes, "--pods", pods, *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_bad_csv_exits_2_naming_file_line_and_column(
    run_cli: Run, small_trace: tuple[Path, Path], tmp_path: Path
) -> None:
    nodes, _ = small_trace
    bad = tmp_path / "bad.csv"
    bad.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,1,1000\np1,lots,10,1,500\n")
    result = run_cli("simulate", "fgd", "--nodes", nodes, "--pods", bad, "--seeds", "1")
    assert result.returncode == 2
    assert f"{bad}: line 3, column 'cpu_milli'" in result.stderr
    assert "Traceback" not in result.stderr
    missing = tmp_path / "missing-col.csv"
    missing.write_text("sn,cpu_milli,gpu,model\nn0,1000,1,T4\n")
    result = run_cli("simulate", "fgd", "--nodes", missing, "--pods", bad, "--seeds", "1")
    assert result.returncode == 2 and "line 1, column 'memory_mib': missing column" in result.stderr


def test_missing_file_exits_2(run_cli: Run, small_trace: tuple[Path, Path], tmp_path: Path) -> None:
    nodes, _ = small_trace
    result = run_cli("simulate", "fgd", "--nodes", nodes, "--pods", tmp_path / "none.csv")
    assert result.returncode == 2 and "file not found" in result.stderr and "Traceback" not in result.stderr
