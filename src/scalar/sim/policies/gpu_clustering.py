"""GpuClustering (artifact baseline): put pods with the same GPU shape together, fuller nodes first.

A pod's shape tag is ``share`` (part of one GPU) or ``N-gpu`` (N whole GPUs). Score bands: nodes holding
only that tag (75..100], nodes holding it among others (50..75], empty nodes (25..50], others [0..25];
inside a band, fuller nodes score higher. CPU-only pods score 0 everywhere (the tie-break decides).
"""

from __future__ import annotations

import numpy as np

from scalar.sim.policies.base import Policy, TieBreak
from scalar.sim.state import ClusterState, IntArray, Pod

MAX_SCORE = 100
MAX_GPU_MILLI = 8_000


class GpuClustering(Policy):
    name = "gpu-clustering"
    summary = "same GPU shape together (share, 1-gpu, 2-gpu, ...), fuller nodes first"

    def bind(self, state: ClusterState, tie: TieBreak, rng: np.random.Generator) -> None:
        super().bind(state, tie, rng)
        self.tags: dict[int, int] = {}
        self.tag_count = np.zeros((state.n, 0), dtype=np.int64)

    def _tag(self, pod: Pod) -> int:
        key = 0 if pod.shares_gpu else pod.num_gpu
        found = self.tags.get(key)
        if found is None:
            found = self.tags[key] = len(self.tags)
            self.tag_count = np.hstack([self.tag_count, np.zeros((self.state.n, 1), dtype=np.int64)])
        return found

    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        st = self.state
        if pod.num_gpu == 0:
            scores = np.zeros(len(nodes), dtype=np.int64)
        else:
            tag = self._tag(pod)
            counts = self.tag_count[nodes]
            kinds = (counts > 0).sum(axis=1)
            fill = MAX_SCORE // 4 * (MAX_GPU_MILLI - st.idle[nodes]) // MAX_GPU_MILLI
            has = counts[:, tag] > 0
            band = np.where(has, np.where(kinds == 1, 3, 2), np.where(kinds == 0, 1, 0))
            scores = fill + band * (MAX_SCORE // 4)
        node = self.tie.pick(nodes, scores)
        return node, st.best_fit_gpus(pod, node)

    def placed(self, pod: Pod, node: int) -> None:
        if pod.num_gpu > 0 and pod.milli > 0:
            self.tag_count[node, self._tag(pod)] += 1
