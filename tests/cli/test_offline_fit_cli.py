"""The offline toolkit (``quote``, ``place``, ``route``, ``orderbook``, ``simulate``, ``demo``) in an
80-column terminal (``COLUMNS=80``), through the real ``scalar`` process: every line of the default output
fits, the answer is still all there (ids whole, the chosen row, the explanation word for word), and
``--wide`` brings back the columns the default view leaves out."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scalar.sim.synthetic import generate
from scalar.sim.traces import write_nodes, write_pods
from tests.conftest import EXAMPLES, CliResult

Run = Callable[..., CliResult]
WIDTH = 80
TERMINAL = {"COLUMNS": str(WIDTH)}
QUOTE = (
    "quote",
    "--prices",
    EXAMPLES / "prices_gpu_clouds.json",
    "--requirements",
    EXAMPLES / "requirements_8xh100.json",
)
PLACE = (
    "place",
    "--cluster",
    EXAMPLES / "cluster_example.json",
    "--job",
    EXAMPLES / "job_4x60gb.json",
    "--now",
    "2025-06-01T12:00:00Z",
)
ROUTE = (
    "route",
    "--groups",
    EXAMPLES / "groups_gpu.json",
    "--demand",
    EXAMPLES / "demand_gpu.json",
    "--now",
    "2026-03-01T12:00:00Z",
)
DYNAMIC = ("simulate", "dynamic", "--pods", EXAMPLES / "pods-dynamic.csv", "--start-day", "0")


def fitted(run_cli: Run, *args: str | Path) -> tuple[list[str], str]:
    """Run ``scalar ARGS`` in 80 columns; return its lines (each checked to fit) and its words joined by
    single spaces (so a wrapped explanation still reads as one sentence)."""
    result = run_cli(*args, env=TERMINAL)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    too_wide = [line for line in lines if len(line) > WIDTH]
    assert not too_wide, "\n".join(too_wide)
    return lines, " ".join(result.stdout.split())


def row(lines: list[str], first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first`` (cells are apart by two spaces or more)."""
    found = [line.split() for line in lines if line.startswith(first + " ")]
    assert len(found) == 1, (first, lines)
    return found[0]


def last_column(lines: list[str], header: str) -> str:
    """The words of a table's last column (``header``), its rows' wrapped lines joined: a cell's text
    read as one sentence however narrow the column was."""
    top = next(i for i, line in enumerate(lines) if line.rstrip().endswith(header))
    start = lines[top].index(header)
    cells = []
    for line in lines[top + 2 :]:
        if not line.strip():
            break
        if len(line) <= start or line[start - 1 : start] not in (" ", ""):
            break
        cells.append(line[start:])
    return " ".join(" ".join(cells).split())


def test_quote_fits_with_the_chosen_offer_and_its_reasons(run_cli: Run) -> None:
    lines, words = fitted(run_cli, *QUOTE)
    assert "PER_GPU_H" in lines[1] and "AVAILABILITY_ZONE" not in lines[1]
    chosen = next(line for line in lines if line.startswith("1 (chosen)"))
    assert chosen.split()[2:6] == ["aws", "us-west-2", "p5.48xlarge", "8"]  # the instance type whole
    assert "$1.59" in chosen and "66.21" in chosen
    assert "took aws p5.48xlarge in us-west-2/usw2-az1 (spot) at $12.69/h ($1.59/GPU-h), score 66.21" in words
    assert (
        "13 removed by filters (minCPU 2, minMemoryGB 2, gpuCount 0, gpuType 7, maxInterruptionRate 2)"
        in words
    )


def test_quote_wide_shows_every_column(run_cli: Run) -> None:
    result = run_cli(*QUOTE, "--wide", env=TERMINAL)
    assert result.returncode == 0, result.stderr
    header = result.stdout.splitlines()[1]
    for name in ("AVAILABILITY_ZONE", "PER_H", "INTERRUPTION_RATE"):
        assert name in header
    chosen = next(line for line in result.stdout.splitlines() if line.startswith("1 (chosen)"))
    assert "usw2-az1" in chosen and "$12.6935" in chosen and "0.075" in chosen


def test_place_fits_with_every_node_and_why(run_cli: Run) -> None:
    lines, words = fitted(run_cli, *PLACE)
    assert row(lines, "* node-a")[2] == "prime" and row(lines, "* node-a")[-1] == "chosen"
    assert row(lines, "node-c")[-1] == "insufficient_gpus"
    assert row(lines, "node-e")[-1] == "tier_mismatch"
    assert "needs 4 unoccupied GPUs with 60 GB VRAM free each, has 0 of 8" in words
    assert "counting expiry penalty 0 x 30; utilization 0.375" in words
    assert "placed on node-a GPUs 0-3 (score 0.0000)" in words
    wide = run_cli(*PLACE, "--wide", env=TERMINAL)
    assert wide.returncode == 0 and "GPU_MODEL" in wide.stdout and "H100" in wide.stdout
    _, seed = fitted(run_cli, *PLACE, "--score", "seed")
    assert "placed on node-b GPUs 0-3 (score 0.8950)" in seed


def test_route_fits_with_launches_routes_and_unmet(run_cli: Run) -> None:
    lines, words = fitted(run_cli, *ROUTE)
    assert row(lines, "h100-spot")[1:4] == ["10", "1", "4"]  # priority, launch, max
    assert "launch 1 slice of h100-spot (slice_size 1) for 4 routed entries" in last_column(lines, "REASON")
    assert row(lines, "t-8")[1] == "insufficient_resources"
    message = last_column(lines, "MESSAGE")
    assert "one task needs 16 GPU, more than one VM of any matching group has" in message
    assert "IN_FLIGHT" not in words
    wide = run_cli(*ROUTE, "--wide", env=TERMINAL)
    assert wide.returncode == 0 and "IN_FLIGHT" in wide.stdout and "FAILED" in wide.stdout


def test_orderbook_fits_with_the_optimal_level_and_why(run_cli: Run) -> None:
    lines, words = fitted(run_cli, "orderbook", "--book", EXAMPLES / "book_seed000.json", "--nodes", "8")
    optimal = next(line for line in lines if "OPTIMAL" in line)
    assert optimal.split()[:4] == ["2", "$25.00", "128", "224"]
    assert "Optimal price: $25.00/GPU-h at sorted ask 2" in lines
    assert "slippage $0.25/GPU-h (1.04%), $1,552.00/h in all" in words
    assert "score 1.492 vs 1.477 for $26.00/GPU-h (sorted ask 4)" in words


@pytest.fixture
def small_trace() -> Iterator[tuple[Path, Path]]:
    """A synthetic trace under a short path (the header names the pods file, and a path is never cut)."""
    with tempfile.TemporaryDirectory(prefix="fit", dir="/tmp") as tmp:
        nodes, pods = generate(4, n_nodes=25, n_pods=200)
        write_nodes(Path(tmp) / "nodes.csv", nodes)
        write_pods(Path(tmp) / "pods.csv", pods)
        yield Path(tmp) / "nodes.csv", Path(tmp) / "pods.csv"


def test_simulate_fgd_fits_and_wide_adds_the_time(run_cli: Run, small_trace: tuple[Path, Path]) -> None:
    nodes, pods = small_trace
    args = ("simulate", "fgd", "--nodes", nodes, "--pods", pods, "--seeds", "3")
    lines, words = fitted(run_cli, *args)
    header = next(line for line in lines if line.startswith("SEED"))
    assert header.split()[-1] == "FRAG_AT_90" and "TIME_S" not in header
    seed, mean = row(lines, "3"), row(lines, "mean")
    assert len(seed) == len(mean) == 10 and seed[1:] == mean[1:]  # one seed: the mean is that run
    assert f"pods {pods}, inflated to 1.3x GPU capacity" in words
    wide = run_cli(*args, "--wide", env=TERMINAL)
    assert wide.returncode == 0 and "TIME_S" in wide.stdout


@pytest.mark.slow  # three Protocol B runs of every policy
def test_simulate_dynamic_fits_one_run_and_the_means(run_cli: Run) -> None:
    lines, words = fitted(run_cli, *DYNAMIC, "--window-days", "1", "--seed", "5")
    assert "10 jobs of 12 pods (6 FAST, 4 FLEX;" in words
    policies = [line.split()[0] for line in lines if line[:1].strip() and line.split()[0] in POLICY_NAMES]
    assert policies == [
        "scalar",
        "per-pod",
        "per-pod-fast",
        "karpenter",
        "ray-v2",
        "on-demand",
        "lower-bound",
    ]
    assert row(lines, "scalar")[1].startswith("$") and "cost against the lower bound: scalar" in words
    assert "PER_DELIVERED_GPU_H" not in words

    lines, words = fitted(
        run_cli, *DYNAMIC, "--window-days", "0.2", "--seeds", "5-6", "--policy", "scalar,per-pod,lower-bound"
    )
    assert "Protocol B: 2 runs (seeds [5, 6]" in words
    assert row(lines, "per-pod")[-1] in {"0/2", "1/2", "2/2"}  # SCALAR_WINS over both runs
    assert row(lines, "lower-bound")[2] == "1.00"  # X_BOUND of the bound itself


def test_simulate_dynamic_wide_shows_every_column(run_cli: Run) -> None:
    result = run_cli(
        *DYNAMIC, "--window-days", "0.2", "--seed", "5", "--policy", "scalar", "--wide", env=TERMINAL
    )
    assert result.returncode == 0, result.stderr
    for name in ("PER_DELIVERED_GPU_H", "IDLE_GPU_H", "FAST_P50_MIN", "FLEX_P95_MIN"):
        assert name in result.stdout


POLICY_NAMES = {"scalar", "per-pod", "per-pod-fast", "karpenter", "ray-v2", "on-demand", "lower-bound"}


def test_demo_fits_every_step(run_cli: Run) -> None:
    _, words = fitted(run_cli, "demo", "--examples", EXAMPLES)
    for seed in ("Seed 000", "Seed 001", "Seed 002", "Seed 003", "Seed 004"):
        assert seed in words
    assert f"$ scalar place --cluster {EXAMPLES / 'cluster_example.json'}" in words  # the path whole
    assert "$25.00/GPU-h at sorted ask 2" in words and "exit " not in words
