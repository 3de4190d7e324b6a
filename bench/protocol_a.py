"""Protocol A benchmark: every policy on the FGD paper's 17 pod lists, seeds 42..51, beside the published numbers.

    python -m bench.protocol_a [--lists all|default,...] [--policies all|a,b] [--seeds 42-51] [--jobs N]
                               [--no-cache] [--output BENCHMARKS.md] [--plot bench/plots/protocol_a.png]

Writes the section between ``<!-- protocol-a:start -->`` and ``<!-- protocol-a:end -->`` of BENCHMARKS.md
(creating the file and the markers when absent) and a PNG of the GPU allocation ratio against arrived GPU
demand on the default trace (the paper's Figure 9a). Each run's result is cached in ``bench/.cache/`` under
a hash of its trace files, its options and the simulator's code, so a rerun only computes what changed.
``--quick`` runs one seed of three policies on the default list (a smoke test).

Scalar's score runs twice: ``scalar`` with the prior learnt online from the pods arrived so far (what the
controller runs) and ``scalar-list`` with the prior of the whole pod list (reads the future). When both ran
on the default list the section compares them (mean over seeds of each, per-seed spread, the paired
difference) and every table says which prior its ``scalar`` rows use.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

from bench import report
from bench.report import replace_section

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / "data" / "traces"
TRACE_DIR = TRACES / "alibaba-gpu-v2023"
PUBLISHED_DIR = TRACES / "fgd-atc23"
NODES = TRACE_DIR / "openb_node_list_gpu_node.csv"
CACHE_DIR = REPO / "bench" / ".cache"
PLOT = REPO / "bench" / "plots" / "protocol_a.png"
BENCHMARKS = REPO / "BENCHMARKS.md"
START = "<!-- protocol-a:start -->"
END = "<!-- protocol-a:end -->"
CODE_PATHS = (
    "src/scalar/sim/traces.py",
    "src/scalar/sim/fragmentation.py",
    "src/scalar/sim/state.py",
    "src/scalar/sim/metrics.py",
    "src/scalar/sim/protocol_a.py",
    "src/scalar/sim/policies",
    "src/scalar/domain/packing_scalar.py",
)
LISTS = (
    "default",
    "cpu050",
    "cpu100",
    "cpu200",
    "cpu250",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "gpuspec10",
    "gpuspec20",
    "gpuspec25",
    "gpuspec33",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
)
POLICIES = (
    "scalar",
    "scalar-list",
    "fgd",
    "best-fit",
    "gpu-packing",
    "gpu-clustering",
    "dotprod",
    "random",
    "seed",
    "k8s-most-allocated",
    "k8s-least-allocated",
)
# The artifact's policy directories, as named in allo_summary.txt, and ours.
PUBLISHED_NAMES = {
    "01-Random": "random",
    "02-DotProd": "dotprod",
    "03-GpuClustering": "gpu-clustering",
    "04-GpuPacking": "gpu-packing",
    "05-BestFit": "best-fit",
    "06-FGD": "fgd",
}
POINTS = (80, 90, 100, 110, 120, 130)
SPEED_POLICIES = ("best-fit", "scalar", "scalar-list", "fgd")
# Scalar's score with each of its priors: the policy that runs it, and how the tables name the prior.
ONLINE, WHOLE_LIST = "scalar", "scalar-list"
PRIOR_OF = {ONLINE: "online prior", WHOLE_LIST: "whole-list prior"}
SPEED_REPEATS = 5
FGD_TARGET_S = 5.0  # the speed targets: fgd under 5 s per run, scalar within 2x best-fit
SCALAR_TARGET_X = 2.0
COLORS = {  # as Protocol B's plots where a policy is in both
    "scalar": "#1f77b4",
    "scalar-list": "#aec7e8",
    "fgd": "#d62728",
    "best-fit": "#2ca02c",
    "gpu-packing": "#9467bd",
    "gpu-clustering": "#8c564b",
    "dotprod": "#ff7f0e",
    "random": "#7f7f7f",
    "seed": "#17becf",
    "k8s-most-allocated": "#bcbd22",
    "k8s-least-allocated": "#e377c2",
}


# --- running, with a cache ----------------------------------------------------------------------------
def code_version() -> str:
    """A hash of the simulator code Protocol A runs on."""
    digest = hashlib.sha256()
    for rel in CODE_PATHS:
        root = REPO / rel
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*.py") if p.is_file())
        for path in files:
            digest.update(str(path.relative_to(REPO)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@lru_cache(maxsize=64)
def _file_hash(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def pods_file(name: str) -> Path:
    return TRACE_DIR / f"openb_pod_list_{name}.csv"


def cache_path(
    nodes: Path, pods: Path, policy: str, seed: int, tie_break: str, version: str, cache_dir: Path = CACHE_DIR
) -> Path:
    key = json.dumps([_file_hash(str(nodes)), _file_hash(str(pods)), policy, seed, tie_break, version])
    return cache_dir / f"protocol_a-{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


@lru_cache(maxsize=4)
def _nodes(path: str) -> list[Any]:
    from scalar.sim.traces import read_nodes

    return read_nodes(path)


@lru_cache(maxsize=4)
def _pods(path: str) -> list[Any]:
    from scalar.sim.traces import read_pods

    return read_pods(path)


def run_one(task: tuple[str, str, str, int, str]) -> dict[str, Any]:
    """One Protocol A run; ``task`` = (nodes file, pods file, policy, seed, tie-break)."""
    from scalar.sim.protocol_a import run_once

    nodes, pods, policy, seed, tie_break = task
    started = time.perf_counter()
    result = run_once(_nodes(nodes), _pods(pods), policy, seed, tie_break=tie_break)
    return {
        "policy": policy,
        "seed": seed,
        "tie_break": tie_break,
        "pods": result.pods,
        "failed_pods": result.failed_pods,
        "allocation": {str(x): v for x, v in result.allocation.items()},
        "fragmentation_at_90": result.fragmentation_at_90,
        "elapsed_s": round(time.perf_counter() - started, 4),
    }


def run_all(
    tasks: Sequence[tuple[str, str, str, int, str]],
    *,
    jobs: int,
    use_cache: bool,
    cache_dir: Path = CACHE_DIR,
) -> list[dict[str, Any]]:
    """Results of ``tasks`` in order, computing only those not in the cache."""
    version = code_version()
    paths = [cache_path(Path(t[0]), Path(t[1]), t[2], t[3], t[4], version, cache_dir) for t in tasks]
    results: list[dict[str, Any] | None] = [
        json.loads(p.read_text()) if use_cache and p.exists() else None for p in paths
    ]
    todo = [i for i, r in enumerate(results) if r is None]
    if todo:
        cache_dir.mkdir(parents=True, exist_ok=True)
        print(
            f"protocol A: {len(todo)} runs to compute ({len(tasks) - len(todo)} cached), {jobs} jobs",
            file=sys.stderr,
        )
        pending = [tasks[i] for i in todo]
        with ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else _InProcess() as pool:
            for done, (i, result) in enumerate(zip(todo, pool.map(run_one, pending), strict=True), start=1):
                paths[i].write_text(json.dumps(result))
                results[i] = result
                if done % 20 == 0 or done == len(todo):
                    print(f"  {done}/{len(todo)}", file=sys.stderr)
    return [r for r in results if r is not None]


def measure_speed(nodes: Path, pods: Path, policies: Sequence[str]) -> dict[str, float]:
    """Best-of-N wall time of one run per policy, interleaved, in this process (never cached)."""
    from scalar.sim.protocol_a import run_once

    node_list, pod_list = _nodes(str(nodes)), _pods(str(pods))
    best = {p: float("inf") for p in policies}
    for _ in range(SPEED_REPEATS):
        for policy in policies:
            started = time.perf_counter()
            run_once(node_list, pod_list, policy, 42)
            best[policy] = min(best[policy], time.perf_counter() - started)
    return best


class _InProcess:
    """``ProcessPoolExecutor``'s ``map`` without processes (for ``--jobs 1``)."""

    def __enter__(self) -> _InProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, fn: Any, items: Sequence[Any]) -> Any:
        return map(fn, items)


# --- published numbers ----------------------------------------------------------------------------------
def published() -> tuple[dict[tuple[str, str], dict[int, float]], dict[str, float]]:
    """(allocation means at 80..130 per (list, policy), fragmentation ratio at 90% per policy, default list)."""
    alloc: dict[tuple[str, str], dict[int, float]] = {}
    line_re = re.compile(r"^openb_pod_list_(\S+)\s+(\d\d-\S+)\s+n=\d+\s+(.*)$")
    for line in (PUBLISHED_DIR / "allo_summary.txt").read_text().splitlines():
        m = line_re.match(line)
        if m and m.group(2) in PUBLISHED_NAMES:
            values = dict(re.findall(r"(\d+):\s+([\d.]+)", m.group(3)))
            alloc[(m.group(1), PUBLISHED_NAMES[m.group(2)])] = {int(k): float(v) for k, v in values.items()}
    frag: dict[str, float] = {}
    text = (PUBLISHED_DIR / "frag_summary.txt").read_text().split("analysis_frag_discrete.csv")[0]
    for line in text.splitlines():
        m = line_re.match(line)
        if m and m.group(1) == "default" and m.group(2) in PUBLISHED_NAMES:
            values = dict(re.findall(r"(\d+):\s+([\d.]+)", m.group(3)))
            frag[PUBLISHED_NAMES[m.group(2)]] = float(values["90"])
    return alloc, frag


# --- summaries ------------------------------------------------------------------------------------------
def mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.fmean(present), 2) if present else None


def group(results: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in results:
        out.setdefault((r["list"], r["policy"], r["tie_break"]), []).append(r)
    return out


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def machine() -> str:
    return report.machine(with_numpy=True)


def labelled(policy: str) -> str:
    """``policy`` with the prior it runs on, for Scalar's score (``scalar (online prior)``)."""
    return f"{policy} ({PRIOR_OF[policy]})" if policy in PRIOR_OF else policy


def at_130(runs: Sequence[dict[str, Any]]) -> dict[int, float]:
    """Allocation at 130% arrived per seed."""
    return {r["seed"]: r["allocation"]["130"] for r in runs if r["allocation"].get("130") is not None}


def spread(values: Sequence[float]) -> str:
    """``min-max`` of ``values``."""
    return f"{min(values):.2f}-{max(values):.2f}"


def signed_spread(values: Sequence[float]) -> str:
    """``min to max`` of ``values``, signed (differences)."""
    return f"{min(values):+.2f} to {max(values):+.2f}"


def stdev(values: Sequence[float]) -> str:
    """The sample standard deviation of ``values`` (``-`` for fewer than two)."""
    return f"{statistics.stdev(values):.3f}" if len(values) > 1 else "-"


def prior_comparison(
    groups: dict[tuple[str, str, str], list[dict[str, Any]]],
    lists: Sequence[str],
    speed: dict[str, float] | None,
) -> list[str]:
    """The two priors of Scalar's score on the default trace: each one's mean over seeds and per-seed
    spread, and the per-seed (paired) difference; then the difference on every other list that ran."""
    from scalar.domain.packing_scalar import HALF_LIFE, RELEARN_EVERY

    online = groups.get(("default", ONLINE, "name"), [])
    whole = groups.get(("default", WHOLE_LIST, "name"), [])
    lines = [
        "### Scalar's score with its two priors: online and whole list",
        "",
        f"`{ONLINE}` is the controller's packer (`scalar.domain.packing_scalar`; `[controller] packing_score = "
        '"scalar"`, the default; `scalar simulate fgd --policy scalar` runs the same code, and '
        "`tests/sim/test_scalar_identity.py` checks that the controller and this policy put every job of a "
        "stream on the same node and GPUs). It learns its prior (typical pods, CPU and memory per GPU, per-GPU "
        "size mix) online from the pods that have arrived (every arriving pod, including those that then fit "
        f"nowhere, as the controller counts every submitted job), each weighing less by half every {HALF_LIFE:,} "
        f"pods, relearnt after 1, 2, 4, ... {RELEARN_EVERY} pods and every {RELEARN_EVERY} after that: what the "
        f"controller can know (the **online prior**). `{WHOLE_LIST}` is the same score with the prior read from "
        "the whole pod list up front, future pods included (the **whole-list prior**); it is for comparison "
        "only, the controller never reads the future.",
        "",
    ]
    a, b = at_130(online), at_130(whole)
    paired = sorted(set(a) & set(b))
    if not paired:
        return lines
    diffs = [b[s] - a[s] for s in paired]
    lines += [
        f"Default trace, GPU allocation ratio (%) at 130% arrived, seeds {seeds_text(paired)}:",
        "",
        "| prior | policy | mean | per seed, min-max | std. dev. | failed pods | frag. ratio at 90% |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, runs, values in ((ONLINE, online, a), (WHOLE_LIST, whole, b)):
        chosen = [values[s] for s in paired]
        kept = [r for r in runs if r["seed"] in values]
        lines.append(
            f"| {PRIOR_OF[name]} | `{name}` | {fmt(mean(chosen))} | {spread(chosen)} | {stdev(chosen)} "
            f"| {fmt(mean([r['failed_pods'] for r in kept]), 0)} "
            f"| {fmt(mean([r['fragmentation_at_90'] for r in kept]))} |"
        )
    ahead = sum(1 for d in diffs if d > 0)
    behind = sum(1 for d in diffs if d < 0)
    lines += [
        f"| whole list - online | | {statistics.fmean(diffs):+.2f} | {signed_spread(diffs)} | {stdev(diffs)} "
        "| | |",
        "",
        f"The last row is the per-seed difference (same seed, same pod order; computed before rounding): "
        f"reading the future is worth "
        f"{statistics.fmean(diffs):+.2f} points on average; the whole-list prior is ahead on {ahead} of "
        f"{len(diffs)} seeds, behind on {behind}, level on {len(diffs) - ahead - behind}.",
    ]
    if speed and ONLINE in speed and WHOLE_LIST in speed and speed[WHOLE_LIST] > 0:
        lines[-1] += (
            f" The online prior costs {speed[ONLINE] / speed[WHOLE_LIST]:.1f}x the time per run of the "
            "whole-list prior (Speed, below), mostly in its relearnings (each rebuilds the fragmentation tables "
            "and rescores the cache)."
        )
    others = []
    for name in lists:
        x = at_130(groups.get((name, ONLINE, "name"), []))
        y = at_130(groups.get((name, WHOLE_LIST, "name"), []))
        both = sorted(set(x) & set(y))
        if both:
            others.append((statistics.fmean(y[s] - x[s] for s in both), name))
    if len(others) > 1:
        low, high = min(others), max(others)
        lines.append("")
        lines.append(
            f"Over the {len(others)} pod lists (table below; per list, the mean of the per-seed differences), "
            "whole list - online is "
            f"{statistics.fmean(d for d, _ in others):+.2f} on average, from {low[0]:+.2f} (`{low[1]}`) to "
            f"{high[0]:+.2f} (`{high[1]}`)."
        )
    lines.append("")
    return lines


def seeds_text(seeds: Sequence[int]) -> str:
    """``42..51`` for a run of consecutive seeds, else ``42,44``."""
    if len(seeds) > 1 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}..{seeds[-1]}"
    return ",".join(map(str, seeds))


def render(
    results: Sequence[dict[str, Any]],
    *,
    command: str,
    seeds: Sequence[int],
    lists: Sequence[str],
    policies: Sequence[str],
    speed: dict[str, float] | None = None,
    plot_name: str = "bench/plots/protocol_a.png",
) -> str:
    pub_alloc, pub_frag = published()
    groups = group(results)
    n = len(seeds)
    seed_text = seeds_text(seeds)
    scalar_rows = [p for p in policies if p in PRIOR_OF]
    lines = [
        "## Protocol A: the FGD paper's static benchmark (Alibaba openb trace)",
        "",
        f"Command: `{command}`. Machine: {machine()}.",
        "",
        "1,213 GPU nodes (6,212 GPUs); each pod list shuffled with the seed, inflated to 1.3x the cluster's GPUs, "
        "pods arrive one by one and never leave, failures are dropped (docs/simulator.md). Our numbers are means "
        f"over seeds {seed_text} (`numpy.random.default_rng(seed)`); published ones are the artifact's means over "
        "seeds 42..51 (`fgd-atc23/allo_summary.txt`). Ties: smallest node name, as the artifact.",
        "",
    ]
    if "default" in lists:
        lines += [
            "### Default trace: GPU allocation ratio (%) at arrived GPU demand (% of capacity)",
            "",
        ]
        if scalar_rows:
            lines += [
                "Scalar's score: "
                + ", ".join(f"`{p}` with the {PRIOR_OF[p]}" for p in scalar_rows)
                + " (next section).",
                "",
            ]
        lines += [
            "| policy | "
            + " | ".join(f"{x}%" for x in POINTS)
            + " | published 130% | frag. ratio at 90% (published) "
            "| failed pods | time per run (s) |",
            "|---|" + "---:|" * (len(POINTS) + 4),
        ]
        for policy in policies:
            runs = groups.get(("default", policy, "name"), [])
            if not runs:
                continue
            pub = pub_alloc.get(("default", policy), {})
            frag = mean([r["fragmentation_at_90"] for r in runs])
            frag_text = fmt(frag) + (f" ({pub_frag[policy]:.2f})" if policy in pub_frag else "")
            lines.append(
                f"| {policy} | "
                + " | ".join(fmt(mean([r["allocation"][str(x)] for r in runs])) for x in POINTS)
                + f" | {fmt(pub.get(130))} | {frag_text} | {fmt(mean([r['failed_pods'] for r in runs]), 0)} "
                f"| {statistics.median(r['elapsed_s'] for r in runs):.2f} |"
            )
        lines.append("")
        if ONLINE in policies or WHOLE_LIST in policies:
            lines += prior_comparison(groups, lists, speed)
        tie_rows = [p for p in ("fgd", "best-fit", "scalar") if ("default", p, "random") in groups]
        if tie_rows:
            lines += [
                "Tie-break matters: the same runs with `--tie-break random` (uniform among the top nodes at every "
                "decision) instead of the artifact's smallest name:",
                "",
                "| policy | 130%, smallest name | 130%, random |",
                "|---|---:|---:|",
            ]
            for policy in tie_rows:
                by_name = mean([r["allocation"]["130"] for r in groups.get(("default", policy, "name"), [])])
                by_random = mean([r["allocation"]["130"] for r in groups[("default", policy, "random")]])
                lines.append(f"| {labelled(policy)} | {fmt(by_name)} | {fmt(by_random)} |")
            lines.append("")
    shown = [p for p in ("scalar", "scalar-list", "fgd", "best-fit") if p in policies]
    if shown:
        lines += [
            f"### All {len(lists)} pod lists: GPU allocation ratio (%) at 130% arrived",
            "",
            "| pod list | published FGD | published BestFit | "
            + " | ".join(f"ours {labelled(p)}" for p in shown)
            + (" | scalar (online prior) - published FGD |" if "scalar" in shown else " |"),
            "|---|---:|---:|" + "---:|" * len(shown) + ("---:|" if "scalar" in shown else ""),
        ]
        for name in lists:
            row = [
                name,
                fmt(pub_alloc.get((name, "fgd"), {}).get(130)),
                fmt(pub_alloc.get((name, "best-fit"), {}).get(130)),
            ]
            ours = {
                p: mean([r["allocation"]["130"] for r in groups.get((name, p, "name"), [])]) for p in shown
            }
            row += [fmt(ours[p]) for p in shown]
            if "scalar" in shown:
                pub_fgd = pub_alloc.get((name, "fgd"), {}).get(130)
                diff = None if ours["scalar"] is None or pub_fgd is None else ours["scalar"] - pub_fgd
                row.append("-" if diff is None else f"{diff:+.2f}")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    if speed and "best-fit" in speed:
        base = speed["best-fit"]
        lines += [
            "### Speed: one full run on the default trace (about 10,800 pods, seed 42)",
            "",
            "| policy | seconds per run | x best-fit |",
            "|---|---:|---:|",
        ]
        for policy, seconds in speed.items():
            lines.append(f"| {labelled(policy)} | {seconds:.2f} | {seconds / base:.2f} |")
        targets = []
        if "fgd" in speed:
            met = "met" if speed["fgd"] < FGD_TARGET_S else "missed"
            targets.append(f"fgd under {FGD_TARGET_S:g} s ({met})")
        for policy in (ONLINE, WHOLE_LIST):
            if policy in speed:
                met = "met" if speed[policy] <= SCALAR_TARGET_X * base else "missed"
                targets.append(f"{labelled(policy)} no slower than {SCALAR_TARGET_X:g}x best-fit ({met})")
        lines += [
            "",
            f"Best of {SPEED_REPEATS} sequential runs each, wall clock, on the machine above (shared with other "
            "work while measured). Targets: " + "; ".join(targets) + ".",
            "",
        ]
    lines.append(
        f"Plot: `{plot_name}` (allocation ratio against arrived %, default trace, mean of {n} seeds)."
    )
    return "\n".join(lines)


def write_section(path: Path, body: str) -> None:
    """Replace the Protocol A section of ``path`` (or append it), keeping everything else."""
    replace_section(path, f"{START}\n{body}\n{END}", START, END)


# --- the plot ---------------------------------------------------------------------------------------------
X_RANGE = (60, 130)
Y_RANGE = (80.0, 100.0)
PLOT_SIZE = (9.0, 5.6)  # inches (``report.DPI`` pixels each)


def plot(curves: dict[str, dict[int, float | None]], path: Path) -> None:
    """Allocation ratio (y, 80..100%) against arrived demand (x, 60..130%), one line per policy (the
    paper's Figure 9a); the legend gives each policy's value at 130%."""
    (x_min, x_max), (y_min, y_max) = X_RANGE, Y_RANGE
    with report.figure(path, PLOT_SIZE) as ax:
        for policy, curve in curves.items():
            points = [(x, v) for x, v in sorted(curve.items()) if v is not None and x >= x_min]
            last = points[-1][1] if points else None
            ax.plot(
                [x for x, _ in points],
                [v for _, v in points],
                color=COLORS.get(policy, "black"),
                linewidth=1.5,
                label=f"{policy} {fmt(last)}",
            )
        ax.set_xlim(x_min, x_max)
        ax.set_ylim(y_min, y_max)
        ax.set_xticks(range(x_min, x_max + 1, 10))
        ax.set_yticks(range(int(y_min), int(y_max) + 1, 2))
        ax.set_xlabel("arrived GPU demand (% of GPU capacity)")
        ax.set_ylabel("GPU allocation ratio (%)")
        ax.set_title("GPU allocation ratio against arrived GPU demand (default trace)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, title="at 130%", loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)


# --- command line -----------------------------------------------------------------------------------------
def parse_seeds(text: str) -> list[int]:
    from scalar.cli.simulate import parse_seeds as parse

    return parse(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lists", default="all", help="pod lists (default, cpu050, ...) or 'all'")
    parser.add_argument("--policies", default="all", help="policies or 'all'")
    parser.add_argument("--seeds", default="42-51")
    parser.add_argument("--nodes", type=Path, default=NODES)
    parser.add_argument(
        "--pods-dir", type=Path, default=TRACE_DIR, help="directory of openb_pod_list_<name>.csv"
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--no-tie-break-study", action="store_true", help="skip the --tie-break random runs")
    parser.add_argument(
        "--quick", action="store_true", help="one seed of scalar, fgd and best-fit on 'default'"
    )
    parser.add_argument("--no-speed", action="store_true", help="skip the sequential timing runs")
    parser.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    parser.add_argument("--output", type=Path, default=BENCHMARKS)
    parser.add_argument("--plot", type=Path, default=PLOT)
    args = parser.parse_args(argv)

    lists = list(LISTS) if args.lists == "all" else args.lists.split(",")
    policies = list(POLICIES) if args.policies == "all" else args.policies.split(",")
    seeds = parse_seeds(args.seeds)
    if args.quick:
        lists, policies, seeds = ["default"], ["scalar", "fgd", "best-fit"], seeds[:1]
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        parser.error(f"unknown policies: {', '.join(unknown)}")
    tasks: list[tuple[str, str, str, int, str]] = []
    labels: list[str] = []
    for name in lists:
        pods = args.pods_dir / f"openb_pod_list_{name}.csv"
        for policy in policies:
            for seed in seeds:
                tasks.append((str(args.nodes), str(pods), policy, seed, "name"))
                labels.append(name)
    if "default" in lists and not args.no_tie_break_study and not args.quick:
        for policy in ("fgd", "best-fit", "scalar"):
            if policy in policies:
                for seed in seeds:
                    tasks.append(
                        (
                            str(args.nodes),
                            str(args.pods_dir / "openb_pod_list_default.csv"),
                            policy,
                            seed,
                            "random",
                        )
                    )
                    labels.append("default")
    results = run_all(tasks, jobs=max(1, args.jobs), use_cache=not args.no_cache, cache_dir=args.cache_dir)
    for label, result in zip(labels, results, strict=True):
        result["list"] = label
    speed = None
    if "default" in lists and not args.no_speed and not args.quick:
        timed = [p for p in SPEED_POLICIES if p in policies]
        speed = (
            measure_speed(args.nodes, args.pods_dir / "openb_pod_list_default.csv", timed) if timed else None
        )
    command = (
        "python -m bench.protocol_a" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    )
    try:
        plot_name = str(args.plot.resolve().relative_to(REPO))
    except ValueError:
        plot_name = str(args.plot)
    body = render(
        results,
        command=command.strip(),
        seeds=seeds,
        lists=lists,
        policies=policies,
        speed=speed,
        plot_name=plot_name,
    )
    write_section(args.output, body)
    if "default" in lists:
        groups = group(results)
        curves = {}
        for policy in policies:
            runs = groups.get(("default", policy, "name"), [])
            if runs:
                curves[policy] = {x: mean([r["allocation"][str(x)] for r in runs]) for x in range(0, 131)}
        plot(curves, args.plot)
    print(f"wrote {args.output} and {args.plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
