"""What every placement policy implements, and the shared tie-break among top-scoring nodes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from scalar.sim.state import ClusterState, IntArray, Pod

TIE_BREAKS = ("name", "random")


class TieBreak:
    """Picks one node among those with the top score.

    ``name``: the smallest node name, as the artifact's pinned Kubernetes fork does. The artifact renames
    every node ``"%04d-" + name`` with a seeded random permutation at the start of each run, so the
    smallest name is the node with the lowest ``rank`` (a per-run random order, fixed for the whole run).
    ``random``: uniform among the top nodes, drawn from the run's generator at every decision.
    """

    def __init__(self, mode: str, rank: IntArray, rng: np.random.Generator) -> None:
        if mode not in TIE_BREAKS:
            raise ValueError(f"unknown tie-break {mode!r}; use one of {', '.join(TIE_BREAKS)}")
        self.mode = mode
        self.rank = rank
        self.rng = rng

    def pick(self, nodes: IntArray, scores: npt.NDArray[np.generic]) -> int:
        """The chosen node among ``nodes`` (parallel to ``scores``; higher is better)."""
        top = nodes[scores == scores.max()]
        if len(top) == 1:
            return int(top[0])
        if self.mode == "name":
            return int(top[np.argmin(self.rank[top])])
        return int(top[self.rng.integers(len(top))])


class Policy(ABC):
    """Scores feasible nodes for one pod and chooses the node and its GPUs."""

    name: ClassVar[str]
    summary: ClassVar[str]

    def bind(self, state: ClusterState, tie: TieBreak, rng: np.random.Generator) -> None:
        """Called once before the first pod; keep references, build caches."""
        self.state = state
        self.tie = tie
        self.rng = rng

    @abstractmethod
    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        """Among the feasible ``nodes`` (non-empty), the node to use and the GPU indices on it."""

    def arrived(self, pod: Pod) -> None:  # noqa: B027 - optional hook
        """Called for every arriving pod, before its feasible nodes are known (also for a pod that fits
        nowhere): policies that learn from the pods seen so far count it here."""

    def placed(self, pod: Pod, node: int) -> None:  # noqa: B027 - optional hook
        """Called after the state changed; policies with their own caches update them here."""
