"""Seed 001's bin-packing scorer, vectorised, making the same decisions as ``scalar.domain.packing``.

Seed 001 scores a node ``1.0 * utilization - 0.5 * fragmentation - 0.3 * expiry + 0.2 * provider``:
utilization is the node's GPU memory in use after placement over its total, fragmentation the summed gaps
between the indices of the GPUs the job takes, over their number. Mapping to Protocol A: GPU memory is GPU
milli (a GPU is 1000); a pod asking less than a whole GPU shares a GPU with other sharing pods; the expiry
and provider terms are 0 (a static cluster has neither contracts nor providers).

The GPUs are chosen as ``scalar.domain.packing.fit_gpus`` does: among the GPUs that can take the pod, the
window of ``num_gpu`` consecutive ones (by index) with the smallest span, then (sharing pods) the least
idle milli left over, then the lowest indices. Scores are compared rounded to 9 decimals, as the domain
does; ties go to the run's tie-break (the domain's is the lowest node id).
"""

from __future__ import annotations

import numpy as np

from scalar.sim.policies.base import Policy
from scalar.sim.state import FloatArray, IntArray, Pod
from scalar.sim.traces import GPU_MILLI

W_UTILIZATION = 1.0
W_FRAGMENTATION = -0.5
SCORE_DIGITS = 9


class SeedPacking(Policy):
    name = "seed"
    summary = "seed 001: GPU utilization after placement - 0.5 x mean index gap of the chosen GPUs"

    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        scores, _ = self.scores(pod, nodes)
        node = self.tie.pick(nodes, scores)
        return node, self.gpus_for(pod, node)

    def scores(self, pod: Pod, nodes: IntArray) -> tuple[FloatArray, FloatArray]:
        """(rounded scores, fragmentation) of ``pod`` on each of ``nodes`` (all able to host it)."""
        st = self.state
        total = st.gpu_count[nodes] * GPU_MILLI
        used_after = total - st.idle[nodes] + pod.total_milli
        util = np.minimum(np.divide(used_after, total, out=np.zeros(len(nodes)), where=total > 0), 1.0)
        frag = np.zeros(len(nodes))
        if pod.num_gpu > 1:
            span, _ = self._best_windows(st.gpu[nodes], pod)
            frag = (span - (pod.num_gpu - 1)) / pod.num_gpu
        score = (W_UTILIZATION * util) + (W_FRAGMENTATION * frag)
        return np.round(score, SCORE_DIGITS), frag

    @staticmethod
    def _best_windows(rows: IntArray, pod: Pod) -> tuple[IntArray, IntArray]:
        """For each row of per-GPU idle milli: the smallest span of ``num_gpu`` usable GPUs and its start.

        Multi-GPU pods take whole GPUs, so "usable" means fully idle here.
        """
        width = rows.shape[1]
        k = pod.num_gpu
        usable = rows >= pod.milli
        # Indices of usable GPUs first, ascending; the rest pushed far right.
        order = np.sort(np.where(usable, np.arange(width), width), axis=1)
        spans = order[:, k - 1 :] - order[:, : width - k + 1]
        # Only windows made of usable GPUs count: start + k <= number of usable GPUs.
        valid = np.arange(width - k + 1)[None, :] <= usable.sum(axis=1)[:, None] - k
        start = np.argmin(np.where(valid, spans, 2 * width), axis=1)
        return spans[np.arange(len(rows)), start], start

    def gpus_for(self, pod: Pod, node: int) -> list[int]:
        """The GPUs ``scalar.domain.packing`` would give ``pod`` on ``node``."""
        st = self.state
        if pod.num_gpu == 0:
            return []
        if pod.num_gpu == 1:
            return st.best_fit_gpus(pod, node) if pod.shares_gpu else st.exclusive_gpus(node, 1)
        row = st.gpu[node : node + 1]
        _, start = self._best_windows(row, pod)
        usable = np.flatnonzero(row[0] >= pod.milli)
        return [int(g) for g in usable[int(start[0]) : int(start[0]) + pod.num_gpu]]
