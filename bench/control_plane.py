"""Control-plane benchmarks: engine scheduling at scale, database write rate, idle CPU.

    .venv/bin/python -m bench.control_plane            # everything, writes its section of BENCHMARKS.md
    .venv/bin/python -m bench.control_plane --quick    # smaller sizes, no file written
    .venv/bin/python -m bench.control_plane --no-cache # measure again even if the code did not change

The full run's measurements are cached in ``bench/.cache/`` under a hash of the code they measure (domain,
engine, store, runtime, providers and this file): ``make bench`` measures again only when that changed.

1. Engine (synthetic, no I/O): 1,000 and 10,000 READY 8-GPU nodes and 100,000 pending jobs. The first
   scheduling pass (all jobs submitted in one step), then steady state (each step reports 100 jobs done and
   the freed GPUs are refilled from the queue), and an idle tick with the queue still full.
2. Database write rate on SQLite and PostgreSQL: job submissions accepted into the inbox per second, and
   leader steps (one fenced transaction: events, controller step, outbox, projections, decisions) per second,
   idle (a Tick) and consuming 500 submissions per step.
3. Idle CPU: a real ``scalar controller`` process (built-in market, SQLite, default settings) with no work,
   CPU seconds per minute of wall time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench import report
from bench.pgdb import fresh_database
from bench.report import replace_section
from scalar.domain.market import BlockGrant, CapacityRequest, NodeEvent, NodeState, Order, OrderState
from scalar.domain.offers import Offer
from scalar.domain.tier import Tier
from scalar.engine import (
    Controller,
    ControllerConfig,
    JobSpec,
    JobSubmitted,
    MarketObserved,
    NodeReported,
    OrderUpdated,
    StartWork,
    Tick,
)
from scalar.runtime import ControlPlane, load_settings

REPO = Path(__file__).resolve().parent.parent
START, END = "<!-- control-plane:start -->", "<!-- control-plane:end -->"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PG_ADMIN = os.environ.get("SCALAR_TEST_PG_URL") or "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.1f} ms"


# ---- 1. engine ----------------------------------------------------------------------------------------


def engine_run(nodes: int, jobs: int, steady_steps: int, seed: int = 1) -> dict[str, Any]:
    config = ControllerConfig.from_dict({"scale_groups": [{"name": "bench", "max_slices": nodes + 100}]})
    c = Controller(config)
    offer = Offer("sfcompute", "8xH100", "us", Decimal("16"), "H100", 8, 80, 96, 1024)
    c.step(T0, [MarketObserved("m", (offer,), T0, {}, ("sfcompute",))])
    node_ids = tuple(f"n{i:05d}" for i in range(nodes))
    request = CapacityRequest("sfcompute", "8xH100", nodes, 30 * 86400, None, Tier.FAST, "H100", 8)
    grant = BlockGrant(
        "blk",
        "sfcompute",
        "8xH100",
        "H100",
        8,
        80,
        96,
        1024,
        T0,
        T0 + timedelta(days=30),
        Decimal(2),
        node_ids,
    )
    t = T0 + timedelta(seconds=1)
    c.step(t, [OrderUpdated("fill", "adopted", Order("o1", "adopted", OrderState.FILLED, request, grant))])
    ready = [NodeReported(f"r{i}", NodeEvent(n, "blk", t, NodeState.READY)) for i, n in enumerate(node_ids)]
    c.step(t, ready)
    rng = random.Random(seed)
    specs = [
        JobSpec(
            f"j{i:06d}",
            "FAST",
            rng.choice((1, 1, 2, 4, 8)),
            40,
            4,
            32,
            rng.uniform(600, 7200),
            rng.randint(0, 3),
        )
        for i in range(jobs)
    ]
    t += timedelta(seconds=1)
    started = time.perf_counter()
    actions = c.step(t, [JobSubmitted(f"s{i}", s) for i, s in enumerate(specs)])
    first_s = time.perf_counter() - started
    running = [a for a in actions if isinstance(a, StartWork)]
    first_placed = len(running)
    # Every placement in order (job, nodes and GPUs): two versions of the engine decided the same when equal.
    decisions = hashlib.sha256()
    for a in running:
        decisions.update(repr((a.job_id, a.placements)).encode())
    latencies: list[float] = []
    placed = 0
    for k in range(steady_steps):
        t += timedelta(seconds=1)
        done, running = running[:100], running[100:]
        events: list[Any] = [
            NodeReported(f"d{k}-{i}", NodeEvent(p.node_id, "blk", t, job_id=a.job_id, job_succeeded=True))
            for i, a in enumerate(done)
            for p in a.placements
        ]
        events.append(Tick(f"t{k}"))
        started = time.perf_counter()
        new = [a for a in c.step(t, events) if isinstance(a, StartWork)]
        latencies.append(time.perf_counter() - started)
        for a in new:
            decisions.update(repr((a.job_id, a.placements)).encode())
        placed += len(new)
        running += new
    idle: list[float] = []
    for k in range(5):
        t += timedelta(seconds=1)
        started = time.perf_counter()
        c.step(t, [Tick(f"idle{k}")])
        idle.append(time.perf_counter() - started)
    forced: list[float] = []  # the same idle tick with the autoscaler's change gate cleared: a full pass
    for k in range(5):
        t += timedelta(seconds=1)
        c.state.autoscale_gate = None
        started = time.perf_counter()
        c.step(t, [Tick(f"forced{k}")])
        forced.append(time.perf_counter() - started)
    return {
        "nodes": nodes,
        "jobs": jobs,
        "first_s": first_s,
        "first_placed": first_placed,
        "steady_p50": statistics.median(latencies),
        "steady_max": max(latencies),
        "steady_rate": placed / sum(latencies) if latencies else 0.0,
        "steady_placed": placed,
        "steady_steps": steady_steps,
        "idle_p50": statistics.median(idle),
        "idle_forced_p50": statistics.median(forced),
        "pending_after": len(c.state.pending_ids),
        "decisions": decisions.hexdigest()[:16],
    }


# ---- 2. database write rate ---------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def write_rate(url: str, tmp: Path, steps: int, batch: int) -> dict[str, Any]:
    clock = _Clock()
    settings = load_settings(None, {"database_url": url, "data_dir": tmp}, {})
    plane = ControlPlane(settings, clock=clock, providers={})  # no market: only the store is measured
    try:
        plane.run_once()
        fields = {"tier": "FAST", "gpu_count": 1, "expected_duration_sec": 600}
        started = time.perf_counter()
        for _ in range(batch):
            plane.submit_job(fields)
        accept_rate = batch / (time.perf_counter() - started)
        started = time.perf_counter()
        for _ in range(steps):
            clock.now += timedelta(seconds=1)
            plane.run_once()
        idle_rate = steps / (time.perf_counter() - started)
        busy_steps = max(3, steps // 10)
        elapsed = 0.0
        events = 0
        assert plane.store is not None
        for _ in range(busy_steps):
            for _ in range(batch):
                plane.submit_job(fields)
            clock.now += timedelta(seconds=1)
            before = _events(plane)
            started = time.perf_counter()
            plane.run_once()
            elapsed += time.perf_counter() - started
            events += _events(plane) - before
        return {
            "accept_rate": accept_rate,
            "idle_steps_per_s": idle_rate,
            "busy_steps_per_s": busy_steps / elapsed,
            "busy_events_per_s": events / elapsed,
            "batch": batch,
        }
    finally:
        plane.stop()


def _events(plane: ControlPlane) -> int:
    assert plane.store is not None
    with plane.store.read() as tx:
        return tx.last_seq()


# ---- 3. idle CPU --------------------------------------------------------------------------------------


def idle_cpu(warmup_s: float, measure_s: float) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="scalar-idle-"))
    env = {k: v for k, v in os.environ.items() if k != "SCALAR_DATABASE_URL"}
    command = [sys.executable, "-m", "scalar", "controller", "--data-dir", str(tmp)]
    proc = subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(warmup_s)
        if proc.poll() is not None:
            raise RuntimeError("scalar controller exited during the warm-up")
        before, wall = report.process_cpu_s(proc.pid), time.monotonic()
        time.sleep(measure_s)
        used, elapsed = report.process_cpu_s(proc.pid) - before, time.monotonic() - wall
        startup = before
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    return {"cpu_s_per_min": used / elapsed * 60, "measured_s": elapsed, "startup_cpu_s": startup}


# ---- report -------------------------------------------------------------------------------------------


def machine() -> str:
    return report.machine(with_numpy=False)


def render(
    engine: list[dict[str, Any]],
    writes: dict[str, dict[str, Any]],
    cpu: dict[str, Any] | None,
    day: str | None = None,
) -> str:
    lines = [
        START,
        "## Control plane",
        "",
        f"`make bench` section, written by `.venv/bin/python -m bench.control_plane` on {machine()}, "
        f"{day or f'{datetime.now(UTC):%Y-%m-%d}'}. The machine was shared with other work; treat numbers as "
        "rough.",
        "",
        "### Engine scheduling (synthetic, in memory)",
        "",
        "One block of READY 8-GPU nodes; 100,000 FAST jobs of 1-8 GPUs (4 CPU, 32 GB RAM, 10 min-2 h)"
        " submitted in one step. *First pass*: the step that schedules them all. *Steady state*: each step"
        " reports 100 jobs finished and refills the freed GPUs from the queue. *Idle tick*: a Tick with the"
        " queue still full; *forced*: the same tick with the autoscaler's change gate cleared (a full pass, as"
        " every tick was before the gate).",
        "",
        "| nodes | pending jobs | first pass | placed | placements/s | steady step p50 / max | "
        "steady placements/s | idle tick p50 | idle tick, forced |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in engine:
        lines.append(
            f"| {r['nodes']:,} | {r['jobs']:,} | {r['first_s']:.2f} s | {r['first_placed']:,} | "
            f"{r['first_placed'] / r['first_s']:,.0f} | {_ms(r['steady_p50'])} / {_ms(r['steady_max'])} | "
            f"{r['steady_rate']:,.0f} | {_ms(r['idle_p50'])} | {_ms(r.get('idle_forced_p50', float('nan')))} |"
        )
    lines += [
        "",
        "Where the time goes (cProfile): the first-pass step also accepts and validates the 100,000 submissions and runs one autoscaler pass; its scheduling is seed 001's packer, scoring one node per class of identical nodes (`engine/packing_classes.py`). A steady-state step costs what changed: the pending jobs are kept per shape in queue order (`engine/pending_index.py`), so the scheduler evaluates only the jobs it places and, per shape, each shorter job after a failure (not the ~95,000 in the queue), and the autoscaler reads the first `max_demand_entries` (2,000) of the queue without sorting it, routing each entry shape once while no plan changed (`domain/routing.py`); what remains is per routed entry (each of the 2,000 gets its outcome and explanation every step), the packer's evaluations and a pass's setup over the READY nodes. The steady max is mostly Python's full garbage collections. An idle tick is a comparison: the pass entry (`engine/autoscaler.py`, `AutoscaleGate`) skips a pass whose inputs did not change since the last one (the story's length, which every job, node, slice and order move and every action appends to; the pending count; each group's price bucketed by 1%; timers: the FLEX batch wait, a group's backoff expiry, a full pass every 30 s).",
        "",
        "### Database write rate",
        "",
        "A leader step is one fenced write transaction: append the events, step the controller, add its"
        " actions to the outbox, write projections and decisions. *Accept*: `submit_job` (validation + inbox"
        " row + job projection, its own transaction). *Idle step*: a Tick. *Busy step*: consumes "
        f"{next(iter(writes.values()))['batch'] if writes else 500} inbox submissions.",
        "",
        "| database | accepts/s | idle steps/s | busy steps/s | events/s (busy) |",
        "|---|---|---|---|---|",
    ]
    for name, w in writes.items():
        lines.append(
            f"| {name} | {w['accept_rate']:,.0f} | {w['idle_steps_per_s']:,.0f} | {w['busy_steps_per_s']:,.1f} | "
            f"{w['busy_events_per_s']:,.0f} |"
        )
    lines += ["", "### Idle CPU", ""]
    if cpu is None:
        lines.append("Not measured in this run.")
    else:
        lines.append(
            f"`scalar controller` with default settings (built-in market for six providers, SQLite, a tick a"
            f" second, prices every 15 s), no jobs: **{cpu['cpu_s_per_min']:.1f} CPU seconds per minute**"
            f" ({cpu['cpu_s_per_min'] / 60 * 100:.1f}% of one core), measured over {cpu['measured_s']:.0f} s"
            f" after a warm-up (start-up itself took {cpu['startup_cpu_s']:.1f} CPU s)."
        )
    lines += [
        "",
        "Reproduce: `.venv/bin/python -m bench.control_plane` (PostgreSQL at `$SCALAR_TEST_PG_URL`, default"
        f" `{PG_ADMIN}`).",
        END,
    ]
    return "\n".join(lines)


CACHE_DIR = REPO / "bench" / ".cache"
CODE_PATHS = (
    "src/scalar/domain",
    "src/scalar/engine",
    "src/scalar/store",
    "src/scalar/runtime",
    "src/scalar/providers",
    "bench/control_plane.py",
)


def code_version() -> str:
    """A hash of the code the control-plane numbers measure (sources and packaged data)."""
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


def write_section(text: str, path: Path) -> None:
    replace_section(path, text, START, END)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, nothing written")
    parser.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    parser.add_argument("--no-cache", action="store_true", help="measure again even if the code is unchanged")
    parser.add_argument(
        "--engine-only",
        action="store_true",
        help="only the engine (default 1,000 nodes, 100,000 jobs; idle tick gated and forced), nothing written",
    )
    parser.add_argument("--nodes", type=int, default=1_000, help="with --engine-only: READY 8-GPU nodes")
    parser.add_argument("--jobs", type=int, default=100_000, help="with --engine-only: pending jobs")
    parser.add_argument("--steady-steps", type=int, default=10, help="with --engine-only: steady steps")
    args = parser.parse_args(argv)
    if args.engine_only:
        print(engine_run(args.nodes, args.jobs, steady_steps=args.steady_steps), flush=True)
        return
    cached = CACHE_DIR / f"control_plane-{code_version()}.json"
    if not args.quick and not args.no_cache and cached.exists():
        data = json.loads(cached.read_text())
        print(f"control plane: cached ({cached.name})", flush=True)
        write_section(render(data["engine"], data["writes"], data["cpu"], data["day"]), args.output)
        return
    sizes = [(200, 5_000)] if args.quick else [(1_000, 100_000), (10_000, 100_000)]
    engine = []
    for nodes, jobs in sizes:
        print(f"engine: {nodes} nodes, {jobs} jobs ...", flush=True)
        engine.append(engine_run(nodes, jobs, steady_steps=10 if args.quick else 30))
        print(engine[-1], flush=True)
    writes: dict[str, dict[str, Any]] = {}
    steps, batch = (30, 50) if args.quick else (200, 500)
    tmp = Path(tempfile.mkdtemp(prefix="scalar-bench-"))
    try:
        print("writes: SQLite ...", flush=True)
        writes["SQLite (WAL, synchronous=NORMAL)"] = write_rate(
            f"sqlite:///{tmp}/bench.db", tmp, steps, batch
        )
        print("writes: PostgreSQL ...", flush=True)
        url, drop = fresh_database(PG_ADMIN)
        try:
            writes["PostgreSQL (local)"] = write_rate(url, tmp, steps, batch)
        finally:
            drop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(writes, flush=True)
    print("idle CPU ...", flush=True)
    cpu = idle_cpu(5, 10) if args.quick else idle_cpu(30, 60)
    print(cpu, flush=True)
    day = f"{datetime.now(UTC):%Y-%m-%d}"
    text = render(engine, writes, cpu, day)
    print(text)
    if not args.quick:
        write_section(text, args.output)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        cached.write_text(
            json.dumps({"engine": engine, "writes": writes, "cpu": cpu, "day": day}, default=str)
        )


if __name__ == "__main__":
    main()
