"""Kubernetes' own resource scorers (what a stock cluster does): CPU and memory only, GPUs best-fit.

``NodeResourcesMostAllocated`` / ``NodeResourcesLeastAllocated`` with their default weights (cpu 1,
memory 1): per resource ``requested*100/capacity`` (most) or ``(capacity-requested)*100/capacity``
(least) in integer arithmetic, where ``requested`` includes the pod being placed, then the mean of the two.
Memory is counted in MiB (the trace's unit) instead of bytes, which can move a score by one point.
"""

from __future__ import annotations

import numpy as np

from scalar.sim.policies.base import Policy
from scalar.sim.state import IntArray, Pod

MAX_SCORE = 100


def _resource_scores(requested: IntArray, capacity: IntArray, most: bool) -> IntArray:
    safe = np.maximum(capacity, 1)
    if most:
        score = requested * MAX_SCORE // safe
    else:
        score = (capacity - requested) * MAX_SCORE // safe
    result: IntArray = np.where((capacity == 0) | (requested > capacity), 0, score)
    return result


class _K8sAllocated(Policy):
    most: bool

    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        st = self.state
        cpu_req = st.cpu_cap[nodes] - st.cpu_left[nodes] + pod.cpu
        mem_req = st.mem_cap[nodes] - st.mem_left[nodes] + pod.mem
        cpu = _resource_scores(cpu_req, st.cpu_cap[nodes], self.most)
        mem = _resource_scores(mem_req, st.mem_cap[nodes], self.most)
        scores = (cpu + mem) // 2
        node = self.tie.pick(nodes, scores)
        return node, st.best_fit_gpus(pod, node)


class K8sMostAllocated(_K8sAllocated):
    name = "k8s-most-allocated"
    summary = "Kubernetes NodeResourcesMostAllocated (CPU, memory); GPU best-fit inside the node"
    most = True


class K8sLeastAllocated(_K8sAllocated):
    name = "k8s-least-allocated"
    summary = "Kubernetes NodeResourcesLeastAllocated (CPU, memory), the stock spreading default"
    most = False
