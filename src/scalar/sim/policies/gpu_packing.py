"""GpuPacking (artifact baseline): shared GPUs first, then idle GPUs of used nodes, then idle nodes."""

from __future__ import annotations

import numpy as np

from scalar.sim.policies.base import Policy
from scalar.sim.state import IntArray, Pod
from scalar.sim.traces import GPU_MILLI

MAX_SCORE = 100


class GpuPacking(Policy):
    name = "gpu-packing"
    summary = "prefer partly used GPUs (tightest), then whole GPUs on used nodes, then empty nodes"

    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        st = self.state
        if pod.num_gpu == 0:
            scores = np.zeros(len(nodes), dtype=np.int64)
        else:
            scores = self._scores(pod, nodes)
        node = self.tie.pick(nodes, scores)
        return node, st.best_fit_gpus(pod, node)

    def _scores(self, pod: Pod, nodes: IntArray) -> IntArray:
        st = self.state
        rows = np.sort(st.gpu[nodes], axis=1)  # ascending: tightest GPUs first
        fully_free = (rows == GPU_MILLI).sum(axis=1)
        all_free = fully_free == st.gpu_count[nodes]
        fit = rows >= pod.milli
        chosen = fit & (np.cumsum(fit, axis=1) <= pod.num_gpu)
        use_free = (chosen & (rows == GPU_MILLI)).sum(axis=1)
        ratio = np.where(chosen, rows * 100 // GPU_MILLI, 0).sum(axis=1)
        idle_node = np.maximum(MAX_SCORE // 3 - fully_free, fully_free)
        new_gpus = np.maximum(MAX_SCORE // 2 - use_free, MAX_SCORE // 3)
        shared = np.maximum(MAX_SCORE - ratio // 10, MAX_SCORE // 2)
        scores: IntArray = np.where(all_free, idle_node, np.where(use_free > 0, new_gpus, shared))
        return scores
