"""Failover: two API replicas and two controllers on PostgreSQL, ``kill -9`` of the leading controller.

    .venv/bin/python -m bench.failover            # default lease and a 3 s lease; writes its BENCHMARKS.md section
    .venv/bin/python -m bench.failover --quick    # the 3 s lease only, nothing written

Each (replica, controller) pair runs in its own Linux network namespace ("host"), joined to a bridge in
the root namespace (as tests/agent/netns.py makes them; needs root and iproute2). PostgreSQL listens on
loopback only, so the benchmark relays the bridge address's port to it (a TCP relay in this process); the
client reads over the bridge. Without namespaces (not root, no ``ip netns``) it falls back to loopback and
says so in its output and in the section it writes.

Per lease: start everything on a fresh database, submit a few jobs, let one controller lead and step, then
read ``GET /jobs?limit=20`` from both replicas in a loop (two client threads, one per replica) while the
leading controller is killed with SIGKILL. Failover time: from the kill until the first batch (step) the
other controller commits, read from the log (``batches.at``, the controller's clock; same machine). Also
when the lease changed hands, and the reads' latency before and during the failover (kill until the first
new step): reads never wait for the controller, so the target is no lost latency at all.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.report import machine, replace_section

REPO = Path(__file__).resolve().parent.parent
START, END = "<!-- failover:start -->", "<!-- failover:end -->"
PG_HOST, PG_PORT = "127.0.0.1", 5432
PG_ADMIN = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/postgres"
API_PORT = 8000
CONFIG = """
[server]
rate_per_s = 100000.0
rate_burst = 100000.0
[market]
seed = 7
time_scale = 600
[providers]
enabled = ["sfcompute", "prime"]
[lease]
ttl_s = {ttl}
renew_s = {renew}
[[controller.scale_groups]]
name = "failover"
providers = ["sfcompute", "prime"]
"""


# ------------------------------------------------------------------------------------------- the network


@dataclass
class Net:
    namespaces: list[str]  # "" each: loopback fallback
    addresses: list[str]  # where each host's replica listens
    database_host: str  # where the hosts reach PostgreSQL (the relay on the bridge, or loopback)
    database_port: int
    note: str


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Relay:
    """A TCP relay from ``listen`` to PostgreSQL on loopback (threads; for the benchmark only)."""

    def __init__(self, host: str) -> None:
        self.server = socket.create_server((host, 0))
        self.port = self.server.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection((PG_HOST, PG_PORT))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.stopped = True
        self.server.close()


@contextlib.contextmanager
def network(hosts: int = 2) -> Iterator[Net]:
    """``hosts`` network namespaces on one bridge, or loopback when namespaces cannot be made."""
    tag = f"sfo{os.getpid():x}"[:10]
    bridge = f"{tag}b"
    links: list[str] = []
    spaces: list[str] = []
    relay: Relay | None = None
    try:
        if os.geteuid() != 0 or shutil.which("ip") is None:
            raise RuntimeError("network namespaces need root and iproute2")
        octet = 200 + os.getpid() % 50
        _ip("link", "add", bridge, "type", "bridge")
        links.append(bridge)
        _ip("addr", "add", f"10.201.{octet}.1/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        addresses = []
        for i in range(hosts):
            ns, veth, peer = f"{tag}n{i}", f"{tag}h{i}", f"{tag}p{i}"
            _ip("netns", "add", ns)
            spaces.append(ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            links.append(veth)
            _ip("link", "set", peer, "netns", ns)
            _ip("link", "set", veth, "master", bridge)
            _ip("link", "set", veth, "up")
            address = f"10.201.{octet}.{i + 2}"
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", peer)
            _ip("-n", ns, "link", "set", peer, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            addresses.append(address)
        relay = Relay(f"10.201.{octet}.1")
        note = (
            f"each replica + controller pair in its own network namespace (10.201.{octet}.0/24 over a "
            "bridge; PostgreSQL reached through a TCP relay on the bridge address)"
        )
        yield Net(spaces, addresses, f"10.201.{octet}.1", relay.port, note)
    except RuntimeError as err:
        for link in reversed(links):
            with contextlib.suppress(RuntimeError):
                _ip("link", "del", link)
        for ns in spaces:
            with contextlib.suppress(RuntimeError):
                _ip("netns", "del", ns)
        links, spaces = [], []
        print(f"network namespaces unavailable ({err}); falling back to loopback", flush=True)
        note = f"loopback (network namespaces unavailable: {err})"
        yield Net([""] * hosts, ["127.0.0.1"] * hosts, PG_HOST, PG_PORT, note)
    finally:
        if relay is not None:
            relay.close()
        for ns in spaces:
            with contextlib.suppress(RuntimeError):
                _ip("netns", "del", ns)
        for link in reversed(links):
            with contextlib.suppress(RuntimeError):
                _ip("link", "del", link)


# ------------------------------------------------------------------------------------------- one case


@dataclass
class Reads:
    samples: list[tuple[float, float, bool]] = field(default_factory=list)  # (start epoch s, latency s, ok)
    stop: threading.Event = field(default_factory=threading.Event)

    def loop(self, url: str, token: str) -> None:
        while not self.stop.is_set():
            started, t0 = time.time(), time.perf_counter()
            ok = False
            try:
                request = urllib.request.Request(url, headers={"authorization": f"Bearer {token}"})
                with urllib.request.urlopen(request, timeout=30) as reply:
                    reply.read()
                    ok = reply.status == 200
            except (urllib.error.URLError, OSError):
                ok = False
            self.samples.append((started, time.perf_counter() - t0, ok))


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _window(reads: Reads, start: float, end: float) -> dict[str, Any]:
    inside = [(lat, ok) for at, lat, ok in reads.samples if start <= at < end]
    lat_ms = [lat * 1000 for lat, _ in inside]
    return {
        "reads": len(inside),
        "errors": sum(1 for _, ok in inside if not ok),
        "p50": statistics.median(lat_ms) if lat_ms else float("nan"),
        "p99": _pct(lat_ms, 0.99),
        "max": max(lat_ms, default=float("nan")),
    }


def _wait(what: str, check: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout_s:g} s waiting for {what}")


def run_case(
    net: Net, ttl_s: float, renew_s: float, workdir: Path, baseline_s: float = 3.0
) -> dict[str, Any]:
    name = f"scalar_failover_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    root_url = f"postgresql+psycopg://postgres@{PG_HOST}:{PG_PORT}/{name}"
    host_url = f"postgresql+psycopg://postgres@{net.database_host}:{net.database_port}/{name}"
    config = workdir / f"lease{ttl_s:g}.toml"
    config.write_text(CONFIG.format(ttl=ttl_s, renew=renew_s))
    procs: list[subprocess.Popen[bytes]] = []
    every_log: list[Path] = []
    reads = Reads()
    try:
        from scalar.runtime import ControlPlane, load_settings

        plane = ControlPlane(load_settings(config, {"data_dir": workdir, "database_url": root_url}, {}))
        plane.open()  # migrates; the token the client reads with
        token = plane.create_token("default", "user", "failover bench").token
        store = plane.store
        assert store is not None
        env = {**os.environ, "SCALAR_DATABASE_URL": host_url, "PYTHONPATH": str(REPO / "src")}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        controllers, apis, logs = [], [], []
        for i, (ns, address) in enumerate(zip(net.namespaces, net.addresses, strict=True)):
            prefix = ["ip", "netns", "exec", ns] if ns else []
            base = [*prefix, sys.executable, "-m", "scalar"]
            common = ["--config", str(config), "--data-dir", str(workdir / f"host{i}")]
            port = str(API_PORT) if ns else "0"
            log_c, log_a = workdir / f"c{i}-{ttl_s:g}.log", workdir / f"a{i}-{ttl_s:g}.log"
            controllers.append(
                subprocess.Popen(
                    [*base, "controller", *common], env=env, stdout=log_c.open("wb"), stderr=subprocess.STDOUT
                )
            )
            apis.append(
                subprocess.Popen(
                    [*base, "api", *common, "--host", address, "--port", port],
                    env=env,
                    stdout=log_a.open("wb"),
                    stderr=subprocess.STDOUT,
                )
            )
            logs.append(log_a)
            every_log += [log_c, log_a]
        procs = [*controllers, *apis]
        urls = [
            _wait(
                "a replica", lambda log=log: re.search(r"scalar api on (http://\S+)", log.read_text()), 180
            ).group(1)
            for log in logs
        ]

        def holder() -> str | None:
            lease = store.read_lease(plane.settings.lease_name)
            return None if lease is None else lease.holder

        def leader_pid() -> int | None:
            held = holder()
            pid = None if held is None else int(held.split(":")[1])
            return pid if pid in {c.pid for c in controllers} else None

        first = _wait("a leading controller", leader_pid, 180)
        old_holder = holder()
        for gpus in (1, 2, 8, 1, 4):  # some state to read
            body = f'{{"tier": "FAST", "gpu_count": {gpus}, "expected_duration_sec": 600}}'.encode()
            request = urllib.request.Request(
                f"{urls[0]}/jobs",
                data=body,
                method="POST",
                headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30):
                pass

        def last_batch() -> tuple[int, Any, str]:
            with store.engine.connect() as conn:
                row = conn.exec_driver_sql(
                    "SELECT id, at, holder FROM batches ORDER BY id DESC LIMIT 1"
                ).first()
            return (0, None, "") if row is None else (int(row[0]), row[1], str(row[2]))

        _wait("the leader stepping", lambda: last_batch()[2] == old_holder and last_batch()[0] >= 3, 120)
        threads = [
            threading.Thread(target=reads.loop, args=(f"{url}/jobs?limit=20", token), daemon=True)
            for url in urls
        ]
        for t in threads:
            t.start()
        time.sleep(baseline_s)
        leader = next(c for c in controllers if c.pid == first)
        killed_at = time.time()
        leader.send_signal(signal.SIGKILL)
        lease_at = _wait(
            "the lease to change hands", lambda: holder() != old_holder and time.time(), ttl_s * 4 + 30
        )
        batch = _wait(
            "the other controller's first step",
            lambda: (b := last_batch())[2] not in ("", old_holder) and b,
            ttl_s * 4 + 30,
        )
        step_at = (
            batch[1].replace(tzinfo=UTC).timestamp() if batch[1].tzinfo is None else batch[1].timestamp()
        )
        time.sleep(baseline_s)
        reads.stop.set()
        for t in threads:
            t.join(40)
        plane.stop()
        return {
            "ttl": ttl_s,
            "renew": renew_s,
            "lease_s": lease_at - killed_at,
            "failover_s": step_at - killed_at,
            "before": _window(reads, killed_at - baseline_s, killed_at),
            "during": _window(reads, killed_at, step_at),
            "after": _window(reads, step_at, step_at + baseline_s),
        }
    except RuntimeError as err:  # a timeout: say what the processes said
        tails = "\n".join(f"--- {p.name}:\n" + "\n".join(p.read_text().splitlines()[-15:]) for p in every_log)
        raise RuntimeError(f"{err}\n{tails}") from None
    finally:
        reads.stop.set()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


# ------------------------------------------------------------------------------------------- report


def _row(r: dict[str, Any]) -> str:
    b, d = r["before"], r["during"]
    return (
        f"| {r['ttl']:g} s (renew {r['renew']:g} s) | **{r['failover_s']:.2f}** | {r['lease_s']:.2f} | "
        f"{b['reads']} / {b['errors']} | {b['p50']:.1f} / {b['p99']:.1f} | "
        f"{d['reads']} / {d['errors']} | {d['p50']:.1f} / {d['p99']:.1f} / {d['max']:.1f} |"
    )


def _reads_verdict(results: list[dict[str, Any]]) -> str:
    errors = sum(r["during"]["errors"] for r in results)
    worse = [r for r in results if r["during"]["p99"] > r["before"]["p99"]]
    said = f"{errors} reads failed during the failovers" if errors else "no read failed during the failovers"
    if worse:
        ttls = ", ".join(f"{r['ttl']:g} s" for r in worse)
        by = ", ".join(f"{r['during']['p99'] - r['before']['p99']:.0f} ms" for r in worse)
        return f"{said}; read p99 was higher during than before with the {ttls} lease (by {by})"
    return (
        f"{said}, and read latency during them was no higher than before (lower in this run: the dead "
        "leader's steps no longer compete for the 2 cores)"
    )


def render(results: list[dict[str, Any]], note: str, command: str, load: float) -> str:
    lines = [
        START,
        "## Failover: two API replicas and two controllers on PostgreSQL, `kill -9` of the leader",
        "",
        f"{machine()}, load average {load:.1f} at the start. Setup: {note}; in each, `scalar controller` and `scalar api` (one process each) on one "
        "PostgreSQL database (the built-in market at 600x, authentication on). Two client threads in the "
        "root namespace read `GET /jobs?limit=20` in a loop, one from each replica, while the leading "
        "controller gets SIGKILL. **Failover**: from the kill until the other controller's first step is "
        "in the log (`batches.at`); **lease**: until the lease row names the other controller (polled every "
        "50 ms; the step's time is when it began, so it can precede that). Reads before: the 3 s before "
        "the kill; during: from the kill to that first step.",
        "",
        "| lease TTL | failover s | lease taken s | reads / errors before | p50 / p99 ms before | "
        "reads / errors during | p50 / p99 / max ms during |",
        "|---|---:|---:|---|---|---|---|",
        *(_row(r) for r in results),
        "",
        "A standby takes the lease once it has expired, so failover is bounded by the TTL (at most TTL after "
        "the last renewal, at least TTL less the renewal interval) plus the standby's next tick and its "
        "rebuild by replay; a shorter TTL fails over faster at the price of more lease writes and less "
        "tolerance for a leader's pauses (GC, a slow disk) and clock skew (docs/decisions/storage.md). "
        "Reads come from committed projections on the replicas and never wait for a controller: "
        f"{_reads_verdict(results)}. Jobs submitted meanwhile are accepted into the inbox and stepped by "
        "the new leader.",
        "",
        f"Reproduce: `{command}` (as root for the namespaces; `make bench` runs it).",
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the 3 s lease only; nothing written")
    parser.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    args = parser.parse_args(argv)
    from scalar.runtime.settings import Settings

    defaults = Settings()
    leases = [(3.0, 0.5)] if args.quick else [(defaults.lease_ttl_s, defaults.lease_renew_s), (3.0, 0.5)]
    results = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="scalar-failover-") as tmp, network() as net:
        print(f"network: {net.note}", flush=True)
        for ttl, renew in leases:
            result = run_case(net, ttl, renew, Path(tmp))
            print(_row(result), flush=True)
            results.append(result)
    if not args.quick:
        replace_section(
            args.output,
            render(results, net.note, "sudo .venv/bin/python -m bench.failover", load),
            START,
            END,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
