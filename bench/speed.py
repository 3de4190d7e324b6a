"""Speed benchmark: seed 001's packer, literal versus optimized, and Scalar's policy against best-fit.

    python -m bench.speed [--openb-jobs 100000] [--big-jobs 2000] [--no-cache] [--output BENCHMARKS.md]

Part 1 (side by side in one run): a stream of random jobs drawn from the openb pod list's shapes is placed
on a cluster by both ``scalar.sim.seed_reference`` (the seed's pseudocode, plain Python, one node at a
time) and the ``seed`` policy (``scalar.sim.policies.seed``, numpy), each on its own copy of the cluster;
every decision (node and GPUs, or none) is asserted identical, and both apply it. Jobs leave at random
once the cluster's GPUs are 85% allocated, so the cluster stays busy and fragmented. Two scales: the openb
cluster (1,213 GPU nodes) and 10,000 nodes x 8 GPUs; the big cluster is first filled to 85% by the fast
policy alone (the reference would take most of an hour), then both decide the measured jobs: the
reference over the whole stream first, then the optimized one from the same cluster, each decision checked
against the reference's. Decisions per second count the CPU time (``time.process_time``, the machine is
shared) of the decision only (filtering, scoring, choosing), not the bookkeeping of applying it, less
the timer's own cost (``process_time`` is a system call of about 10 microseconds here, measured each run).
The optimized decision is ``SeedPacking.decide`` (cached per-shape node keys, rescored only where the
cluster changed), which is what ``choose`` uses in Protocol A.

Part 2: one full Protocol A run (default trace, seed 42) of ``best-fit``, ``scalar`` and ``fgd``: CPU
time, best of 5 interleaved runs each.

Writes the section between ``<!-- speed:start -->`` and ``<!-- speed:end -->`` of BENCHMARKS.md. Results
are cached in ``bench/.cache/`` by the inputs, the options and the code (simulator and this file); part 2's
timings are cached with them (rerun with ``--no-cache`` to measure again).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import report
from bench.report import replace_section

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / "data" / "traces" / "alibaba-gpu-v2023"
NODES = TRACES / "openb_node_list_gpu_node.csv"
PODS = TRACES / "openb_pod_list_default.csv"
CACHE_DIR = REPO / "bench" / ".cache"
BENCHMARKS = REPO / "BENCHMARKS.md"
START = "<!-- speed:start -->"
END = "<!-- speed:end -->"
CODE_PATHS = (  # what the measured code and its inputs are made of
    "src/scalar/sim/policies",
    "src/scalar/sim/state.py",
    "src/scalar/sim/seed_reference.py",
    "src/scalar/sim/fragmentation.py",
    "src/scalar/sim/traces.py",
    "src/scalar/sim/protocol_a.py",
    "src/scalar/sim/metrics.py",
    "bench/speed.py",
    "bench/protocol_a.py",
)
TARGET_UTILIZATION = 0.85
BIG_NODES = 10_000
BIG_NODE = (96_000, 786_432, 8, "V100M32")  # cpu milli, memory MiB, GPUs, model
SEED = 42
PROTOCOL_A_POLICIES = ("best-fit", "scalar", "fgd")


# --- the job stream ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Job:
    cpu: int
    mem: int
    num_gpu: int
    milli: int
    models: tuple[str, ...] = ()  # allowed GPU models (gpu_spec); empty = any


def job_stream(pods_path: Path, n: int, seed: int) -> list[Job]:
    """``n`` jobs drawn (with replacement, seeded) from the GPU pods of the pod list, shapes as they are."""
    from scalar.sim.traces import read_pods

    shapes = [
        Job(p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.gpu_spec)
        for p in read_pods(pods_path)
        if p.num_gpu
    ]
    rng = np.random.default_rng(seed)
    return [shapes[int(i)] for i in rng.integers(len(shapes), size=n)]


def big_cluster(n: int) -> list[Any]:
    from scalar.sim.traces import NodeSpec

    cpu, mem, gpus, model = BIG_NODE
    return [NodeSpec(f"big-{i:05d}", cpu, mem, gpus, model) for i in range(n)]


# --- the side-by-side run ---------------------------------------------------------------------------------
@dataclass(slots=True)
class SideBySide:
    scale: str
    nodes: int
    gpus: int
    warmup_jobs: int
    jobs: int
    identical: int
    placed: int
    failed: int
    reference_s: float
    optimized_s: float

    @property
    def reference_per_s(self) -> float:
        return self.jobs / self.reference_s if self.reference_s > 0 else 0.0

    @property
    def optimized_per_s(self) -> float:
        return self.jobs / self.optimized_s if self.optimized_s > 0 else 0.0

    @property
    def speedup(self) -> float:
        return self.reference_s / self.optimized_s if self.optimized_s > 0 else 0.0


def side_by_side(
    scale: str, nodes: Sequence[Any], jobs: Sequence[Job], *, warmup: Sequence[Job] = (), seed: int = SEED
) -> SideBySide:
    """Both packers decide every job of ``jobs`` from the same cluster; every decision asserted equal.

    The reference goes first over the whole stream on its own copy of the cluster, recording each
    decision; then the optimized policy decides the same stream from the same starting cluster (the same
    seeded departures, which depend only on the decisions) and each decision is checked against the
    record. Interleaving them job by job would let the reference's walk over every node evict the fast
    path's arrays from the CPU caches and measure that instead.
    """
    from scalar.sim.fragmentation import FragModel
    from scalar.sim.policies.base import TieBreak
    from scalar.sim.policies.seed import SeedPacking
    from scalar.sim.seed_reference import RefNode, RefPod, reference_choose
    from scalar.sim.seed_reference import place as ref_place
    from scalar.sim.seed_reference import remove as ref_remove
    from scalar.sim.state import ClusterState, model_names_of
    from scalar.sim.traces import PodSpec

    rng = np.random.default_rng(seed)
    models = model_names_of(nodes)
    state = ClusterState(nodes, FragModel([], models, max(n.gpus for n in nodes)), models)
    rank = rng.permutation(len(nodes)).astype(np.int64)
    rank_list = [int(r) for r in rank]
    policy = SeedPacking()
    policy.bind(state, TieBreak("name", rank, rng), rng)
    limit = TARGET_UTILIZATION * state.capacity_milli

    def pod_of(i: int, job: Job) -> tuple[Any, RefPod]:
        spec = PodSpec(f"j{i}", job.cpu, job.mem, job.num_gpu, job.milli, job.models)
        return state.make_pod(i, spec), RefPod(job.cpu, job.mem, job.num_gpu, job.milli, job.models)

    # Warm-up: the fast policy alone fills the cluster (departures as in the measured part).
    live: list[tuple[int, int, list[int]]] = []  # (job index, node, gpus)
    pods: list[tuple[Any, RefPod]] = []
    for i, job in enumerate(warmup):
        while live and state.used_milli > limit:
            k = int(rng.integers(len(live)))
            j, node, gpus = live[k]
            live[k] = live[-1]
            live.pop()
            state.remove(pods[j][0], node, gpus)
        pods.append(pod_of(i, job))
        found = policy.decide(pods[i][0])
        if found is not None:
            state.place(pods[i][0], found[0], found[1])
            live.append((i, found[0], list(found[1])))
    base = len(warmup)
    pods += [pod_of(i, job) for i, job in enumerate(jobs, start=base)]
    names = model_names_of(nodes)
    ref_nodes = [
        RefNode(
            model=names[int(state.model[i])] if int(state.model[i]) < len(names) else "",
            cpu_free=int(state.cpu_left[i]),
            mem_free=int(state.mem_left[i]),
            gpu_free=[int(v) for v in state.gpu[i, : int(state.gpu_count[i])]],
        )
        for i in range(state.n)
    ]

    # Pass 1: the reference, on its own copy.
    dep = np.random.default_rng(seed + 1)
    ref_live = list(live)
    used = state.used_milli
    record: list[tuple[int, list[int]] | None] = []
    ref_s = 0.0
    for i in range(base, base + len(jobs)):
        while ref_live and used > limit:
            k = int(dep.integers(len(ref_live)))
            j, node, gpus = ref_live[k]
            ref_live[k] = ref_live[-1]
            ref_live.pop()
            ref_remove(ref_nodes[node], pods[j][1], gpus)
            used -= pods[j][1].num_gpu * pods[j][1].milli
        rpod = pods[i][1]
        t0 = time.process_time()
        expected = reference_choose(ref_nodes, rpod, rank_list)
        ref_s += time.process_time() - t0
        record.append(expected)
        if expected is not None:
            ref_place(ref_nodes[expected[0]], rpod, expected[1])
            ref_live.append((i, expected[0], expected[1]))
            used += rpod.num_gpu * rpod.milli

    # Pass 2: the optimized policy, from the same cluster, checked decision by decision.
    dep = np.random.default_rng(seed + 1)
    opt_s = 0.0
    identical = placed = failed = 0
    for i in range(base, base + len(jobs)):
        while live and state.used_milli > limit:
            k = int(dep.integers(len(live)))
            j, node, gpus = live[k]
            live[k] = live[-1]
            live.pop()
            state.remove(pods[j][0], node, gpus)
        pod = pods[i][0]
        t0 = time.process_time()
        got = policy.decide(pod)
        opt_s += time.process_time() - t0
        expected = record[i - base]
        if (None if got is None else (got[0], list(got[1]))) != expected:
            job = jobs[i - base]
            raise AssertionError(f"{scale}: job {i} {job}: reference chose {expected}, optimized {got}")
        identical += 1
        if got is None:
            failed += 1
            continue
        state.place(pod, got[0], got[1])
        live.append((i, got[0], list(got[1])))
        placed += 1
    # Each timed decision also contains one timer call's own cost (``process_time`` is a system call):
    # take it out of both, as measured here.
    overhead = timer_overhead_s() * len(jobs)
    return SideBySide(
        scale,
        len(nodes),
        int(state.gpu_count.sum()),
        len(warmup),
        len(jobs),
        identical,
        placed,
        failed,
        max(ref_s - overhead, 1e-9),
        max(opt_s - overhead, 1e-9),
    )


def timer_overhead_s(pairs: int = 5000) -> float:
    """The CPU time one ``t0 = process_time(); t1 = process_time()`` pair measures when nothing runs
    between the calls (median of many pairs)."""
    clock = time.process_time
    deltas = []
    for _ in range(pairs):
        t0 = clock()
        deltas.append(clock() - t0)
    deltas.sort()
    return deltas[len(deltas) // 2]


# --- running, with a cache ----------------------------------------------------------------------------
def code_version() -> str:
    digest = hashlib.sha256()
    for rel in CODE_PATHS:
        root = REPO / rel
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*.py") if p.is_file())
        for path in files:
            digest.update(str(path.relative_to(REPO)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_file(options: dict[str, Any], cache_dir: Path, nodes: Path, pods: Path) -> Path:
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    for path in (nodes, pods):
        digest.update(path.read_bytes())
    digest.update(code_version().encode())
    return cache_dir / f"speed-{digest.hexdigest()[:24]}.json"


def measure(
    openb_jobs: int, big_jobs: int, big_nodes: int, protocol_a: bool, nodes_path: Path, pods_path: Path
) -> dict[str, Any]:
    from scalar.sim.traces import read_nodes

    openb_nodes = [n for n in read_nodes(nodes_path) if n.gpus > 0]
    out: dict[str, Any] = {"side_by_side": []}
    runs: list[tuple[str, list[Any], list[Job], list[Job]]] = [
        ("openb", openb_nodes, job_stream(pods_path, openb_jobs, SEED), [])
    ]
    if big_jobs > 0:
        nodes = big_cluster(big_nodes)
        # Enough jobs to fill the big cluster past the target before the measured ones.
        warm = job_stream(pods_path, int(big_nodes * 8 * 1.1), SEED + 1)
        runs.append((f"{big_nodes:,} x 8 GPUs", nodes, job_stream(pods_path, big_jobs, SEED + 2), warm))
    for scale, nodes, jobs, warm in runs:
        started = time.process_time()
        r = side_by_side(scale, nodes, jobs, warmup=warm)
        print(
            f"speed: {scale}: {r.jobs} identical decisions, reference {r.reference_per_s:,.0f}/s, "
            f"optimized {r.optimized_per_s:,.0f}/s ({r.speedup:.0f}x), {time.process_time() - started:.0f} s",
            file=sys.stderr,
        )
        out["side_by_side"].append(
            {
                "scale": r.scale,
                "nodes": r.nodes,
                "gpus": r.gpus,
                "warmup_jobs": r.warmup_jobs,
                "jobs": r.jobs,
                "identical": r.identical,
                "placed": r.placed,
                "failed": r.failed,
                "reference_s": round(r.reference_s, 3),
                "optimized_s": round(r.optimized_s, 3),
                "reference_per_s": round(r.reference_per_s, 1),
                "optimized_per_s": round(r.optimized_per_s, 1),
                "speedup": round(r.speedup, 1),
            }
        )
    if protocol_a:
        out["protocol_a_s"] = {
            k: round(v, 3) for k, v in protocol_a_cpu_s(nodes_path, pods_path, PROTOCOL_A_POLICIES).items()
        }
    return out


def protocol_a_cpu_s(nodes: Path, pods: Path, policies: Sequence[str], repeats: int = 5) -> dict[str, float]:
    """Best-of-``repeats`` CPU time of one full Protocol A run (seed 42) per policy, interleaved."""
    from scalar.sim.protocol_a import run_once
    from scalar.sim.traces import read_nodes, read_pods

    node_list, pod_list = read_nodes(nodes), read_pods(pods)
    best = {p: float("inf") for p in policies}
    for _ in range(repeats):
        for policy in policies:
            started = time.process_time()
            run_once(node_list, pod_list, policy, 42)
            best[policy] = min(best[policy], time.process_time() - started)
    return best


def machine() -> str:
    return report.machine(with_numpy=True)


def render(result: dict[str, Any], command: str) -> str:
    lines = [
        START,
        "## Speed: seed 001's packer, literal and optimized; Scalar's policy against best-fit",
        "",
        f"Command: `{command}`. Machine: {machine()} (shared with other work while measured).",
        "",
        "Random jobs drawn from the GPU pods of `openb_pod_list_default.csv` (their CPU, memory, GPU count and "
        "GPU share as they are), placed one by one; once 85% of the GPUs are allocated, random jobs leave before "
        "each new one, so the cluster stays busy and fragmented. *Reference*: `scalar.sim.seed_reference`, "
        "seed 001's pseudocode in plain Python, one node at a time. *Optimized*: the `seed` policy's fast path "
        "(`SeedPacking.decide`: per pod shape, one integer key per node, rescored only where the cluster "
        "changed; one argmax per decision). The reference decides the whole stream first on its own copy of "
        "the cluster, then the optimized policy decides the same stream from the same cluster and every "
        "decision (node and GPUs, or none) is asserted identical to the reference's (interleaving them job by "
        "job would let the reference's walk over every node evict the fast path's arrays from the CPU caches). "
        "The 10,000-node cluster is filled to 85% by the optimized policy first (warm-up jobs, not compared). "
        "Decisions per second: CPU time (`time.process_time`) of the decision only (filter, score, choose), "
        "not of applying it.",
        "",
        "| cluster | GPUs | jobs compared | identical | placed / failed | reference decisions/s | "
        "optimized decisions/s | speed-up |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in result["side_by_side"]:
        lines.append(
            f"| {r['scale']} ({r['nodes']:,} nodes) | {r['gpus']:,} | {r['jobs']:,} | {r['identical']:,} | "
            f"{r['placed']:,} / {r['failed']:,} | {r['reference_per_s']:,.0f} | {r['optimized_per_s']:,.0f} | "
            f"**{r['speedup']:.0f}x** |"
        )
    big = [r for r in result["side_by_side"] if r["nodes"] >= BIG_NODES]
    if big:
        ok = "met" if big[0]["speedup"] >= 100 else "**missed**"
        lines += ["", f"Target at least 100x the reference at 10,000 nodes: {ok} ({big[0]['speedup']:.0f}x)."]
    pa = result.get("protocol_a_s")
    if pa:
        bf = pa.get("best-fit") or 0.0
        lines += [
            "",
            "One full Protocol A run (default trace, about 10,800 pods after inflation, seed 42): CPU time, "
            "best of 5 interleaved runs:",
            "",
            "| policy | seconds per run | x best-fit | target |",
            "|---|---:|---:|---|",
        ]
        targets = {"scalar": "no slower than 2x best-fit", "fgd": "under 5 s"}
        for name in ("best-fit", "scalar", "fgd"):
            if name in pa:
                ratio = pa[name] / bf if bf else 0.0
                lines.append(f"| {name} | {pa[name]:.2f} | {ratio:.2f} | {targets.get(name, '')} |")
    lines.append(END)
    return "\n".join(lines)


def write_section(path: Path, body: str) -> None:
    replace_section(path, body, START, END)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.speed", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=Path, default=NODES, help="node list (openb format)")
    parser.add_argument("--pods", type=Path, default=PODS, help="pod list whose GPU pods give the job shapes")
    parser.add_argument("--openb-jobs", type=int, default=100_000)
    parser.add_argument("--big-jobs", type=int, default=2_000)
    parser.add_argument("--big-nodes", type=int, default=BIG_NODES)
    parser.add_argument("--no-protocol-a", action="store_true", help="skip the full Protocol A timings")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    parser.add_argument("--output", type=Path, default=BENCHMARKS)
    args = parser.parse_args(argv)
    options = {
        "openb_jobs": args.openb_jobs,
        "big_jobs": args.big_jobs,
        "big_nodes": args.big_nodes,
        "protocol_a": not args.no_protocol_a,
    }
    path = cache_file(options, args.cache_dir, args.nodes, args.pods)
    if not args.no_cache and path.exists():
        result = json.loads(path.read_text())
        print("speed: cached", file=sys.stderr)
    else:
        result = measure(
            args.openb_jobs, args.big_jobs, args.big_nodes, not args.no_protocol_a, args.nodes, args.pods
        )
        args.cache_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))
    shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-cache"]
    command = " ".join(["python -m bench.speed", *shown])
    write_section(args.output, render(result, command.strip()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
