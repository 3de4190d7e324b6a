"""Serverless endpoints on a bursty request trace: latency, cold starts, worker-hours and cost per scaler.

The trace is derived from the Alibaba GPU-disaggregated DLRM serving trace
(``data/traces/alibaba-gpu-v2025-dlrm``): the busiest hour of HN (GPU) instance creations, each
creation (a serving scale-up, i.e. demand arriving) becoming ``REQUESTS_PER_CREATION`` requests spread
uniformly over that trace minute, on top of a steady background of ``BACKGROUND_RPS`` requests a second.

It runs in virtual time (0.5 s steps, no clock read) and uses the endpoint code's own pure pieces: the
scaler (``decide_scale``), the cold start and the service-time models (``domain/endpoint_scaling.py``).
Capacity is modeled, not bought from the built-in market (the control plane's tests drive that path):

* *packed*: workers take free GPUs on the fleet bought for batch jobs (4 nodes of 8 H100, batch use a
  seeded random walk between 20 and 32 GPUs); a worker starts on the next step when a GPU is free, else
  waits for a node bought for it (a pod boot, 25-180 s). The endpoint pays the GPU-hours its workers hold.
* *dedicated*: the endpoint owns 8-GPU nodes, bought when no GPU of its own is free (same boot) and
  released after 300 s empty; it pays every GPU of every node it holds.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from bench.report import replace_section
from scalar.domain.endpoint_scaling import (
    ScalingInput,
    WorkerState,
    WorkerView,
    cold_start_s,
    decide_scale,
    service_time_s,
)
from scalar.domain.endpoints import ServerlessEndpoint
from scalar.domain.gpus import GpuGroup
from scalar.domain.money import usd_cents_plain, usd_text

REPO = Path(__file__).resolve().parent.parent
TRACE = REPO / "data" / "traces" / "alibaba-gpu-v2025-dlrm" / "disaggregated_DLRM_trace.csv"
START, END = "<!-- endpoints:start -->", "<!-- endpoints:end -->"

STEP_S = 0.5
REQUESTS_PER_CREATION = 5
BACKGROUND_RPS = 0.1
WORK_S = 2.0  # per request on an Ampere GPU; about 0.9 s on the H100 the workers get
GROUP = GpuGroup.ADA_80_PRO  # H100
PRICE_PER_GPU_HOUR = Decimal("2.49")
NODE_GPUS = 8
FLEET_NODES = 4
BOOT_S = (25.0, 180.0)
NODE_IDLE_RELEASE_S = 300.0
TAIL_S = 600.0  # run on after the last arrival until everything drains and scales down


def derive_trace(path: Path = TRACE, seed: int = 7) -> list[float]:
    """Arrival times (s) over the busiest hour of GPU instance creations in the DLRM trace."""
    with path.open(newline="") as f:
        created = [
            float(r["creation_time"]) for r in csv.DictReader(f) if r["role"] == "HN" and r["creation_time"]
        ]
    per_minute = Counter(int(t // 60) for t in created)
    last = max(per_minute)
    start = max(range(last + 1), key=lambda m: (sum(per_minute.get(i, 0) for i in range(m, m + 60)), -m))
    rng = random.Random(seed)
    arrivals: list[float] = []
    for offset in range(60):
        for _ in range(per_minute.get(start + offset, 0) * REQUESTS_PER_CREATION):
            arrivals.append(offset * 60 + rng.uniform(0, 60))
    t = rng.expovariate(BACKGROUND_RPS)
    while t < 3600:
        arrivals.append(t)
        t += rng.expovariate(BACKGROUND_RPS)
    return sorted(arrivals)


@dataclass
class Worker:
    id: str
    state: WorkerState
    placed_at: float  # capacity is there from this time
    ready_at: float = math.inf
    idle_since: float = 0.0
    busy_until: float = 0.0
    serving: float | None = None  # arrival time of the request in service
    node: int | None = None
    held_from: float | None = None


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    cold_starts: int = 0
    worker_s: float = 0.0
    cost: Decimal = Decimal(0)
    max_workers: int = 0


def simulate(spec: ServerlessEndpoint, arrivals: list[float], dedicated: bool, seed: int = 11) -> Result:
    rng = random.Random(seed)
    service_rng = random.Random(seed + 1)
    res = Result()
    queue: list[float] = []
    workers: dict[str, Worker] = {}
    nodes: dict[int, dict[str, float]] = {}  # dedicated: node -> {bought, ready, empty_since}
    batch_used = 26.0
    extra_fleet_gpus = 0
    next_id = 0
    i = 0
    t = 0.0
    end = arrivals[-1] + TAIL_S
    while t <= end:
        while i < len(arrivals) and arrivals[i] <= t:
            queue.append(arrivals[i])
            i += 1
        batch_used = min(32.0, max(20.0, batch_used + rng.uniform(-0.5, 0.5)))
        for w in workers.values():
            if w.state is WorkerState.PENDING and w.placed_at <= t:
                w.state, w.ready_at = WorkerState.INITIALIZING, w.placed_at + cold_start_s(GROUP)
                w.held_from = w.placed_at
                res.cold_starts += 1
            if w.state is WorkerState.INITIALIZING and w.ready_at <= t:
                w.state, w.idle_since = WorkerState.IDLE, w.ready_at
            if w.state is WorkerState.BUSY and w.busy_until <= t:
                assert w.serving is not None
                res.latencies.append(w.busy_until - w.serving)
                w.state, w.idle_since, w.serving = WorkerState.IDLE, w.busy_until, None
        for w in sorted(
            (w for w in workers.values() if w.state is WorkerState.IDLE), key=lambda w: w.idle_since
        ):
            if not queue:
                break
            w.serving = queue.pop(0)
            w.state, w.busy_until = WorkerState.BUSY, t + service_time_s(GROUP, service_rng, WORK_S)
        views = tuple(
            WorkerView(w.id, w.state, t - w.idle_since if w.state is WorkerState.IDLE else 0.0)
            for w in workers.values()
        )
        busy = sum(1 for w in workers.values() if w.state is WorkerState.BUSY)
        decision = decide_scale(
            spec, ScalingInput(len(queue), busy, (t - queue[0]) if queue else None, views)
        )
        for _ in range(decision.start):
            next_id += 1
            w = Worker(f"w{next_id}", WorkerState.PENDING, t + STEP_S)
            if dedicated:
                used = Counter(x.node for x in workers.values())
                free = [n for n in sorted(nodes) if used.get(n, 0) < NODE_GPUS]
                if free:
                    w.node, w.placed_at = free[0], max(t + STEP_S, nodes[free[0]]["ready"])
                else:
                    node = len(nodes) + 1000 * next_id
                    nodes[node] = {"bought": t, "ready": t + rng.uniform(*BOOT_S), "empty_since": math.inf}
                    w.node, w.placed_at = node, nodes[node]["ready"]
            else:
                in_use = sum(1 for x in workers.values() if x.state is not WorkerState.PENDING)
                if FLEET_NODES * NODE_GPUS + extra_fleet_gpus - batch_used - in_use < 1:
                    extra_fleet_gpus += NODE_GPUS  # a node bought for the worker joins the shared fleet
                    w.placed_at = t + rng.uniform(*BOOT_S)
            workers[w.id] = w
        for worker_id in decision.stop:
            w = workers.pop(worker_id)
            _charge(res, w, t, dedicated)
        res.max_workers = max(res.max_workers, len(workers))
        if dedicated:
            used = Counter(x.node for x in workers.values())
            for node, info in list(nodes.items()):
                if used.get(node, 0) == 0:
                    info["empty_since"] = min(info["empty_since"], t)
                    if t - info["empty_since"] >= NODE_IDLE_RELEASE_S:
                        res.cost += _money(t - info["bought"], NODE_GPUS)
                        del nodes[node]
                else:
                    info["empty_since"] = math.inf
        t += STEP_S
    for w in workers.values():
        _charge(res, w, t, dedicated)
    if dedicated:
        for info in nodes.values():
            res.cost += _money(t - info["bought"], NODE_GPUS)
    return res


def _money(seconds: float, gpus: int) -> Decimal:
    return Decimal(str(round(seconds, 3))) / Decimal(3600) * gpus * PRICE_PER_GPU_HOUR


def _charge(res: Result, w: Worker, t: float, dedicated: bool) -> None:
    if w.held_from is None:
        return
    res.worker_s += t - w.held_from
    if not dedicated:
        res.cost += _money(t - w.held_from, 1)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(arrivals: list[float]) -> list[list[str]]:
    rows: list[list[str]] = []
    configs = [(s, v, False) for s in ("QUEUE_DELAY", "REQUEST_COUNT") for v in (1, 4, 10)]
    configs += [("QUEUE_DELAY", 4, True), ("REQUEST_COUNT", 4, True)]
    for scaler, value, dedicated in configs:
        spec = ServerlessEndpoint.create(
            name="bench",
            image_name="bench:1",
            gpus=[GROUP],
            workers_min=0,
            workers_max=20,
            scaler_type=scaler,
            scaler_value=value,
            idle_timeout_s=5,
        )
        res = simulate(spec, arrivals, dedicated)
        per_1000 = res.cost * 1000 / len(res.latencies)
        rows.append(
            [
                scaler,
                str(value),
                "dedicated 8-GPU nodes" if dedicated else "packed beside batch",
                f"{len(res.latencies):,}",
                f"{_pct(res.latencies, 0.5):.1f}",
                f"{_pct(res.latencies, 0.99):.1f}",
                str(res.cold_starts),
                str(res.max_workers),
                f"{res.worker_s / 3600:.2f}",
                usd_cents_plain(per_1000),
            ]
        )
        print(" | ".join(rows[-1]), flush=True)
    return rows


def render(arrivals: list[float], rows: list[list[str]]) -> str:
    header = [
        "scaler",
        "scalerValue",
        "capacity",
        "requests",
        "p50 s",
        "p99 s",
        "cold starts",
        "max workers",
        "worker-h",
        "cost / 1,000 req",
    ]
    per_minute = Counter(int(a // 60) for a in arrivals)
    lines = [
        START,
        "## Serverless endpoints",
        "",
        f"Written by `.venv/bin/python -m bench.endpoints` (virtual time; seconds to run). Trace: the busiest hour "
        f"of GPU instance creations in the Alibaba DLRM serving trace, {REQUESTS_PER_CREATION} requests per "
        f"creation spread over its minute plus {BACKGROUND_RPS} req/s background: {len(arrivals):,} requests, "
        f"peak {max(per_minute.values())} in one minute, {sum(1 for m in range(60) if per_minute.get(m, 0) < 10)} "
        f"of 60 minutes nearly idle. Workers: 1 H100 (ADA_80_PRO, cold start {cold_start_s(GROUP):g} s), "
        f"{WORK_S:g} s of Ampere work per request (about {WORK_S / 2.2:.1f} s on H100), workersMin 0, "
        f"workersMax 20, idleTimeout 5 s, {usd_text(PRICE_PER_GPU_HOUR)}/GPU-h. Latency is arrival to result.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
        "*Packed* workers take free GPUs of the batch fleet (a node is bought only when none is free) and pay "
        "for the GPU-hours they hold; *dedicated* endpoints own whole 8-GPU nodes, each bought on demand (a "
        f"{BOOT_S[0]:g}-{BOOT_S[1]:g} s boot) and released {NODE_IDLE_RELEASE_S:g} s after it empties. The scaler, "
        "cold start and service-time models are the endpoint code's own (`domain/endpoint_scaling.py`); "
        "capacity is modeled (docs/endpoints.md, Benchmark).",
        END,
    ]
    return "\n".join(lines)


def write_section(text: str, path: Path) -> None:
    replace_section(path, text, START, END)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="print only, nothing written")
    parser.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    args = parser.parse_args(argv)
    arrivals = derive_trace()
    text = render(arrivals, run(arrivals))
    print(text)
    if not args.quick:
        write_section(text, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
