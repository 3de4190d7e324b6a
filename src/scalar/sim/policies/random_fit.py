"""Random (artifact baseline): a uniformly random feasible node, and a random fitting GPU on it."""

from __future__ import annotations

import numpy as np

from scalar.sim.policies.base import Policy
from scalar.sim.state import IntArray, Pod


class RandomFit(Policy):
    name = "random"
    summary = "uniform over feasible nodes; a sharing pod takes a uniformly random GPU that fits"

    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        st = self.state
        node = int(nodes[self.rng.integers(len(nodes))])
        if pod.shares_gpu:
            fits = np.flatnonzero(st.gpu[node] >= pod.milli)
            return node, [int(fits[self.rng.integers(len(fits))])]
        return node, st.best_fit_gpus(pod, node)
