"""Protocol B benchmark: cost and waits of Scalar and the autoscalers it is measured against, over many runs.

    python -m bench.protocol_b [--seeds 42-46] [--start-day 117,127,137] [--window-days 7] [--jobs 2]
                               [--sweep-scales 0,1,3] [--gpuspec] [--no-cache]

Three parts, each ``scalar simulate dynamic --json`` with every policy:

1. the **matrix**: every seed x every window of the default pod list, at preemption scale 1;
2. the **preemption sweep**: the first seed and window at every scale of ``--sweep-scales``;
3. with ``--gpuspec``, the matrix again on ``openb_pod_list_gpuspec33.csv`` (pods restricted by model).

It writes the section between ``<!-- protocol-b:start -->`` and ``<!-- protocol-b:end -->`` of BENCHMARKS.md
(never touching the rest) and three plots (matplotlib): cost against FAST p99 wait per policy with its
spread over runs, cumulative cost over time, and where the money went. Each run is cached in
``bench/.cache/`` under a hash of the pod file, its options and the code that decides it, so a rerun with
nothing changed only rewrites the section. The defaults are the full matrix (5 seeds x 3 windows of 7 days
and ``--gpuspec``: roughly one core-hour); the section says which command produced it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import report
from bench.report import replace_section
from scalar.domain.money import usd_fixed

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / "data" / "traces" / "alibaba-gpu-v2023"
DEFAULT_PODS = TRACES / "openb_pod_list_default.csv"
GPUSPEC_PODS = TRACES / "openb_pod_list_gpuspec33.csv"
CACHE_DIR = REPO / "bench" / ".cache"
PLOTS = REPO / "bench" / "plots"
BENCHMARKS = REPO / "BENCHMARKS.md"
START = "<!-- protocol-b:start -->"
END = "<!-- protocol-b:end -->"
CODE_PATHS = (
    "src/scalar/sim/dynamic",
    "src/scalar/sim/protocol_b.py",
    "src/scalar/sim/protocol_b_runs.py",
    "src/scalar/sim/traces.py",
    "src/scalar/engine",
    "src/scalar/domain",
    "src/scalar/providers/builtin",
    "src/scalar/providers/catalog",
    "src/scalar/providers/sim.py",
    "src/scalar/providers/base.py",
)
COLORS = {
    "scalar": "#1f77b4",
    "per-pod": "#9467bd",
    "per-pod-fast": "#8c564b",
    "karpenter": "#ff7f0e",
    "ray-v2": "#2ca02c",
    "on-demand": "#d62728",
    "lower-bound": "#7f7f7f",
}
BASELINES = ("per-pod", "per-pod-fast", "karpenter", "ray-v2", "on-demand")


def code_version() -> str:
    """A hash of every file under ``CODE_PATHS`` (sources and the packaged price data)."""
    digest = hashlib.sha256()
    for rel in CODE_PATHS:
        root = REPO / rel
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if "__pycache__" in path.parts:
                continue
            digest.update(str(path.relative_to(REPO)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(pods: Path, options: dict[str, Any], version: str) -> str:
    digest = hashlib.sha256(Path(pods).read_bytes())
    digest.update(json.dumps(options, sort_keys=True).encode())
    digest.update(version.encode())
    return digest.hexdigest()[:24]


def run_many(
    pods: Path, runs: list[dict[str, Any]], common: dict[str, Any], jobs: int, *, use_cache: bool = True
) -> list[dict[str, Any]]:
    """Each run's one-run JSON (``runs``: seed, start_day, preemption_scale), from the cache when nothing
    changed; the others run in ``jobs`` processes."""
    from scalar.domain.tier import Tier
    from scalar.sim.dynamic.workload import WindowOptions
    from scalar.sim.protocol_b import POLICIES
    from scalar.sim.protocol_b_runs import RunSpec, run_matrix

    version = code_version()
    paths = [CACHE_DIR / f"protocol_b-{cache_key(pods, {**common, **r}, version)}.json" for r in runs]
    todo = [i for i, p in enumerate(paths) if not (use_cache and p.exists())]
    if todo:
        window = WindowOptions(
            start_day=None,
            window_days=common["window_days"],
            compress=common["compress"],
            burstable=Tier.FLEX,
            checkpoint_minutes=common["checkpoint_minutes"],
        )
        specs = [RunSpec(runs[i]["seed"], runs[i]["start_day"], runs[i]["preemption_scale"]) for i in todo]

        def done(spec: RunSpec, policy: str) -> None:
            print(
                f"   seed {spec.seed} day {spec.start_day:g} scale {spec.preemption_scale:g}: {policy}",
                flush=True,
            )

        results = run_matrix(pods, window, specs, POLICIES, jobs=jobs, done=done)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        for i, result in zip(todo, results, strict=True):
            paths[i].write_text(json.dumps(result.to_dict(), indent=1))
    return [dict(json.loads(p.read_text())) for p in paths]


def machine() -> str:
    return report.machine(with_numpy=False)


def _min(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _money(value: float | None) -> str:
    return "-" if value is None else usd_fixed(value, 0)


def summary_table(summary: dict[str, Any]) -> list[str]:
    lines = [
        "| policy | cost (mean ± sd) | x LP bound | FAST p50 / p99 (min) | FAST SLO | FLEX p50 / p99 (min) "
        "| FLEX SLO | paid GPU-h | interruptions / GPU-h | preempted GPU-h | killed runs | timed out | Scalar wins |",
        "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in summary["policies"]:
        f, x, w = p["fast"], p["flex"], p.get("wins")
        ratio = p["ratio_to_lower_bound"]
        ipg = p["interruptions_per_gpu_hour"]
        wins = "-" if w is None else f"{w['scalar_wins']} / {w['runs']}"
        lines.append(
            f"| {p['policy']} | {_money(p['cost'])} ± {_money(p['cost_sd'])} "
            f"| {'-' if ratio is None else f'{ratio:.2f}'} "
            f"| {_min(f['wait_p50_s'])} / {_min(f['wait_p99_s'])} | {_pct(f['slo_attainment'])} "
            f"| {_min(x['wait_p50_s'])} / {_min(x['wait_p99_s'])} | {_pct(x['slo_attainment'])} "
            f"| {p['paid_gpu_hours']:,.0f} | {'-' if ipg is None else f'{ipg:.4f}'} "
            f"| {p['preempted_gpu_hours']:,.0f} | {p['killed_runs']} | {p['timed_out_runs']} "
            f"| {wins} |"
        )
    return lines


def runs_table(runs: list[dict[str, Any]]) -> list[str]:
    names = [p["policy"] for p in runs[0]["policies"]]
    lines = [
        "| seed | start day | scale | " + " | ".join(names) + " |",
        "|---|---:|---:|" + "---:|" * len(names),
    ]
    for r in runs:
        by = {p["policy"]: p for p in r["policies"]}
        cells = [
            f"{_money(by[n]['cost'])} / {_min(by[n]['fast']['wait_p99_s'])}"
            + (" (timed out)" if by[n]["timed_out"] else "")
            for n in names
        ]
        lines.append(
            f"| {r['seed']} | {r['window']['start_day']:g} | {r['preemption_scale']:g} | "
            + " | ".join(cells)
            + " |"
        )
    return lines


def sweep_table(runs: list[dict[str, Any]]) -> list[str]:
    """One row per policy and preemption scale (the sweep is one window: nothing to average)."""
    lines = [
        "| policy | scale | cost | x LP bound | FAST p99 (min) | FLEX p99 (min) | interruptions / GPU-h "
        "| killed runs | preempted GPU-h | timed out |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    names = [p["policy"] for p in runs[0]["policies"]]
    for name in names:
        for r in sorted(runs, key=lambda r: r["preemption_scale"]):
            p = next(q for q in r["policies"] if q["policy"] == name)
            ipg = p["interruptions_per_gpu_hour"]
            ratio = p.get("ratio_to_lower_bound")
            lines.append(
                f"| {name} | {r['preemption_scale']:g} | {_money(p['cost'])} "
                f"| {'-' if ratio is None else f'{ratio:.2f}'} | {_min(p['fast']['wait_p99_s'])} "
                f"| {_min(p['flex']['wait_p99_s'])} | {'-' if ipg is None else f'{ipg:.4f}'} "
                f"| {p['killed_runs']} | {p['preempted_gpu_hours']:,.0f} | {'yes' if p['timed_out'] else 'no'} |"
            )
    return lines


def workload_line(run: dict[str, Any]) -> str:
    wl, w = run["workload"], run["window"]
    return (
        f"day {w['start_day']:g} ({w['days']:g} day{'s' if w['days'] != 1 else ''}): {wl['jobs']} jobs ("
        + ", ".join(f"{n} {t}" for t, n in wl["tiers"].items())
        + f"), {wl['demanded_gpu_hours']:,.0f} work units demanded"
    )


def render(
    parts: list[tuple[str, str, dict[str, Any]]], command: str, plots: dict[str, str], note: str
) -> str:
    lines = [
        "## Protocol B: the trace replayed in time (cost and waits)",
        "",
        f"Command: `{command}`. Machine: {machine()}.",
        "",
    ]
    if note:
        lines += [note, ""]
    lines += [
        "Every run replays the window through every policy on the same market (seeded prices, boots and "
        "spot interruptions, the Spot Advisor bands read per hour, times the preemption scale); a work "
        "unit is a GPU-hour on an A100 40 GB; the scheduler is told durations with a log-normal error "
        "(sigma 0.5). `x LP bound`: the mean ratio to the hourly LP lower bound (GPU, CPU and RAM, models, "
        "work units). SLO: FAST wait <= 10 min, FLEX <= 1 h. `Scalar wins`: runs on which Scalar cost less "
        "at a FAST p99 no worse than the baseline's + 6 s, or under 10 minutes. A timed-out run hit the "
        "safety horizon with jobs unfinished (a long job without checkpoints restarted by interruptions); "
        "its cost runs to that horizon.",
        "",
    ]
    for title, cmd, summary in parts:
        runs = summary["runs"]
        lines += [f"### {title}", "", f"`{cmd}`", ""]
        windows = {r["window"]["start_day"]: r for r in runs}
        lines += ["Windows: " + "; ".join(workload_line(r) for r in windows.values()) + ".", ""]
        if len({r["preemption_scale"] for r in runs}) > 1:
            lines += sweep_table(runs)
        else:
            lines += summary_table(summary)
            lines += ["", "Per run (cost / FAST p99 minutes):", ""]
            lines += runs_table(runs)
        lines.append("")
    lines += [f"![cost against FAST p99 wait]({plots['tradeoff']})", ""]
    lines += [f"![cumulative cost over time]({plots['timeline']})", ""]
    lines += [f"![where the money went]({plots['spend']})", ""]
    lines.append(
        "How it is measured (workload, baselines, preemptions, the LP bound): docs/simulator-dynamic.md."
    )
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace the text between the markers (add them at the end when absent); keep everything else."""
    replace_section(path, f"{START}\n{section.rstrip()}\n{END}", START, END)


def plot_tradeoff(summary: dict[str, Any], path: Path) -> None:
    """Mean cost against mean FAST p99 wait per policy, with the standard deviations as error bars."""
    with report.figure(path, (8, 5)) as ax:
        for p in summary["policies"]:
            if p["policy"] == "lower-bound":
                ax.axhline(p["cost"], color=COLORS["lower-bound"], linestyle=":", label="LP lower bound")
                continue
            x = (p["fast"]["wait_p99_s"] or 0.0) / 60
            ax.errorbar(
                x,
                p["cost"],
                xerr=(p["fast"]["wait_p99_s_sd"] or 0.0) / 60,
                yerr=p["cost_sd"] or 0.0,
                fmt="o",
                capsize=4,
                color=COLORS.get(p["policy"], "black"),
                label=p["policy"],
            )
        ax.axvline(10, color="#c00", linestyle="--", linewidth=1, label="FAST target (10 min)")
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlabel("FAST p99 wait (minutes, mean ± sd over runs)")
        ax.set_ylabel("cost (USD, mean ± sd over runs)")
        ax.set_title("Cost against FAST p99 wait")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)


def plot_timeline(run: dict[str, Any], path: Path) -> None:
    """Cumulative cost over simulated time, one line per policy, for one run."""
    step_h = 3
    with report.figure(path) as ax:
        for p in run["policies"]:
            curve = p.get("cost_curve")
            if not curve:
                continue
            hours = [i * step_h for i in range(len(curve) - 1)] + [p["sim_end_s"] / 3600]
            ax.plot(hours, curve, label=p["policy"], color=COLORS.get(p["policy"], "black"))
        ax.set_xlabel("simulated hours from the window's start")
        ax.set_ylabel("cumulative cost (USD)")
        ax.set_title(f"Cost over time (seed {run['seed']}, day {run['window']['start_day']:g})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)


def plot_spend(runs: list[dict[str, Any]], path: Path) -> None:
    """Mean spend per policy, stacked by provider (spot and on-demand apart)."""
    names = [p["policy"] for p in runs[0]["policies"] if p["policy"] != "lower-bound"]
    by_kind: dict[str, dict[str, float]] = {}
    for run in runs:
        for p in run["policies"]:
            for key, v in (p.get("spend") or {}).items():
                provider, _model, *spot = key.split(":")
                kind = f"{provider}{' spot' if spot else ''}"
                row = by_kind.setdefault(kind, {})
                row[p["policy"]] = row.get(p["policy"], 0.0) + v["cost"] / len(runs)
    with report.figure(path) as ax:
        bottom = [0.0] * len(names)
        for kind in sorted(by_kind):
            values = [by_kind[kind].get(n, 0.0) for n in names]
            ax.bar(names, values, bottom=bottom, label=kind)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_ylabel("mean cost per run (USD)")
        ax.set_title("Where the money went (by seller, spot apart)")
        ax.legend(fontsize=7, ncol=2)
        ax.tick_params(axis="x", labelsize=8)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _numbers(text: str, *, ranges: bool = False) -> list[float]:
    from scalar.cli.simulate_dynamic import parse_numbers

    return parse_numbers(text, "value", ranges=ranges)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=Path, default=DEFAULT_PODS)
    parser.add_argument("--seeds", default="42-46")
    parser.add_argument("--start-day", default="117,127,137")
    parser.add_argument("--window-days", type=float, default=7.0)
    parser.add_argument("--compress", type=float, default=1.0)
    parser.add_argument("--checkpoint-minutes", type=float, default=None)
    parser.add_argument("--sweep-scales", default="0,1,3")
    parser.add_argument(
        "--checkpoint-variant",
        type=float,
        default=None,
        help="Also run the matrix with jobs checkpointing every this many minutes.",
    )
    parser.add_argument("--gpuspec", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--note", default="", help="A sentence for the section (what was reduced and why).")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--output", type=Path, default=BENCHMARKS)
    parser.add_argument("--plots", type=Path, default=PLOTS)
    args = parser.parse_args(argv)
    from scalar.sim.protocol_b_runs import summarize

    seeds = [int(s) for s in _numbers(args.seeds, ranges=True)]
    days = _numbers(args.start_day)
    common = {
        "window_days": args.window_days,
        "compress": args.compress,
        "checkpoint_minutes": args.checkpoint_minutes,
    }
    base = (
        f"scalar simulate dynamic --window-days {args.window_days:g} --policy all --jobs {args.jobs} --json"
        + (f" --checkpoint-minutes {args.checkpoint_minutes:g}" if args.checkpoint_minutes else "")
        + (f" --compress {args.compress:g}" if args.compress != 1 else "")
    )
    matrix = [{"seed": s, "start_day": d, "preemption_scale": 1.0} for s in seeds for d in days]
    cache = not args.no_cache
    parts: list[tuple[str, str, dict[str, Any]]] = []
    main_runs = run_many(args.pods, matrix, common, args.jobs, use_cache=cache)
    main_summary = summarize(main_runs)
    parts.append(
        (
            f"{Path(args.pods).name}: {_count(len(seeds), 'seed')} x {_count(len(days), 'window')}",
            f"{base} --pods {Path(args.pods).name} --seeds {args.seeds} --start-day {args.start_day}",
            main_summary,
        )
    )
    scales = _numbers(args.sweep_scales) if args.sweep_scales else []
    if scales:
        sweep = [{"seed": seeds[0], "start_day": days[0], "preemption_scale": x} for x in scales]
        sweep_runs = run_many(args.pods, sweep, common, args.jobs, use_cache=cache)
        parts.append(
            (
                f"Preemption sweep: scales {args.sweep_scales} on one window",
                f"{base} --pods {Path(args.pods).name} --seed {seeds[0]} --start-day {days[0]:g} "
                f"--preemption-scale {args.sweep_scales}",
                summarize(sweep_runs),
            )
        )
    if args.checkpoint_variant:
        variant = {**common, "checkpoint_minutes": args.checkpoint_variant}
        ckpt_runs = run_many(args.pods, matrix, variant, args.jobs, use_cache=cache)
        parts.append(
            (
                f"The same matrix, jobs checkpointing every {args.checkpoint_variant:g} minutes",
                f"{base} --pods {Path(args.pods).name} --seeds {args.seeds} --start-day {args.start_day} "
                f"--checkpoint-minutes {args.checkpoint_variant:g}",
                summarize(ckpt_runs),
            )
        )
    if args.gpuspec and GPUSPEC_PODS.exists():
        spec_runs = run_many(GPUSPEC_PODS, matrix, common, args.jobs, use_cache=cache)
        parts.append(
            (
                f"{GPUSPEC_PODS.name} (pods restricted by model): {_count(len(seeds), 'seed')} x "
                f"{_count(len(days), 'window')}",
                f"{base} --pods {GPUSPEC_PODS.name} --seeds {args.seeds} --start-day {args.start_day}",
                summarize(spec_runs),
            )
        )
    plots = {
        "tradeoff": args.plots / "protocol_b_tradeoff.png",
        "timeline": args.plots / "protocol_b_cost_over_time.png",
        "spend": args.plots / "protocol_b_spend.png",
    }
    plot_tradeoff(main_summary, plots["tradeoff"])
    plot_timeline(main_runs[0], plots["timeline"])
    plot_spend(main_runs, plots["spend"])
    rel: dict[str, str] = {}
    for k, v in plots.items():
        try:
            rel[k] = str(v.resolve().relative_to(args.output.resolve().parent))
        except ValueError:
            rel[k] = str(v)
    given = list(argv) if argv is not None else sys.argv[1:]
    if "--note" in given:
        i = given.index("--note")
        del given[i : i + 2]
    command = " ".join(["python -m bench.protocol_b", *given])
    write_section(args.output, render(parts, command, rel, args.note))
    for p in main_summary["policies"]:
        w = p.get("wins")
        sys.stdout.write(
            f"{p['policy']}: {usd_fixed(p['cost'])} ± {p['cost_sd']:,.2f}"
            + ("" if w is None else f", Scalar wins {w['scalar_wins']}/{w['runs']}")
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
