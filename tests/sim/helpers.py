"""Small hand-built clusters and a loop that drives a policy pod by pod, for the simulator's tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scalar.sim.fragmentation import FragModel, typical_pods
from scalar.sim.policies import make_policy
from scalar.sim.policies.base import Policy, TieBreak
from scalar.sim.state import ClusterState, Pod, model_names_of
from scalar.sim.traces import NodeSpec, PodSpec


def node(name: str, gpus: int = 8, cpu: int = 96_000, mem: int = 393_216, model: str = "G2") -> NodeSpec:
    return NodeSpec(name, cpu, mem, gpus, model if gpus else "")


def pod(
    name: str,
    num_gpu: int = 1,
    milli: int = 1000,
    cpu: int = 4_000,
    mem: int = 8_192,
    spec: tuple[str, ...] = (),
) -> PodSpec:
    return PodSpec(name, cpu, mem, num_gpu, milli if num_gpu else 0, spec)


def make_state(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec]) -> tuple[ClusterState, list[Pod]]:
    models = model_names_of(nodes)
    frag = FragModel(typical_pods(pods), models, max(n.gpus for n in nodes))
    state = ClusterState(nodes, frag, models)
    return state, state.register(pods)


def bind(
    policy: str | Policy,
    state: ClusterState,
    rank: Sequence[int] | None = None,
    tie_break: str = "name",
    seed: int = 0,
) -> Policy:
    rng = np.random.default_rng(seed)
    ranks = np.arange(state.n, dtype=np.int64) if rank is None else np.asarray(rank, dtype=np.int64)
    chooser = make_policy(policy) if isinstance(policy, str) else policy
    chooser.bind(state, TieBreak(tie_break, ranks, rng), rng)
    return chooser


def drive(
    chooser: Policy, state: ClusterState, pods: Sequence[Pod], steps: Sequence[int] | None = None
) -> list[tuple[int, tuple[int, ...]]]:
    """Place ``pods`` in order; (-1, ()) for a pod that fits nowhere. ``steps``: the pods announced
    ``steps[k]`` at a time before any of them is placed (default: one at a time)."""
    out: list[tuple[int, tuple[int, ...]]] = []
    first = 0
    for size in steps if steps is not None else [1] * len(pods):
        batch = pods[first : first + size]
        first += size
        for p in batch:
            chooser.arrived(p)
        for p in batch:
            feasible = state.feasible(p)
            if len(feasible) == 0:
                out.append((-1, ()))
                continue
            n, gpus = chooser.choose(p, feasible)
            state.place(p, n, gpus)
            chooser.placed(p, n)
            out.append((n, tuple(gpus)))
    return out


class ScriptedRng:
    """Stands in for ``numpy.random.Generator`` with the answers a test wants, in order."""

    def __init__(self, permutation: Sequence[int] | None = None, integers: Sequence[int] = ()) -> None:
        self._permutation = list(permutation) if permutation is not None else None
        self._integers = list(integers)
        self.integer_bounds: list[int] = []

    def permutation(self, n: int) -> np.ndarray:
        if self._permutation is None:
            return np.arange(n)
        assert len(self._permutation) == n
        return np.array(self._permutation)

    def integers(self, high: int) -> int:
        self.integer_bounds.append(high)
        value = self._integers.pop(0)
        assert 0 <= value < high
        return value
