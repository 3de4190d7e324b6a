"""``scalar simulate dynamic``: Protocol B, the trace replayed in time against the built-in market.

Hook-up: ``simulate.py`` owns the ``simulate`` sub-app; it calls ``register_dynamic(simulate_app)``.
``python -m scalar.cli.simulate_dynamic dynamic ...`` runs the command on its own (tests use it until the
hook-up lands).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from scalar.cli.errors import fail, user_errors
from scalar.cli.output import Col, explain, make_table, print_json, show, wide_option
from scalar.domain.money import usd_fixed, usd_fixed_plain
from scalar.domain.tier import Tier
from scalar.sim.dynamic.workload import DEFAULT_ESTIMATE_SIGMA, WindowOptions
from scalar.sim.protocol_b import DEFAULT_SEED, POLICIES, ProtocolBResult, load_workload, policy_list
from scalar.sim.protocol_b_runs import RunSpec, run_matrix, summarize
from scalar.sim.traces import checkout_trace_dir

DEFAULT_WINDOW_DAYS = 7.0
DEFAULT_START_DAYS = "117,127,137"
MAX_RUNS = 1000
TRACE_DIR = checkout_trace_dir()
DEFAULT_PODS = TRACE_DIR / "openb_pod_list_default.csv" if TRACE_DIR else None
DEFAULT_NOTE = "data/traces/alibaba-gpu-v2023/openb_pod_list_default.csv of a source checkout"


class BurstableTier(StrEnum):
    flex = "flex"
    fast = "fast"


def _minutes(seconds: float | None) -> str | None:
    return None if seconds is None else f"{seconds / 60:.1f}"


def _pct(value: float | None) -> str | None:
    return None if value is None else f"{100 * value:.1f}%"


POLICY_COLUMNS = [
    Col("policy", "key"),
    Col("cost", "num"),
    Col("per_delivered_gpu_h", "num", wide=True),
    Col("idle_gpu_h", "num", wide=True),
    Col("fast_p50_min", "num", wide=True),
    Col("fast_p95_min", "num", wide=True),
    Col("fast_p99_min", "num"),
    Col("fast_slo", "num"),
    Col("flex_p50_min", "num", wide=True),
    Col("flex_p95_min", "num", wide=True),
    Col("flex_p99_min", "num"),
    Col("flex_slo", "num"),
]
SUMMARY_COLUMNS = [
    Col("policy", "key"),
    Col("cost", "num"),
    Col("cost_sd", "num", wide=True),
    Col("x_bound", "num"),
    Col("fast_p99_min", "num"),
    Col("fast_slo", "num"),
    Col("flex_p99_min", "num", wide=True),
    Col("flex_slo", "num"),
    Col("preempted_gpu_h", "num", wide=True),
    Col("killed_runs", "num", wide=True),
    Col("scalar_wins", "num"),
]


def _print(result: ProtocolBResult, wide: bool) -> None:
    data = result.to_dict()
    w, wl = data["window"], data["workload"]
    explain(
        f"Protocol B on {data['pods_file']}: days {w['start_day']:g} to {w['start_day'] + w['days']:g} of the "
        f"trace, compressed {w['compress']:g}x ({w['simulated_s'] / 3600:.1f} simulated hours), market seed "
        f"{data['seed']}"
    )
    skipped = ", ".join(f"{n} {k}" for k, n in wl["skipped"].items() if n)
    tiers = ", ".join(f"{n} {t}" for t, n in wl["tiers"].items())
    explain(
        f"{wl['jobs']} jobs of {wl['pods_read']} pods ({tiers}; {wl['demanded_gpu_hours']:g} GPU-hours demanded; "
        f"{wl['clipped_to_window']} cut to the window); skipped: {skipped or 'none'}"
    )
    mapping = make_table(
        [
            Col("trace_models", "text"),
            Col("mapped_to", "text", ratio=2),
            Col("pods", "num"),
            Col("gpu_hours", "num"),
        ],
        [[r["trace_models"], r["models"], r["pods"], round(r["gpu_hours"], 1)] for r in wl["mapping"]],
        title="GPU model mapping",
    )
    show(mapping)
    rows: list[list[Any]] = []
    for p in data["policies"]:
        f, x = p["fast"], p["flex"]
        per = p["cost_per_delivered_gpu_hour"]
        rows.append(
            [
                p["policy"],
                usd_fixed(p["cost"]),
                None if per is None else usd_fixed_plain(per, 4),
                f"{p['idle_gpu_hours']:,.1f}",
                _minutes(f["wait_p50_s"]),
                _minutes(f["wait_p95_s"]),
                _minutes(f["wait_p99_s"]),
                _pct(f["slo_attainment"]),
                _minutes(x["wait_p50_s"]),
                _minutes(x["wait_p95_s"]),
                _minutes(x["wait_p99_s"]),
                _pct(x["slo_attainment"]),
            ]
        )
    title = "Cost and waits per policy (SLO: FAST wait <= 10 min, FLEX <= 1 h)"
    show(make_table(POLICY_COLUMNS, rows, title=title, wide=wide))
    bound = next((p for p in data["policies"] if p["policy"] == "lower-bound"), None)
    if bound is not None and bound["cost"]:
        ratios = ", ".join(
            f"{p['policy']} {p['cost'] / bound['cost']:.2f}x"
            for p in data["policies"]
            if p["policy"] != "lower-bound"
        )
        explain(f"cost against the lower bound: {ratios}")


def parse_numbers(text: str, field: str, *, ranges: bool = False) -> list[float]:
    """``"117,127"`` -> ``[117.0, 127.0]``; with ``ranges``, ``"42-46"`` -> ``[42, ..., 46]``."""
    out: list[float] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        try:
            if ranges and "-" in item[1:]:
                first, last = (int(x) for x in item.split("-", 1))
                if last < first or last - first > MAX_RUNS:
                    raise ValueError
                out.extend(float(v) for v in range(first, last + 1))
            else:
                out.append(float(item))
        except ValueError:
            example = "42-46 or 42,43" if ranges else "117,127,137"
            raise ValueError(f"{field}: {item!r} is not a number or a range (like {example})") from None
    if not out:
        raise ValueError(f"{field}: give at least one value")
    if any(v < 0 for v in out):
        raise ValueError(f"{field}: values must be >= 0")
    if ranges and any(v != int(v) for v in out):
        raise ValueError(f"{field}: seeds are whole numbers")
    return list(dict.fromkeys(out))


def _print_summary(summary: dict[str, Any], wide: bool) -> None:
    runs = summary["runs"]
    explain(
        f"Protocol B: {len(runs)} runs (seeds {sorted({r['seed'] for r in runs})}, start days "
        f"{sorted({r['window']['start_day'] for r in runs})}, preemption scales "
        f"{sorted({r['preemption_scale'] for r in runs})}); means over runs"
    )
    rows = []
    for p in summary["policies"]:
        w = p.get("wins")
        rows.append(
            [
                p["policy"],
                usd_fixed(p["cost"]),
                usd_fixed(p["cost_sd"]),
                None if p["ratio_to_lower_bound"] is None else f"{p['ratio_to_lower_bound']:.2f}",
                _minutes(p["fast"]["wait_p99_s"]),
                _pct(p["fast"]["slo_attainment"]),
                _minutes(p["flex"]["wait_p99_s"]),
                _pct(p["flex"]["slo_attainment"]),
                f"{p['preempted_gpu_hours']:,.1f}",
                p["killed_runs"],
                "-" if w is None else f"{w['scalar_wins']}/{w['runs']}",
            ]
        )
    title = "Means over runs (scalar_wins: cheaper at FAST p99 <= the baseline's + 6 s, or < 10 min)"
    show(make_table(SUMMARY_COLUMNS, rows, title=title, wide=wide))


def register_dynamic(simulate_app: typer.Typer) -> None:
    """Add ``dynamic`` to the ``simulate`` sub-app."""

    @simulate_app.command("dynamic")
    @user_errors
    def dynamic(
        pods: Path | None = typer.Option(
            DEFAULT_PODS,
            "--pods",
            help="A pod list in the openb_pod_list_*.csv format (default: the default list of a checkout).",
        ),
        window_days: float = typer.Option(
            DEFAULT_WINDOW_DAYS, "--window-days", help="Days of the trace to replay (from each --start-day)."
        ),
        start_day: str = typer.Option(
            DEFAULT_START_DAYS, "--start-day", help="Trace days the windows open, comma-separated."
        ),
        compress: float = typer.Option(1.0, "--compress", help="Divide every time by this factor (>= 1)."),
        seed: int | None = typer.Option(None, "--seed", help="One market seed (same as --seeds N)."),
        seeds: str | None = typer.Option(
            None, "--seeds", help=f"Market seeds: a range (42-46) or a list (42,43); default {DEFAULT_SEED}."
        ),
        policy: list[str] = typer.Option(
            ["all"], "--policy", help=f"{', '.join(POLICIES)} or all (repeat or comma-separate)."
        ),
        preemption_scale: str = typer.Option(
            "1", "--preemption-scale", help="Multiply every spot hazard (a list runs each: 0,1,3)."
        ),
        checkpoint_minutes: float | None = typer.Option(
            None,
            "--checkpoint-minutes",
            help="Jobs checkpoint this often (default: never; a restart loses all).",
        ),
        estimate_sigma: float = typer.Option(
            DEFAULT_ESTIMATE_SIGMA,
            "--estimate-sigma",
            help="Spread of the log-normal error on the durations the scheduler is told (0: exact).",
        ),
        jobs: int = typer.Option(1, "--jobs", help="Parallel processes for several runs or policies."),
        burstable: BurstableTier = typer.Option(
            BurstableTier.flex, "--burstable", help="Tier of Burstable pods."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
        wide: bool = wide_option(),
    ) -> None:
        """Replay a pod trace in time through Scalar's engine and the autoscalers it is measured against."""
        names = [n.strip() for item in policy for n in item.split(",") if n.strip()]
        if pods is None:
            fail(f"--pods is required outside a source checkout (the default is {DEFAULT_NOTE})")
        try:
            policies = policy_list(names)
            if seed is not None and seeds is not None:
                raise ValueError("give --seed or --seeds, not both")
            seed_list = (
                [seed]
                if seed is not None
                else [int(v) for v in parse_numbers(seeds or str(DEFAULT_SEED), "--seeds", ranges=True)]
            )
            days = parse_numbers(start_day, "--start-day")
            scales = parse_numbers(preemption_scale, "--preemption-scale")
            if jobs < 1:
                raise ValueError(f"--jobs must be at least 1, got {jobs}")
            window = WindowOptions(
                start_day=days[0],
                window_days=window_days,
                compress=compress,
                burstable=Tier.FAST if burstable is BurstableTier.fast else Tier.FLEX,
                estimate_sigma=estimate_sigma,
                checkpoint_minutes=checkpoint_minutes,
            )
        except ValueError as err:
            fail(str(err))
        specs = [RunSpec(s, d, x) for s in seed_list for d in days for x in scales]
        if len(specs) > MAX_RUNS:
            fail(f"{len(specs)} runs asked (seeds x start days x scales); at most {MAX_RUNS}")
        for spec in specs:
            workload = load_workload(pods, spec.seed, replace(window, start_day=spec.start_day))
            if not workload.jobs:
                fail(
                    f"{pods}: no pod of the window from day {spec.start_day:g} can be replayed "
                    f"(skipped: {workload.skipped}); widen --window-days or move --start-day"
                )
            break
        with Progress(
            TextColumn("{task.description:<12}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            transient=True,
            disable=as_json or not sys.stderr.isatty(),
        ) as bar:
            total = len(specs) * len(dict.fromkeys([*policies, "lower-bound"]))
            task: TaskID = bar.add_task("runs", total=total)
            results = run_matrix(
                pods, window, specs, policies, jobs=jobs, done=lambda _s, _p: bar.advance(task)
            )
        if len(results) == 1:
            if as_json:
                print_json(results[0].to_dict())
            else:
                _print(results[0], wide)
            return
        summary = summarize([r.to_dict() for r in results])
        if as_json:
            print_json(summary)
        else:
            _print_summary(summary, wide)


def main() -> None:
    app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """Scalar's simulator (Protocol B only)."""

    register_dynamic(app)
    app()


if __name__ == "__main__":
    main()
