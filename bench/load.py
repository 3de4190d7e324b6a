"""Load: many clients submitting and reading jobs (and serverless endpoint requests) over HTTP on loopback.

    .venv/bin/python -m bench.load                      # the full run, writes its section of BENCHMARKS.md
    .venv/bin/python -m bench.load --quick              # a small run, nothing written

A real control plane (engine, store, built-in market 600x faster, authentication on: one user token per
client, spread over four tenants) is served by uvicorn on 127.0.0.1. ``--clients`` asyncio clients (one
``httpx.AsyncClient`` each) make a fixed number of requests in all, or stop at ``--seconds``, whichever
comes first, with no pause between requests: POST /jobs (15%, 1 to 8 GPUs, 2 s), GET /jobs/{id} of
one's own jobs (55%), GET /jobs (10%), and, when endpoints exist, POST /v2/{id}/run (10%) and
GET /v2/{id}/status/{request} (10%). Every answer must be 2xx (an error is any other status or a transport
failure). Afterwards the control plane drains, and from the database alone: every job accepted is in the
log exactly once and the controller has it (no job lost or duplicated), the replayed log keeps the engine's
booking invariants (no GPU double-booked), one market order per purchase key, and every endpoint request
accepted is stored. Reports throughput and p50/p99 latency per route.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from sqlalchemy import func, select

from bench.pgdb import fresh_database
from bench.report import machine, process_cpu_s, replace_section
from scalar.api.app import create_app
from scalar.engine import Controller, event_from_dict
from scalar.providers.builtin import schema as market_schema
from scalar.runtime import ControlPlane, load_settings
from scalar.store import Store, make_engine

REPO = Path(__file__).resolve().parent.parent
START, END = "<!-- load:start -->", "<!-- load:end -->"
SPLIT_START, SPLIT_END = "<!-- load-split:start -->", "<!-- load-split:end -->"
TENANTS = ("ml", "web", "research", "ops")
ENDPOINT_SPEC = {
    "name": "load",
    "imageName": "example/infer:1",
    "gpus": ["ADA_48_PRO", "AMPERE_80"],
    "workersMin": 0,
    "workersMax": 2,
    "scalerType": "QUEUE_DELAY",
    "scalerValue": 2,
    "idleTimeout": 5,
}


@dataclass
class Results:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0
    load_average: float = 0.0
    server_cpu_s: float | None = None  # the `scalar up` process and its API workers, during the load
    api_cpu_s: float | None = None  # the API worker processes alone (None: the API is in `scalar up`)
    client_cpu_s: float = 0.0  # this process (the load client), during the load
    machine_cpu_s: float = 0.0  # every process on the machine, during the load

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.latencies.values())


def _tree_cpu_s(pid: int, *, children: bool = True) -> float:
    """CPU seconds (user + system) of process ``pid`` and (``children``) its descendants, from /proc."""
    total, seen, todo = 0.0, set(), [pid]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            total += process_cpu_s(p)
            for task in Path(f"/proc/{p}/task").iterdir() if children else ():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
    return total


def _machine_cpu_s() -> float:
    """CPU seconds every core spent busy (not idle or waiting for I/O) since boot, from /proc/stat."""
    first = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    values = [int(v) for v in first]
    busy = sum(values[:3]) + sum(values[5:8])  # user nice system + irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


class _Server:
    """uvicorn in a thread on a free loopback port."""

    def __init__(self, app: Any) -> None:
        # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted sockets only then (else each response
        # waits ~40 ms for a delayed ACK: headers and body are two writes)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


def _preload_with(
    src: str, config: Path | None, data_dir: str, db_url: str, nodes: int, pending: int
) -> None:
    """``preload`` run by the checkout at ``src`` (its schema, its event codec), so its ``scalar up`` can
    replay the log it finds: this checkout's events carry fields an older engine does not know."""
    script = (
        "import sys; from pathlib import Path; from bench.load import preload; "
        "from scalar.runtime import load_settings; "
        "c, d, u, n, p = sys.argv[1:]; "
        "s = load_settings(Path(c) if c else None, {'data_dir': Path(d), 'database_url': u, "
        "'time_scale': 600.0, 'tick_s': 0.2, 'market_seed': 7}, {}); "
        "preload(s, int(n), int(p))"
    )
    root = str(Path(__file__).resolve().parent.parent)
    subprocess.run(
        [sys.executable, "-c", script, str(config or ""), data_dir, db_url, str(nodes), str(pending)],
        env={**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{root}"},
        check=True,
    )


def _downgrade_to(src: str, db_url: str) -> None:
    """Take the database at ``db_url`` down to the newest migration the checkout at ``src`` ships (the
    preload wrote it with this checkout's schema), with this checkout's downgrade steps."""
    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from scalar.store.migrate import alembic_config, current_revision

    theirs = Config()
    theirs.set_main_option("script_location", str(Path(src) / "scalar" / "store" / "migrations"))
    head = ScriptDirectory.from_config(theirs).get_current_head()
    if head is None or current_revision(db_url) == head:
        return
    config = alembic_config()
    config.set_main_option("sqlalchemy.url", db_url)
    command.downgrade(config, head)


class _Up:
    """``scalar up --api-workers N`` as its own process (the controller and the built-in market in it, the API
    in N worker processes, or in it too with N = 0), as a user runs it; the load client stays in this
    process."""

    def __init__(
        self,
        workers: int | None,
        data_dir: str,
        config: Path | None,
        db_url: str,
        store: Store,
        src: str | None,
    ) -> None:
        self.command = [
            sys.executable, "-m", "scalar", "up", "--port", "0", "--data-dir", data_dir,
            "--time-scale", "600", "--seed", "7",
        ]  # fmt: skip
        if workers is not None:  # None: a checkout from before --api-workers (``src``)
            self.command += ["--api-workers", str(workers)]
        if config is not None:
            self.command += ["--config", str(config)]
        self.env = {**os.environ, "SCALAR_DATABASE_URL": db_url}
        if src is not None:
            self.env["PYTHONPATH"] = src
        self.log = Path(data_dir) / "up.log"
        self.store = store
        self.proc: Any = None

    def __enter__(self) -> str:
        if "PYTHONPATH" in self.env:  # an older checkout: its schema, so its `scalar up` opens the database
            _downgrade_to(self.env["PYTHONPATH"], self.env["SCALAR_DATABASE_URL"])
        with self.store.read() as tx:
            before = tx.last_seq()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(self.command, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600
        url = None
        while time.monotonic() < deadline and self.proc.poll() is None:
            found = re.search(r"API\s+(http://\S+)", self.log.read_text())
            if found is not None:
                url = found.group(1)
                with self.store.read() as tx:  # and its controller has stepped (rebuilt, then led)
                    if tx.last_seq() > before:
                        return url
            time.sleep(0.2)
        self.__exit__()  # `with` does not exit what did not enter: stop it here, or it runs on
        raise RuntimeError(f"scalar up did not start: {self.log.read_text()[-2000:]}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


async def _call(
    client: httpx.AsyncClient, results: Results, route: str, method: str, path: str, body: Any = None
) -> dict[str, Any] | None:
    started = time.perf_counter()
    try:
        response = await client.request(method, path, json=body)
    except httpx.HTTPError as err:
        results.errors.append(f"{route}: {type(err).__name__}: {err}")
        return None
    results.latencies.setdefault(route, []).append(time.perf_counter() - started)
    results.statuses[(route, response.status_code)] += 1
    if response.status_code >= 300:
        results.errors.append(f"{route}: {response.status_code} {response.text[:200]}")
        return None
    data: dict[str, Any] = response.json()
    return data


async def _client(
    url: str, token: str, endpoint: str | None, results: Results, budget: list[int], stop_at: float, seed: int
) -> None:
    rng = random.Random(seed)
    mine: list[str] = []
    requests: list[str] = []
    headers = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
        while budget[0] > 0 and time.monotonic() < stop_at:
            budget[0] -= 1
            roll = rng.random()
            if endpoint is not None and roll < 0.1:
                got = await _call(
                    client, results, "POST /v2/{id}/run", "POST", f"/v2/{endpoint}/run", {"input": {"n": 1}}
                )
                if got is not None:
                    requests.append(str(got["id"]))
                    results.requests.append((endpoint, str(got["id"])))
            elif endpoint is not None and roll < 0.2 and requests:
                rid = rng.choice(requests)
                await _call(
                    client, results, "GET /v2/{id}/status/{rid}", "GET", f"/v2/{endpoint}/status/{rid}"
                )
            elif roll < 0.35 or not mine:
                body = {"tier": "FAST", "gpu_count": rng.choice((1, 1, 2, 4, 8)), "expected_duration_sec": 2}
                got = await _call(client, results, "POST /jobs", "POST", "/jobs", body)
                if got is not None:
                    mine.append(str(got["id"]))
                    results.jobs.append(str(got["id"]))
            elif roll < 0.9:  # clients poll their jobs far more often than they submit
                await _call(client, results, "GET /jobs/{id}", "GET", f"/jobs/{rng.choice(mine)}")
            else:
                await _call(client, results, "GET /jobs", "GET", "/jobs?limit=20")


async def _load(
    url: str, tokens: list[str], endpoints: list[str | None], requests: int, seconds: float
) -> Results:
    """``endpoints[i]``: the endpoint of client ``i``'s tenant (endpoints are tenant-scoped)."""
    results = Results(load_average=os.getloadavg()[0])
    budget = [requests]
    started = time.monotonic()
    stop_at = started + seconds
    await asyncio.gather(
        *(
            _client(url, t, e, results, budget, stop_at, i)
            for i, (t, e) in enumerate(zip(tokens, endpoints, strict=True))
        )
    )
    results.elapsed_s = time.monotonic() - started
    return results


def check_invariants(plane: ControlPlane, db_url: str, results: Results) -> list[str]:
    """From the database alone: no job lost or duplicated, no GPU double-booked, no purchase made twice,
    every endpoint request stored. Returns the problems found (none expected)."""
    problems: list[str] = []
    store = Store.open(db_url)
    try:
        controller = Controller(plane.settings.controller)
        for batch in store.read_batches():
            controller.step(batch.at, [event_from_dict(e.payload) for e in batch.events])
        with store.read() as tx:
            inbox = tx.list_inbox(kind="submit", limit=10_000_000)
    finally:
        store.close()
    accepted = Counter(results.jobs)
    stored = Counter(i.entity_id for i in inbox)
    if any(n > 1 for n in accepted.values()) or any(n > 1 for n in stored.values()):
        problems.append("a job id was given out twice")
    if set(accepted) - set(stored):  # the inbox also holds the endpoints' worker jobs
        problems.append(f"{len(set(accepted) - set(stored))} accepted jobs missing from the inbox")
    missing = set(accepted) - set(controller.state.jobs)
    if missing:
        problems.append(f"{len(missing)} accepted jobs never reached the controller")
    for node in controller.state.nodes.values():  # no GPU held by two jobs that do not share it
        claimed: Counter[int] = Counter()
        for job_id in node.jobs:
            rec = controller.state.jobs[job_id]
            if not rec.spec.share_gpu:
                claimed.update(rec.placements.get(node.id, ()))
        if any(n > 1 for n in claimed.values()):
            problems.append(f"node {node.id} has a GPU booked twice")
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            twice = conn.execute(
                select(market_schema.orders.c.idempotency_key, func.count())
                .group_by(market_schema.orders.c.provider, market_schema.orders.c.idempotency_key)
                .having(func.count() > 1)
            ).all()
    finally:
        engine.dispose()
    if twice:
        problems.append(f"{len(twice)} purchase keys bought more than once")
    for endpoint, rid in results.requests:
        try:
            plane.endpoints.request_status(endpoint, rid)
        except Exception as err:  # any failure is a lost request
            problems.append(f"endpoint request {rid} lost: {err}")
            break
    return problems


# The state a fleet-scale run starts from (``--nodes``/``--pending``): one block of READY 8-GPU nodes, each
# filled by a long job, and a queue of pending jobs; purchases are capped (``PRELOAD_CONFIG``), so the queue
# stays full for the whole run, as it would at a fleet's busy hour.
PRELOAD_CONFIG = """
[market]
seed = 7
time_scale = 600
[loops]
tick_s = 0.2
[[controller.scale_groups]]
name = "load"
max_slices = 2
"""


def preload(settings: Any, nodes: int, pending: int) -> None:
    """Write ``nodes`` READY nodes (each running one 8-GPU job) and ``pending`` waiting jobs into the log and
    the projections, as steps of a controller would have (the control plane then rebuilds by replay)."""
    from datetime import UTC, datetime, timedelta
    from decimal import Decimal

    from scalar.domain.market import BlockGrant, CapacityRequest, NodeEvent, NodeState, Order, OrderState
    from scalar.domain.offers import Offer
    from scalar.domain.tier import Tier
    from scalar.engine import JobSpec, JobStarted, JobSubmitted, MarketObserved, NodeReported, OrderUpdated
    from scalar.engine import StartWork as Start
    from scalar.runtime.leader import new_event
    from scalar.runtime.projector import Projector

    t = datetime.now(UTC) - timedelta(minutes=5)
    controller = Controller(settings.controller)
    projector = Projector()
    store = Store.open(settings.database_url)
    offer = Offer("sfcompute", "8xH100", "us", Decimal("16"), "H100", 8, 80, 96, 1024)
    ids = tuple(f"pre{i:05d}" for i in range(nodes))
    request = CapacityRequest("sfcompute", "8xH100", nodes, 30 * 86400, None, Tier.FAST, "H100", 8)
    grant = BlockGrant(
        "blk-pre", "sfcompute", "8xH100", "H100", 8, 80, 96, 1024, t, t + timedelta(days=30), Decimal(2), ids
    )
    order = Order("pre", "preloaded", OrderState.FILLED, request, grant)
    rng = random.Random(3)
    long_jobs = [JobSpec(f"job-pre-run-{i:05d}", "FAST", 8, 40, 4, 32, 30 * 86400.0, 5) for i in range(nodes)]
    waiting = [
        JobSpec(f"job-pre-wait-{i:06d}", "FAST", rng.choice((1, 1, 2, 4, 8)), 40, 4, 32, 3600.0, 0)
        for i in range(pending)
    ]
    steps: list[list[Any]] = [
        [MarketObserved("pre-market", (offer,), t, {}, ("sfcompute",))],
        [OrderUpdated("pre-fill", "preloaded", order)],
        [NodeReported(f"pre-ready-{n}", NodeEvent(n, "blk-pre", t, NodeState.READY)) for n in ids],
        [JobSubmitted(f"pre-run-{s.job_id}", s) for s in long_jobs],
    ]
    started: list[Any] = []
    try:
        for k, events in enumerate([*steps, None, [JobSubmitted(f"pre-{s.job_id}", s) for s in waiting]]):
            at = t + timedelta(seconds=k)
            if events is None:  # every long job confirms its start
                events = [JobStarted(f"pre-start-{a.job_id}", a.job_id, a.node_ids[0]) for a in started]
            with store.write() as tx:
                appended = tx.append_batch(at, [new_event(e, at) for e in events])
                story_from = len(controller.state.story)
                actions = controller.step(at, [event_from_dict(e.payload) for e in appended.new_events])
                started += [a for a in actions if isinstance(a, Start)]
                if hasattr(projector, "plan"):
                    plan = projector.plan(controller, at, story_from=story_from)
                    plan.apply(tx, appended.batch_id)
                    committed = plan.committed
                else:  # an older checkout's projector (``--baseline-src``) writes in one call
                    committed = projector.write(
                        tx, controller, at, story_from=story_from, batch_id=appended.batch_id
                    )
            committed()
    finally:
        store.close()


def run(
    clients: int,
    requests: int,
    seconds: float,
    database_url: str | None = None,
    routing_memo: bool = True,
    *,
    api_workers: int | None = None,
    baseline_src: str | None = None,
    nodes: int = 0,
    pending: int = 0,
) -> tuple[Results, list[str]]:
    """One run: the control plane and its API in this process (``api_workers=None``), or ``scalar up
    --api-workers N`` as a process of its own; ``nodes``/``pending`` preload the state. A PostgreSQL
    ``database_url`` names the server: each run gets a fresh database on it, dropped afterwards."""
    drop = None
    if database_url is not None and database_url.startswith("postgresql"):
        database_url, drop = fresh_database(database_url, "scalar_load")
    try:
        return _run(
            clients, requests, seconds, database_url, routing_memo, api_workers, baseline_src, nodes, pending
        )
    finally:
        if drop is not None:
            drop()


def _run(
    clients: int,
    requests: int,
    seconds: float,
    database_url: str | None,
    routing_memo: bool,
    api_workers: int | None,
    baseline_src: str | None,
    nodes: int,
    pending: int,
) -> tuple[Results, list[str]]:
    with tempfile.TemporaryDirectory(prefix="scalar-load-") as tmp:
        db_url = database_url or f"sqlite:///{tmp}/scalar.db"
        config: Path | None = None
        if nodes or pending:
            config = Path(tmp) / "scalar.toml"
            config.write_text(PRELOAD_CONFIG)
        settings = load_settings(
            config,
            {
                "data_dir": Path(tmp),
                "database_url": db_url,
                "time_scale": 600.0,
                "tick_s": 0.2,
                "market_seed": 7,
            },
            {},
        )
        settings = replace(settings, controller=replace(settings.controller, routing_memo=routing_memo))
        if (nodes or pending) and baseline_src is not None:
            _preload_with(baseline_src, config, tmp, db_url, nodes, pending)
        elif nodes or pending:
            preload(settings, nodes, pending)
        plane = ControlPlane(settings)
        in_process = api_workers is None and baseline_src is None
        if in_process:
            plane.start()
        else:
            plane.open()  # tokens and the checks only: `scalar up` runs the control plane
        try:
            tokens = [
                plane.create_token(TENANTS[i % len(TENANTS)], "user", f"load-{i}").token
                for i in range(clients)
            ]
            assert plane.store is not None
            server: Any = (
                _Server(create_app(plane))
                if in_process
                else _Up(api_workers, tmp, config, db_url, plane.store, baseline_src)
            )
            with server as url:
                of_tenant: dict[str, str] = {}  # one endpoint per tenant, created with its own token
                for i, token in enumerate(tokens[: len(TENANTS)]):
                    with httpx.Client(
                        base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=30
                    ) as c:
                        created = c.post("/endpoints", json=ENDPOINT_SPEC)
                        if created.status_code == 201:
                            of_tenant[TENANTS[i]] = str(created.json()["id"])
                endpoints = [of_tenant.get(TENANTS[i % len(TENANTS)]) for i in range(len(tokens))]
                proc = getattr(server, "proc", None)
                server_before = None if proc is None else _tree_cpu_s(proc.pid)
                root_before = None if proc is None else _tree_cpu_s(proc.pid, children=False)
                client_before, machine_before = time.process_time(), _machine_cpu_s()
                results = asyncio.run(_load(url, tokens, endpoints, requests, seconds))
                results.client_cpu_s = time.process_time() - client_before
                results.machine_cpu_s = _machine_cpu_s() - machine_before
                if proc is not None and server_before is not None and root_before is not None:
                    results.server_cpu_s = _tree_cpu_s(proc.pid) - server_before
                    root = _tree_cpu_s(proc.pid, children=False) - root_before
                    if api_workers:  # the API runs in worker processes: the rest is the controller's
                        results.api_cpu_s = results.server_cpu_s - root
                deadline = time.monotonic() + 30  # let the leader consume the inbox
                while time.monotonic() < deadline:
                    with plane.store.read() as tx:
                        if not tx.unconsumed_inbox(1):
                            break
                    time.sleep(0.2)
        finally:
            plane.stop()
        return results, check_invariants(plane, db_url, results)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _comparison(results: Results, before: tuple[Results, list[str]]) -> list[str]:
    old, old_problems = before
    rate, old_rate = results.total / results.elapsed_s, old.total / old.elapsed_s
    every_old = [v for values in old.latencies.values() for v in values]
    every_new = [v for values in results.latencies.values() for v in values]
    return [
        "",
        f"Same run first with routing's straightforward path (`--compare`: no shape-verdict memo, as before): "
        f"{old.total} requests in {old.elapsed_s:.1f} s, {old_rate:.0f} requests/s, {len(old.errors)} errors, "
        f"invariants {'hold' if not old_problems else 'broken: ' + '; '.join(old_problems)}; p50 / p99 over all "
        f"routes {statistics.median(every_old) * 1000:.0f} / {_pct(every_old, 0.99) * 1000:.0f} ms against "
        f"{statistics.median(every_new) * 1000:.0f} / {_pct(every_new, 0.99) * 1000:.0f} ms now: "
        f"**{rate / old_rate:.2f}x** the throughput (one machine, shared and noisy: read ratios, not absolutes).",
    ]


def section(
    results: Results,
    problems: list[str],
    clients: int,
    requests: int,
    seconds: float,
    before: tuple[Results, list[str]] | None = None,
) -> str:
    lines = [
        START,
        "## Load: many clients over HTTP on loopback",
        "",
        f"{clients} clients (one user token each, four tenants), {requests} requests at most within {seconds:g} s, "
        f"against one control plane (SQLite, built-in market 600x, authentication on) on {platform.machine()} "
        f"with {len(os.sched_getaffinity(0))} cores shared with the control plane (load average "
        f"{results.load_average:.1f} when it started; an error is any answer but 2xx, or none within 30 s). "
        f"{results.total} requests in {results.elapsed_s:.1f} s: **{results.total / results.elapsed_s:.0f} requests/s**, "
        f"**{len(results.errors)} errors**; invariants after the run: "
        + (
            "all hold (no job lost or duplicated, no GPU double-booked, no purchase twice, no request lost)."
            if not problems
            else "; ".join(problems)
        ),
        "",
        "| route | requests | per second | p50 ms | p99 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for route, values in sorted(results.latencies.items()):
        lines.append(
            f"| `{route}` | {len(values)} | {len(values) / results.elapsed_s:.0f} | "
            f"{statistics.median(values) * 1000:.1f} | {_pct(values, 0.99) * 1000:.1f} |"
        )
    if before is not None:
        lines += _comparison(results, before)
    lines += [
        "",
        "What bounds it: the API shares the interpreter with the controller in this run (one process); each "
        "step is computed outside its write transaction and stored in a short one (docs/decisions/storage.md), "
        "so a submission waits for that short write, not for the computing; with hundreds of jobs pending, a "
        "step that has new work spends most of its time routing them (`route_demand`, which checks each "
        "group's structural fit once per demand shape: `routing._ShapeVerdicts`), and an idle one skips the "
        "pass (`AutoscaleGate`). The next section runs the API in processes of its own.",
        "",
        f"Reproduce: `.venv/bin/python -m bench.load{' --compare' if before is not None else ''}"
        f"{f' --seconds {seconds:g}' if seconds != 60 else ''}` (`--quick` for a small run, nothing written).",
        END,
    ]
    return "\n".join(lines)


def write_section(text: str, path: Path) -> None:
    replace_section(path, text, START, END)


def split_section(
    runs: list[tuple[str, Results, list[str]]], clients: int, seconds: float, nodes: int, pending: int
) -> str:
    """The side-by-side report of one ``--api-workers 0,N`` run."""
    base = runs[0][1]
    base_rate = base.total / base.elapsed_s
    lines = [
        SPLIT_START,
        f"## Load: API processes side by side ({nodes:,} READY nodes, {pending:,} pending jobs)",
        "",
        f"{clients} clients for {seconds:g} s each, the same mix, against a state preloaded with {nodes:,} READY "
        f"8-GPU nodes (each running a long job) and {pending:,} pending jobs (purchases capped, so the queue "
        "stays full). Each row is `scalar up --api-workers N` as a process of its own (the load client alone in "
        "the benchmark's process): `0` is the API in the controller's process (the shape before this change, "
        "with this change's short step transactions and idle-tick gate); N: the API in N `scalar api` "
        "processes sharing the socket, the controller and the built-in market in the `scalar up` process. Reads: `GET /jobs`, "
        "`GET /jobs/{id}`, `GET /v2/{id}/status/{rid}`; submits: `POST /jobs`, `POST /v2/{id}/run`. `before`: "
        "`scalar up` from the checkout before this change (`--baseline-src`), one process. Ratios are to the "
        "first row.",
        "",
        "`CPU s`: CPU seconds during the load of the server (`scalar up` and its API workers; in brackets the "
        "API workers' part, the rest is the controller and the built-in market), of the load client, and of "
        "every process on the machine (other work included); `ms/req`: the server's CPU per request. The "
        f"machine has {os.cpu_count()} cores: {os.cpu_count()} x the run's seconds is all there is.",
        "",
        "| api workers | requests | req/s | ratio | errors | read p50 / p99 ms | submit p50 / p99 ms | "
        "CPU s: server / client / machine | server ms/req | invariants |",
        "|---:|---:|---:|---:|---:|---|---|---|---:|---|",
    ]
    for workers, results, problems in runs:
        reads = [v for r, vs in results.latencies.items() if r.startswith("GET") for v in vs]
        writes = [v for r, vs in results.latencies.items() if r.startswith("POST") for v in vs]
        rate = results.total / results.elapsed_s

        def pair(values: list[float]) -> str:
            if not values:
                return "-"
            return f"{statistics.median(values) * 1000:.0f} / {_pct(values, 0.99) * 1000:.0f}"

        server = "-" if results.server_cpu_s is None else f"{results.server_cpu_s:.0f}"
        if results.api_cpu_s is not None:
            server += f" ({results.api_cpu_s:.0f})"
        per_request = (
            "-"
            if results.server_cpu_s is None or not results.total
            else f"{results.server_cpu_s * 1000 / results.total:.1f}"
        )
        lines.append(
            f"| {workers} | {results.total} | {rate:.0f} | {rate / base_rate:.2f}x | {len(results.errors)} | "
            f"{pair(reads)} | {pair(writes)} | {server} / {results.client_cpu_s:.0f} / "
            f"{results.machine_cpu_s:.0f} | {per_request} | {'hold' if not problems else '; '.join(problems)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--quick", action="store_true", help="8 clients, 300 requests, nothing written")
    parser.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="first run the same load with routing's straightforward path (no shape-verdict memo), report both",
    )
    parser.add_argument(
        "--api-workers",
        default=None,
        help="comma-separated API process counts to run side by side (e.g. 0,2; 0: the API in the "
        "controller's process), each on a preloaded state (--nodes, --pending)",
    )
    parser.add_argument(
        "--baseline-src",
        default=None,
        help="also run `scalar up` from this source tree (a checkout from before --api-workers), first",
    )
    parser.add_argument("--nodes", type=int, default=1000, help="READY nodes preloaded (with --api-workers)")
    parser.add_argument(
        "--pending", type=int, default=20000, help="pending jobs preloaded (with --api-workers)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.requests, args.seconds = 8, 300, 20.0
    if args.api_workers is not None:
        counts: list[int | None] = [int(c) for c in args.api_workers.split(",") if c.strip()]
        if args.baseline_src:
            counts.insert(0, None)
        runs = []
        for workers in counts:
            print(f"api workers {workers} ...", flush=True)
            results, problems = run(
                args.clients,
                10**9,
                args.seconds,
                args.database_url,
                api_workers=workers,
                baseline_src=args.baseline_src if workers is None else None,
                nodes=args.nodes,
                pending=args.pending,
            )
            for error in results.errors[:5]:
                print("error:", error)
            runs.append(("before" if workers is None else str(workers), results, problems))
        text = split_section(runs, args.clients, args.seconds, args.nodes, args.pending)
        text += (
            f"\n\nReproduce: `.venv/bin/python -m bench.load --api-workers {args.api_workers} --nodes {args.nodes} "
            f"--pending {args.pending} --seconds {args.seconds:g}"
            + (f" --baseline-src {args.baseline_src}`" if args.baseline_src else "`")
            + f" (machine: {machine()}; load average {runs[0][1].load_average:.1f} when it started).\n"
            + SPLIT_END
        )
        print(text)
        if not args.quick:
            replace_section(args.output, text, SPLIT_START, SPLIT_END)
        return 1 if any(r.errors or p for _, r, p in runs) else 0
    before: tuple[Results, list[str]] | None = None
    if args.compare:
        before = run(args.clients, args.requests, args.seconds, args.database_url, routing_memo=False)
    results, problems = run(args.clients, args.requests, args.seconds, args.database_url)
    text = section(results, problems, args.clients, args.requests, args.seconds, before)
    print(text)
    for error in results.errors[:10]:
        print("error:", error)
    if not args.quick:
        write_section(text, args.output)
    return 1 if results.errors or problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
