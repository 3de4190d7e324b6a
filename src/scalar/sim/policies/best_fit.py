"""BestFit (artifact baseline): the node left with the least free CPU and GPU, equally weighted."""

from __future__ import annotations

import numpy as np

from scalar.sim.policies.base import Policy
from scalar.sim.state import IntArray, Pod

MAX_CPU_MILLI = 128_000
MAX_GPU_MILLI = 8_000


class BestFit(Policy):
    name = "best-fit"
    summary = "least free CPU and GPU left after placement (0.5 each, normalised by 128 cores / 8 GPUs)"

    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        st = self.state
        left = (st.cpu_left[nodes] - pod.cpu) / MAX_CPU_MILLI * 0.5 + (
            st.idle[nodes] - pod.total_milli
        ) / MAX_GPU_MILLI * 0.5
        scores = ((1.0 - left) * 100.0).astype(np.int64)
        node = self.tie.pick(nodes, scores)
        return node, st.best_fit_gpus(pod, node)
