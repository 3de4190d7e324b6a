"""The live demo's targets, measured: ``scalar up --demo --time-scale 60`` on a free loopback port and a fresh
SQLite database, sampled from minute 3 to minute 7.

- utilisation: the mean of ``gpus.allocated / gpus.total`` from ``GET /status``, sampled every 5 s
  (target >= 75%); and, as its own figure, the same over the capacity bought in the market alone, without
  the user's own nodes (the local agent's fake GPUs: the demo's jobs carry no command, so they never run
  there; ``GET /nodes``, ``own_nodes``);
- FAST p99 wait: over the FAST jobs submitted in the window, submission to start (a job still waiting
  counts its wait so far), in wall seconds and in market minutes (x the time scale); target < 10 minutes;
- cost, two measures (``cost_measures``), each against the cheapest eligible offer weighted over the jobs
  that ran by their GPUs x expected duration, each job priced at the offers of ``GET /prices`` sampled
  nearest its submission:

  - per GPU-hour (the target as written, <= 1.5x): ``cost_per_delivered_gpu_hour`` of ``GET /costs`` at
    the end of the window against the cheapest eligible $/GPU-hour (``cost_ratio``);
  - per work unit (the engine's decision rule): the same spend per delivered work unit (an A100 GPU-hour
    of FLEX work; a FAST job's GPU-hour is one unit on any model, ``domain.contracts.work_rate``) against
    the cheapest eligible $ per work unit, $/GPU-hour / the model's work rate (``cost_ratio_per_work_unit``).
    How many work units the delivered GPU-hours did comes from the jobs' placement histories and the
    models of their nodes. ``cost_ratio_per_work_unit_without_idle`` leaves out the spend on idle GPUs
    (``idle_cost``): what the purchases cost per unit of work, apart from how full they were kept.
    The demo's FLEX jobs do a fixed amount of work (the built-in market runs it at
    the speed of the GPUs they got), so a faster, dearer GPU pays for itself here when it does.

    PYTHONPATH=src python -m bench.live_demo [--seed 0] [--time-scale 60]

Prints one JSON object. The run uses two cores' worth of CPU at most; run it on a quiet machine for
numbers that mean something.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from scalar.domain.contracts import work_rate
from scalar.domain.tier import Tier

WINDOW = (180.0, 420.0)
SAMPLE_S = 5.0
FLEX_CAP = Decimal("10")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _when(text: str | None) -> datetime | None:
    return None if not text else datetime.fromisoformat(text)


def all_jobs(http: httpx.Client) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        page = http.get("/jobs", params={"limit": 500, "offset": len(out), "order": "oldest"}).json()
        jobs = page.get("jobs", [])
        out += jobs
        if len(jobs) < 500:
            return out


def rate(model: str | None, tier: str) -> float:
    """Work units one GPU-hour of ``model`` does for a job of ``tier``: the engine's rule
    (``domain.contracts.work_rate``: the relative throughput for FLEX, 1 for FAST)."""
    return work_rate(model, Tier.parse(tier))


def cheapest(job: dict[str, Any], offers: list[dict[str, Any]], *, per_work: bool = False) -> Decimal | None:
    """The lowest $/GPU-hour of an offer that could host the job (whole nodes; FLEX under its cap); with
    ``per_work``, the lowest $ per work unit (the offer's $/GPU-hour / its model's work rate for the job's
    tier), which is how the engine ranks hosts."""
    per_node = min(int(job["gpu_count"]), 8)
    best: Decimal | None = None
    for o in offers:
        price = o.get("price_per_gpu_hour")
        gpus = o.get("gpu_count") or 0
        if price is None or gpus < per_node or int(gpus) != gpus:
            continue
        if float(o.get("gpu_memory_gb") or 0) < float(job.get("vram_per_gpu_gb") or 0):
            continue
        vcpu = float(o.get("vcpu") or 0)
        if 0 < vcpu < float(job.get("cpu_cores") or 0):
            continue
        value = Decimal(str(price))
        if job["tier"] == "FLEX" and value > FLEX_CAP:
            continue
        if per_work:
            value /= Decimal(repr(rate(o.get("gpu_model"), job["tier"])))
        best = value if best is None or value < best else best
    return best


def delivered(
    jobs: list[dict[str, Any]], models: dict[str, str | None], end: datetime
) -> tuple[Decimal, Decimal]:
    """GPU-hours the jobs held and the work units they did in them, from each job's placement history
    (a span still open ends at ``end``; a node of unknown model counts at rate 1)."""
    gpu_h = Decimal(0)
    work = Decimal(0)
    for j in jobs:
        for span in j.get("placement_history") or []:
            since, until = _when(span.get("from")), _when(span.get("to")) or end
            if since is None or until <= since:
                continue
            held = Decimal(len(span.get("gpu_indices") or [])) * Decimal(
                str((until - since).total_seconds() / 3600.0)
            )
            gpu_h += held
            work += held * Decimal(repr(rate(models.get(span.get("node_id", "")), j["tier"])))
    return gpu_h, work


def weighted_floor(
    jobs: list[dict[str, Any]],
    prices: list[tuple[datetime, list[dict[str, Any]]]],
    *,
    per_work: bool = False,
) -> Decimal | None:
    """The cheapest eligible offer over the jobs that ran, each priced at the offers sampled nearest its
    submission, weighted by its GPUs x expected duration: GPU-hours as the target was written, and the
    job's work in work units as the engine reads an expected duration (A100 time for FLEX, wall time for
    FAST: ``docs/api.md``)."""
    weighted = Decimal(0)
    weight = Decimal(0)
    for j in jobs:
        submitted = _when(j.get("submitted_at"))
        if submitted is None or not j.get("started_at") or not prices:
            continue
        _, offers = min(prices, key=lambda p: abs((p[0] - submitted).total_seconds()))
        price = cheapest(j, offers, per_work=per_work)
        if price is None:
            continue
        w = Decimal(j["gpu_count"]) * Decimal(str(j["expected_duration_sec"]))
        weighted += price * w
        weight += w
    return weighted / weight if weight else None


def cost_measures(
    costs: dict[str, Any],
    jobs: list[dict[str, Any]],
    prices: list[tuple[datetime, list[dict[str, Any]]]],
    models: dict[str, str | None],
    end: datetime,
) -> dict[str, Any]:
    """Both cost measures: $ per delivered GPU-hour against the cheapest eligible $/GPU-hour (the target as
    written), and $ per delivered work unit against the cheapest eligible $ per work unit (the engine's
    decision rule). The spend and the delivered GPU-hours are ``GET /costs``'s; the jobs' placement
    histories say how many work units a delivered GPU-hour did (their GPUs' models and tiers)."""
    floor = weighted_floor(jobs, prices)
    floor_work = weighted_floor(jobs, prices, per_work=True)
    per = costs.get("cost_per_delivered_gpu_hour")
    net = costs.get("net_cost")
    held_h, work = delivered(jobs, models, end)
    per_work: Decimal | None = None
    if per is not None and held_h > 0 and work > 0:
        per_work = Decimal(str(per)) * held_h / work  # $/GPU-hour / (work units per GPU-hour)
    # the part of the spend on GPUs that held jobs: what the purchases cost, idle capacity aside
    busy = None
    if net is not None and costs.get("idle_cost") is not None and Decimal(str(net)) > 0:
        busy = (Decimal(str(net)) - Decimal(str(costs["idle_cost"]))) / Decimal(str(net))
    return {
        "cost_per_delivered_gpu_hour": per,
        "cheapest_eligible_per_gpu_hour": None if floor is None else str(floor.quantize(Decimal("0.0001"))),
        "cost_ratio": _ratio(None if per is None else Decimal(str(per)), floor),
        "cost_per_delivered_work_unit": None
        if per_work is None
        else str(per_work.quantize(Decimal("0.0001"))),
        "cheapest_eligible_per_work_unit": None
        if floor_work is None
        else str(floor_work.quantize(Decimal("0.0001"))),
        "cost_ratio_per_work_unit": _ratio(per_work, floor_work),
        "cost_ratio_per_work_unit_without_idle": _ratio(
            None if per_work is None or busy is None else per_work * busy, floor_work
        ),
        "decision_rule_measure": "cost_ratio_per_work_unit",
        "net_cost": net,
        "idle_cost": costs.get("idle_cost"),
        "job_gpu_hours": str(held_h.quantize(Decimal("0.01"))),
        "job_work_units": str(work.quantize(Decimal("0.01"))),
    }


def _ratio(value: Decimal | None, floor: Decimal | None) -> float | None:
    return None if value is None or floor is None or floor == 0 else round(float(value / floor), 3)


OWN_PROVIDERS = frozenset({"local"})  # the user's own hosts (``scalar up``'s local agent), not bought


def own_nodes(nodes: list[dict[str, Any]]) -> tuple[int, int]:
    """GPUs and allocated GPUs on the READY nodes the user owns (not bought in the market)."""
    ready = [n for n in nodes if n.get("state") == "ready" and n.get("provider") in OWN_PROVIDERS]
    return (
        sum(int(n.get("gpu_count") or 0) for n in ready),
        sum(int(n.get("gpus_allocated") or 0) for n in ready),
    )


def market_utilisation(allocated: int, total: int, own_total: int, own_allocated: int) -> float:
    """``allocated / total`` over the bought capacity alone (0 when none is READY)."""
    bought = total - own_total
    return (allocated - own_allocated) / bought if bought > 0 else 0.0


def idle_by_provider(costs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Paid and idle GPU-hours and the idle spend per provider, from ``GET /costs``."""
    return {
        str(row.get("provider")): {k: row.get(k) for k in ("paid_gpu_hours", "idle_gpu_hours", "idle_cost")}
        for row in costs.get("by_provider") or []
    }


def node_models(http: httpx.Client) -> dict[str, str | None]:
    """Every node's GPU model, gone ones included (``GET /nodes``, every page)."""
    out: dict[str, str | None] = {}
    after: str | None = None
    while True:
        params: dict[str, Any] = {"include_gone": True, "limit": 1000}
        if after:
            params["after"] = after
        page = http.get("/nodes", params=params).json()
        for n in page.get("nodes") or []:
            out[str(n["node_id"])] = n.get("gpu_model")
        after = page.get("next")
        if not after:
            return out


def run_over_expected(jobs: list[dict[str, Any]]) -> float | None:
    """The median of run time / expected duration over the FLEX jobs that finished in one go: below 1 when
    their work ran on GPUs faster than the reference A100."""
    ratios = []
    for j in jobs:
        started, finished = _when(j.get("started_at")), _when(j.get("finished_at"))
        if j["tier"] == "FLEX" and started and finished and not j.get("preemptions"):
            ratios.append((finished - started).total_seconds() / float(j["expected_duration_sec"]))
    median = percentile(ratios, 0.5)
    return None if median is None else round(median, 3)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, math.ceil(q * len(ordered)) - 1)
    return ordered[k]


def measure(seed: int, time_scale: float) -> dict[str, Any]:
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="scalar-live-demo-"))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    env.pop("SCALAR_DATABASE_URL", None)
    cmd = [sys.executable, "-m", "scalar", "up", "--demo", "--time-scale", f"{time_scale:g}", "--port",
           str(port), "--data-dir", str(data), "--seed", str(seed), "--no-auth"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    start = time.monotonic()
    samples: list[float] = []
    market_samples: list[float] = []
    own_gpus: list[int] = []
    prices: list[tuple[datetime, list[dict[str, Any]]]] = []
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            while True:
                try:
                    if http.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() - start > 120:
                    raise SystemExit(
                        f"scalar up did not start: {proc.stderr.read().decode() if proc.stderr else ''}"
                    )
                time.sleep(0.5)
            start = time.monotonic()
            window_start: datetime | None = None
            while (elapsed := time.monotonic() - start) < WINDOW[1]:
                status = http.get("/status").json()
                now = _when(status.get("at")) or datetime.now().astimezone()
                offers = http.get("/prices").json().get("offers", [])
                prices.append((now, offers))
                if elapsed >= WINDOW[0]:
                    window_start = window_start or now
                    gpus = status.get("gpus") or {}
                    total = gpus.get("total") or 0
                    allocated = gpus.get("allocated") or 0
                    samples.append(allocated / total if total else 0.0)
                    live = http.get("/nodes", params={"limit": 1000}).json().get("nodes") or []
                    own_total, own_allocated = own_nodes(live)
                    own_gpus.append(own_total)
                    market_samples.append(market_utilisation(allocated, total, own_total, own_allocated))
                time.sleep(max(0.0, SAMPLE_S - (time.monotonic() - start - elapsed)))
            end = datetime.now().astimezone()
            costs = http.get("/costs").json()
            models = node_models(http)
            consolidation = http.get("/autoscaler/status").json().get("consolidation") or {}
            jobs = all_jobs(http)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    waits = []
    for j in jobs:
        submitted = _when(j.get("submitted_at"))
        if j["tier"] != "FAST" or submitted is None or window_start is None:
            continue
        if not (window_start <= submitted <= end):
            continue
        started = _when(j.get("started_at")) or (None if j["state"] != "PENDING" else end)
        if started is not None:
            waits.append((started - submitted).total_seconds())
    p99 = percentile(waits, 0.99)
    return {
        "command": " ".join(cmd[1:]),
        "window_s": list(WINDOW),
        "samples": len(samples),
        "utilisation_mean": None if not samples else round(sum(samples) / len(samples), 4),
        "utilisation_mean_bought_capacity": None
        if not market_samples
        else round(sum(market_samples) / len(market_samples), 4),
        "own_gpus_max": max(own_gpus, default=0),
        "fast_jobs_in_window": len(waits),
        "fast_p99_wait_s": p99,
        "fast_p99_wait_market_min": None if p99 is None else round(p99 * time_scale / 60, 2),
        **cost_measures(costs, jobs, prices, models, end),
        "paid_gpu_hours": costs.get("paid_gpu_hours"),
        "delivered_gpu_hours": costs.get("delivered_gpu_hours"),
        "idle_gpu_hours": costs.get("idle_gpu_hours"),
        "idle_by_provider": idle_by_provider(costs),
        "sold_back_gpu_hours": costs.get("sold_back_gpu_hours"),
        "flex_run_over_expected_median": run_over_expected(jobs),
        "jobs_submitted": len(jobs),
        "restartable_jobs": sum(1 for j in jobs if j.get("restartable")),
        "jobs_moved_by_consolidation": sum(
            len(d.get("moves", [])) for d in consolidation.get("recent_moves", [])
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-scale", type=float, default=60.0)
    args = parser.parse_args()
    print(json.dumps(measure(args.seed, args.time_scale), indent=2))


if __name__ == "__main__":
    main()
