"""DotProd (artifact baseline, Tetris): smallest dot product of free (CPU, GPU) and the request."""

from __future__ import annotations

import numpy as np

from scalar.sim.policies.base import Policy
from scalar.sim.state import IntArray, Pod

MAX_CPU_MILLI = 128_000
MAX_GPU_MILLI = 8_000


class DotProd(Policy):
    name = "dotprod"
    summary = "Tetris: 1 - (free . request)/2 on (CPU, GPU) normalised by 128 cores / 8 GPUs; GPU best-fit"

    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        st = self.state
        dot = (st.cpu_left[nodes] / MAX_CPU_MILLI) * (pod.cpu / MAX_CPU_MILLI) + (
            st.idle[nodes] / MAX_GPU_MILLI
        ) * (pod.total_milli / MAX_GPU_MILLI)
        scores = (100.0 * (1.0 - dot / 2.0)).astype(np.int64)
        node = self.tie.pick(nodes, scores)
        return node, st.best_fit_gpus(pod, node)
