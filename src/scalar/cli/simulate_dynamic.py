"""``scalar simulate dynamic``: Protocol B, the trace replayed in time against the built-in market.

Hook-up: ``simulate.py`` owns the ``simulate`` sub-app; it calls ``register_dynamic(simulate_app)``.
``python -m scalar.cli.simulate_dynamic dynamic ...`` runs the command on its own (tests use it until the
hook-up lands).
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from scalar.cli.errors import fail, user_errors
from scalar.cli.output import console, make_table, print_json
from scalar.domain.tier import Tier
from scalar.sim.dynamic.workload import WindowOptions
from scalar.sim.protocol_b import (
    DEFAULT_SEED,
    POLICIES,
    ProtocolBOptions,
    ProtocolBResult,
    load_workload,
    policy_list,
    run_protocol_b,
)

DEFAULT_WINDOW_DAYS = 7.0


class BurstableTier(StrEnum):
    flex = "flex"
    fast = "fast"


def _minutes(seconds: float | None) -> str | None:
    return None if seconds is None else f"{seconds / 60:.1f}"


def _pct(value: float | None) -> str | None:
    return None if value is None else f"{100 * value:.1f}%"


def _print(result: ProtocolBResult) -> None:
    data = result.to_dict()
    out = console()
    w, wl = data["window"], data["workload"]
    out.print(
        f"Protocol B on {data['pods_file']}: days {w['start_day']:g} to {w['start_day'] + w['days']:g} of the "
        f"trace, compressed {w['compress']:g}x ({w['simulated_s'] / 3600:.1f} simulated hours), market seed "
        f"{data['seed']}",
        highlight=False,
        markup=False,
    )
    skipped = ", ".join(f"{n} {k}" for k, n in wl["skipped"].items() if n)
    tiers = ", ".join(f"{n} {t}" for t, n in wl["tiers"].items())
    out.print(
        f"{wl['jobs']} jobs of {wl['pods_read']} pods ({tiers}; {wl['demanded_gpu_hours']:g} GPU-hours demanded; "
        f"{wl['clipped_to_window']} cut to the window); skipped: {skipped or 'none'}",
        highlight=False,
        markup=False,
    )
    mapping = make_table(
        ["trace_models", "mapped_to", "pods", "gpu_hours"],
        [[r["trace_models"], r["models"], r["pods"], round(r["gpu_hours"], 1)] for r in wl["mapping"]],
        title="GPU model mapping",
    )
    out.print(mapping)
    headers = [
        "policy",
        "cost",
        "per_delivered_gpu_h",
        "idle_gpu_h",
        "fast_p50_min",
        "fast_p95_min",
        "fast_p99_min",
        "fast_slo",
        "flex_p50_min",
        "flex_p95_min",
        "flex_p99_min",
        "flex_slo",
    ]
    rows: list[list[Any]] = []
    for p in data["policies"]:
        f, x = p["fast"], p["flex"]
        per = p["cost_per_delivered_gpu_hour"]
        rows.append(
            [
                p["policy"],
                f"${p['cost']:,.2f}",
                None if per is None else f"${per:.4f}",
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
    table = make_table(
        headers, rows, title="Cost and waits per policy (SLO: FAST wait <= 10 min, FLEX <= 1 h)"
    )
    if not out.is_terminal:  # a file or a pipe: print whole rows rather than truncate them
        out.width = max(out.width, Measurement.get(out, out.options.update_width(1000), table).maximum)
    out.print(table)
    bound = next((p for p in data["policies"] if p["policy"] == "lower-bound"), None)
    if bound is not None and bound["cost"]:
        ratios = ", ".join(
            f"{p['policy']} {p['cost'] / bound['cost']:.2f}x"
            for p in data["policies"]
            if p["policy"] != "lower-bound"
        )
        out.print(f"cost against the lower bound: {ratios}", highlight=False, markup=False)


def register_dynamic(simulate_app: typer.Typer) -> None:
    """Add ``dynamic`` to the ``simulate`` sub-app."""

    @simulate_app.command("dynamic")
    @user_errors
    def dynamic(
        pods: Path = typer.Option(..., "--pods", help="A pod list in the openb_pod_list_*.csv format."),
        window_days: float = typer.Option(
            DEFAULT_WINDOW_DAYS, "--window-days", help="Days of the trace to replay (from --start-day)."
        ),
        start_day: float | None = typer.Option(
            None,
            "--start-day",
            help="Trace day the window opens (default: the day of the 5th percentile of arrivals).",
        ),
        compress: float = typer.Option(1.0, "--compress", help="Divide every time by this factor (>= 1)."),
        seed: int = typer.Option(DEFAULT_SEED, "--seed", help="The built-in market's seed."),
        policy: list[str] = typer.Option(
            ["all"], "--policy", help=f"{', '.join(POLICIES)} or all (repeat or comma-separate)."
        ),
        burstable: BurstableTier = typer.Option(
            BurstableTier.flex, "--burstable", help="Tier of Burstable pods."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    ) -> None:
        """Replay a pod trace in time through Scalar's engine and the autoscalers it is measured against."""
        names = [n.strip() for item in policy for n in item.split(",") if n.strip()]
        try:
            policies = policy_list(names)
            window = WindowOptions(
                start_day=start_day,
                window_days=window_days,
                compress=compress,
                burstable=Tier.FAST if burstable is BurstableTier.fast else Tier.FLEX,
            )
        except ValueError as err:
            fail(str(err))
        options = ProtocolBOptions(window=window, seed=seed, policies=policies)
        workload = load_workload(pods, seed, window)
        if not workload.jobs:
            fail(
                f"{pods}: no pod of the window can be replayed (skipped: {workload.skipped}); widen --window-days"
            )
        if as_json:
            result = run_protocol_b(pods, options, workload=workload)
            print_json(result.to_dict())
            return
        with Progress(
            TextColumn("{task.description:<12}"),
            BarColumn(),
            TextColumn("{task.percentage:>5.1f}%"),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            transient=True,
        ) as bar:
            tasks: dict[str, TaskID] = {p: bar.add_task(p, total=1.0) for p in policies}

            def progress(name: str, done: float, total: float) -> None:
                bar.update(tasks[name], completed=done / total if total else 1.0)

            result = run_protocol_b(pods, options, workload=workload, progress=progress)
        _print(result)


def main() -> None:
    app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """Scalar's simulator (Protocol B only)."""

    register_dynamic(app)
    app()


if __name__ == "__main__":
    main()
