"""Protocol A: the FGD artifact's static benchmark (see docs/simulator.md).

One run: sort the pods by name and shuffle them with the run's seed; inflate ("tune") the list to 1.3x the
cluster's GPU capacity by appending pods drawn uniformly with replacement from the original list, or drop
random pods when the list already asks for more; draw the per-run node order used by the ``name``
tie-break; then let the pods arrive one by one, never leaving. A pod that fits nowhere fails and is
dropped. All randomness comes from ``numpy.random.default_rng(seed)`` in that order (the artifact is Go;
its random stream cannot be reproduced, so results agree with it in the mean over seeds, not per seed).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scalar.sim.fragmentation import FragModel, typical_pods
from scalar.sim.metrics import FRAGMENTATION_WINDOW, REPORTED_POINTS, Recorder, arrived_bucket
from scalar.sim.policies import make_policy
from scalar.sim.policies.base import TieBreak
from scalar.sim.state import ClusterState, model_names_of
from scalar.sim.traces import NodeSpec, PodSpec

DEFAULT_RATIO = 1.3
RNG_NAME = "numpy.random.default_rng(seed)"

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Workload:
    """The arrival order of one run (indices into the original pod list) and how it was tuned."""

    order: list[int]
    tuning: str  # "up", "down" or "none"
    requested_milli: int
    target_milli: float


def prepare_workload(
    pods: Sequence[PodSpec], capacity_milli: int, ratio: float, rng: np.random.Generator
) -> Workload:
    """Shuffle, then tune the total GPU request to ``ratio`` x capacity, as the artifact does.

    Tune-up repeats: draw a pod uniformly from the original list; stop if the running total plus that
    pod's *per-GPU* milli would exceed the target (the artifact checks ``gpu_milli``, then adds
    ``num_gpu * gpu_milli``); otherwise append it. Tune-down removes uniformly random pods while the total
    exceeds the target.
    """
    n = len(pods)
    by_name = sorted(range(n), key=lambda i: (pods[i].name, i))
    order = [by_name[int(i)] for i in rng.permutation(n)]
    total = sum(p.total_gpu_milli for p in pods)
    target = ratio * capacity_milli
    if ratio <= 0 or total == 0 or total == target:
        return Workload(order, "none", total, target)
    if total > target:
        while total > target:
            j = int(rng.integers(len(order)))
            total -= pods[order[j]].total_gpu_milli
            del order[j]
        return Workload(order, "down", total, target)
    while True:
        idx = by_name[int(rng.integers(n))]
        pod = pods[idx]
        if total + pod.gpu_milli > target:
            break
        total += pod.total_gpu_milli
        order.append(idx)
    return Workload(order, "up", total, target)


def node_ranks(nodes: Sequence[NodeSpec], rng: np.random.Generator) -> np.ndarray:
    """The artifact's per-run node names: node i in name order gets prefix ``perm[i]``; rank = prefix."""
    by_name = sorted(range(len(nodes)), key=lambda i: nodes[i].name)
    perm = rng.permutation(len(nodes))
    rank = np.zeros(len(nodes), dtype=np.int64)
    rank[np.array(by_name, dtype=np.int64)] = perm
    return rank


@dataclass
class RunResult:
    policy: str
    seed: int
    tie_break: str
    pods: int
    failed_pods: int
    tuning: str
    allocation: dict[int, float | None]
    fragmentation_at_90: float | None
    elapsed_s: float
    placements: list[tuple[int, int, tuple[int, ...]]] | None = field(default=None, repr=False)

    def allocation_at(self, x: int) -> float | None:
        return self.allocation.get(x)


def run_once(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    policy: str,
    seed: int,
    *,
    tie_break: str = "name",
    ratio: float = DEFAULT_RATIO,
    progress: Progress | None = None,
    keep_placements: bool = False,
) -> RunResult:
    """One Protocol A run of ``policy`` with ``seed``."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    models = model_names_of(nodes)
    frag_model = FragModel(typical_pods(pods), models, max(node.gpus for node in nodes))
    state = ClusterState(nodes, frag_model, models)
    workload = prepare_workload(pods, state.capacity_milli, ratio, rng)
    tie = TieBreak(tie_break, node_ranks(nodes, rng), rng)
    views = state.register(pods)
    chooser = make_policy(policy)
    chooser.bind(state, tie, rng)

    recorder = Recorder(state.capacity_milli, len(workload.order))
    placements: list[tuple[int, int, tuple[int, ...]]] | None = [] if keep_placements else None
    low, high = FRAGMENTATION_WINDOW
    window_passed = False
    arrived = 0
    failed = 0
    total = len(workload.order)
    for step, index in enumerate(workload.order):
        pod = views[index]
        arrived += pod.total_milli
        chooser.arrived(pod)
        feasible = state.feasible(pod)
        if len(feasible) == 0:
            failed += 1
            if placements is not None:
                placements.append((index, -1, ()))
        else:
            node, gpus = chooser.choose(pod, feasible)
            state.place(pod, node, gpus)
            chooser.placed(pod, node)
            if placements is not None:
                placements.append((index, node, tuple(gpus)))
        # The fragmentation ratio is only reported at 90% arrived: compute it near there only.
        frag_ratio = math.nan
        bucket = arrived_bucket(arrived, state.capacity_milli)
        if low <= bucket <= high:
            state.track_fragmentation("metric")
            frag_ratio = state.fragmentation_ratio()
        elif bucket > high and not window_passed:
            state.untrack_fragmentation("metric")
            window_passed = True
        recorder.record(arrived, state.used_milli, frag_ratio)
        if progress is not None and (step % 256 == 0 or step == total - 1):
            progress(step + 1, total)
    allocation, fragmentation = recorder.curves()
    return RunResult(
        policy=policy,
        seed=seed,
        tie_break=tie_break,
        pods=total,
        failed_pods=failed,
        tuning=workload.tuning,
        allocation=allocation,
        fragmentation_at_90=fragmentation,
        elapsed_s=time.perf_counter() - started,
        placements=placements,
    )


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 2) if present else None


@dataclass
class Summary:
    """Means over seeds of one policy on one trace."""

    policy: str
    seeds: list[int]
    tie_break: str
    runs: list[RunResult]

    @property
    def pods(self) -> float:
        return round(sum(r.pods for r in self.runs) / len(self.runs), 1)

    @property
    def failed_pods(self) -> float:
        return round(sum(r.failed_pods for r in self.runs) / len(self.runs), 1)

    def allocation_at(self, x: int) -> float | None:
        return _mean([r.allocation.get(x) for r in self.runs])

    @property
    def fragmentation_at_90(self) -> float | None:
        return _mean([r.fragmentation_at_90 for r in self.runs])

    def allocation_curve(self) -> dict[int, float | None]:
        return {x: self.allocation_at(x) for x in range(0, 131)}

    @property
    def reported(self) -> dict[str, float | None]:
        return {str(x): self.allocation_at(x) for x in REPORTED_POINTS}


def run_seeds(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    policy: str,
    seeds: Sequence[int],
    *,
    tie_break: str = "name",
    ratio: float = DEFAULT_RATIO,
    progress: Callable[[int, int, int], None] | None = None,
) -> Summary:
    """Run ``policy`` once per seed; ``progress(seed_index, done, total)`` is called as pods arrive."""
    runs = []
    for i, seed in enumerate(seeds):
        cb: Progress | None = None
        if progress is not None:

            def cb(done: int, total: int, _i: int = i) -> None:
                progress(_i, done, total)

        runs.append(run_once(nodes, pods, policy, seed, tie_break=tie_break, ratio=ratio, progress=cb))
    return Summary(policy, list(seeds), tie_break, runs)
