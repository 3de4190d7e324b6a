"""``scalar simulate``: replay GPU cluster traces through Scalar's placement policies.

``scalar simulate fgd`` runs Protocol A, the FGD paper's static benchmark, on an Alibaba
cluster-trace-gpu-v2023 node list and pod list (docs/simulator.md). ``scalar simulate dynamic`` (Protocol
B) is added by ``scalar.cli.simulate_dynamic`` when present.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from scalar.cli.errors import fail, user_errors
from scalar.cli.output import Col, explain, make_table, print_json, show, wide_option
from scalar.sim.metrics import REPORTED_POINTS
from scalar.sim.policies import DEFAULT_POLICY, POLICIES
from scalar.sim.policies.base import TIE_BREAKS
from scalar.sim.protocol_a import DEFAULT_RATIO, RNG_NAME, Summary, run_seeds
from scalar.sim.traces import checkout_trace_dir, read_nodes, read_pods

TRACE_DIR = checkout_trace_dir()
DEFAULT_NODES = TRACE_DIR / "openb_node_list_gpu_node.csv" if TRACE_DIR else None
DEFAULT_PODS = TRACE_DIR / "openb_pod_list_default.csv" if TRACE_DIR else None
DEFAULT_NOTE = "data/traces/alibaba-gpu-v2023/ of a source checkout"
DEFAULT_SEEDS = "42-51"
MAX_SEEDS = 1000

TIE_BREAK_RULES = {
    "name": (
        "smallest node name among the top scores, as the FGD artifact's Kubernetes fork; like the artifact, "
        "each run prefixes node names with a seeded random permutation, so ties follow a random node order "
        "fixed for the run"
    ),
    "random": "uniformly random among the top scores, drawn at every decision",
}

simulate_app = typer.Typer(
    name="simulate",
    help="Replay GPU cluster traces through Scalar's placement policies (docs/simulator.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def parse_seeds(text: str) -> list[int]:
    """``"42-51"`` -> 42..51, ``"42,43"`` -> [42, 43]; items may mix (``"1-3,7"``). Raises ``ValueError``."""
    seeds: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"empty item in {text!r}")
        low, sep, high = item.partition("-")
        try:
            first = int(low)
            last = int(high) if sep else first
        except ValueError:
            raise ValueError(f"{item!r} is not a seed or a range of seeds (like 42 or 42-51)") from None
        if first < 0 or last < 0:
            raise ValueError(f"{item!r}: seeds are whole numbers >= 0")
        if last < first:
            raise ValueError(f"{item!r}: a range goes from low to high (like 42-51)")
        seeds.extend(range(first, last + 1))
        if len(seeds) > MAX_SEEDS:
            raise ValueError(f"more than {MAX_SEEDS} seeds")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{text!r} lists a seed twice")
    return seeds


def _trace_path(given: Path | None, default: Path | None, option: str) -> Path:
    if given is not None:
        return given
    if default is not None and default.exists():
        return default
    fail(
        f"no {option} given, and the default trace ({DEFAULT_NOTE}) is not here: the traces ship with the "
        f"source repository, not the installed package; pass {option} PATH (an Alibaba "
        "cluster-trace-gpu-v2023 CSV), or run from a clone of the repository"
    )


def summary_json(
    summary: Summary, *, nodes: int, gpus: int, nodes_file: Path, pods_file: Path
) -> dict[str, Any]:
    """The JSON shape of ``scalar simulate fgd --json``."""
    return {
        "protocol": "A",
        "policy": summary.policy,
        "pods": summary.pods,
        "seeds": summary.seeds,
        "tie_break": summary.tie_break,
        "tie_break_rule": TIE_BREAK_RULES[summary.tie_break],
        "rng": RNG_NAME,
        "inflation": DEFAULT_RATIO,
        "nodes": nodes,
        "gpus": gpus,
        "nodes_file": str(nodes_file),
        "pods_file": str(pods_file),
        "allocation_ratio": summary.reported,
        "failed_pods": summary.failed_pods,
        "fragmentation_ratio_at_90": summary.fragmentation_at_90,
        "per_seed": [
            {
                "seed": run.seed,
                "pods": run.pods,
                "failed_pods": run.failed_pods,
                "tuning": run.tuning,
                "allocation_ratio": {str(x): run.allocation.get(x) for x in REPORTED_POINTS},
                "fragmentation_ratio_at_90": run.fragmentation_at_90,
                "elapsed_s": round(run.elapsed_s, 3),
            }
            for run in summary.runs
        ],
    }


COLUMNS = [
    Col("seed", "key"),
    Col("pods", "num"),
    Col("failed", "num"),
    *[Col(f"at_{x}", "num") for x in REPORTED_POINTS],
    Col("frag_at_90", "num"),
    Col("time_s", "num", wide=True),
]


def _print_table(data: dict[str, Any], wide: bool) -> None:
    explain(
        f"Protocol A (FGD artifact): policy {data['policy']} on {data['nodes']} nodes / {data['gpus']} GPUs, "
        f"pods {data['pods_file']}, inflated to {data['inflation']}x GPU capacity, RNG {data['rng']}"
    )
    explain(f"Tie-break: {data['tie_break']} ({data['tie_break_rule']}).")
    rows: list[list[Any]] = []
    for run in data["per_seed"]:
        alloc = run["allocation_ratio"]
        rows.append(
            [
                run["seed"],
                run["pods"],
                run["failed_pods"],
                *[alloc[str(x)] for x in REPORTED_POINTS],
                run["fragmentation_ratio_at_90"],
                run["elapsed_s"],
            ]
        )
    mean = data["allocation_ratio"]
    rows.append(
        [
            "mean",
            data["pods"],
            data["failed_pods"],
            *[mean[str(x)] for x in REPORTED_POINTS],
            data["fragmentation_ratio_at_90"],
            None,
        ]
    )
    title = "GPU allocation ratio (%) at arrived GPU demand (% of capacity)"
    show(make_table(COLUMNS, rows, title=title, wide=wide))


@simulate_app.command("fgd")
@user_errors
def fgd_command(
    nodes: Path | None = typer.Option(
        None, "--nodes", help=f"Node list CSV (sn,cpu_milli,memory_mib,gpu,model). Default: {DEFAULT_NOTE}"
    ),
    pods: Path | None = typer.Option(
        None,
        "--pods",
        help=f"Pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]). Default: {DEFAULT_NOTE}",
    ),
    policy: str = typer.Option(DEFAULT_POLICY, "--policy", help=f"One of: {', '.join(POLICIES)}."),
    seeds: str = typer.Option(DEFAULT_SEEDS, "--seeds", help="A range (42-51) or a list (42,43)."),
    tie_break: str = typer.Option("name", "--tie-break", help="name (as the artifact) or random."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    wide: bool = wide_option(),
) -> None:
    """Protocol A: the FGD paper's static benchmark (pods arrive until 1.3x GPU capacity, never leave)."""
    if policy not in POLICIES:
        fail(f"unknown policy {policy!r}; use one of: {', '.join(POLICIES)}")
    if tie_break not in TIE_BREAKS:
        fail(f"unknown tie-break {tie_break!r}; use one of: {', '.join(TIE_BREAKS)}")
    try:
        seed_list = parse_seeds(seeds)
    except ValueError as exc:
        fail(f"--seeds: {exc}")
    nodes_path = _trace_path(nodes, DEFAULT_NODES, "--nodes")
    pods_path = _trace_path(pods, DEFAULT_PODS, "--pods")
    node_list = read_nodes(nodes_path)
    pod_list = read_pods(pods_path)
    gpus = sum(n.gpus for n in node_list)
    if gpus == 0:
        fail(f"{nodes_path}: no node has a GPU; Protocol A measures GPU allocation")

    if as_json:
        summary = run_seeds(node_list, pod_list, policy, seed_list, tie_break=tie_break)
    else:
        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            transient=True,
        )
        with bar:
            task = bar.add_task(f"{policy}, seed {seed_list[0]}", total=len(seed_list))

            def progress(index: int, done: int, total: int) -> None:
                bar.update(
                    task,
                    completed=index + done / total,
                    description=f"{policy}, seed {seed_list[index]}",
                )

            summary = run_seeds(
                node_list, pod_list, policy, seed_list, tie_break=tie_break, progress=progress
            )
    data = summary_json(summary, nodes=len(node_list), gpus=gpus, nodes_file=nodes_path, pods_file=pods_path)
    if as_json:
        print_json(data)
    else:
        _print_table(data, wide)


def _register_dynamic() -> None:
    """Protocol B's ``simulate dynamic`` lives in its own module; hook it up when it is there."""
    if importlib.util.find_spec("scalar.cli.simulate_dynamic") is None:
        return
    from scalar.cli.simulate_dynamic import register_dynamic

    register_dynamic(simulate_app)


_register_dynamic()


def register(app: typer.Typer) -> None:
    app.add_typer(simulate_app, name="simulate")
