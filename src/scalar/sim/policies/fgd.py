"""FGD (Weng et al., ATC '23): the node whose fragmentation grows least (or shrinks most).

Score of a node = ``int(100 * sigmoid((frag_before - frag_after) / 1000))`` with ``frag`` measured against
the typical pods (``scalar.sim.fragmentation``), as the artifact's plugin does; the integer truncation makes
many nodes tie, and ties go to the run's tie-break. A sharing pod tries every GPU that fits and keeps the
first GPU (by index) with the best score; whole-GPU pods take the first idle GPUs.

Speed: ``frag_before`` is cached per node (only the placed node changes); ``frag_after`` is computed for all
feasible nodes at once from the per-threshold profile, and for sharing pods once per distinct GPU value.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scalar.sim.policies.base import Policy, TieBreak
from scalar.sim.state import ClusterState, IntArray, Pod
from scalar.sim.traces import GPU_MILLI

FloatArray = npt.NDArray[np.float64]


def frag_after(state: ClusterState, pod: Pod, nodes: IntArray) -> tuple[IntArray, IntArray, FloatArray]:
    """Candidate placements and their scaled fragmentation afterwards.

    Returns ``(cand_nodes, cand_values, frag_scaled_after)``: one candidate per (node, distinct fitting GPU
    value) for sharing pods (``cand_values`` = that GPU's idle milli), one per node otherwise (value -1).
    Candidates are grouped by node in ascending node order.
    """
    fm = state.frag_model
    if pod.shares_gpu:
        desc = state.gpu_desc[nodes]
        distinct = desc >= pod.milli
        distinct[:, 1:] &= desc[:, 1:] != desc[:, :-1]
        rows, cols = np.nonzero(distinct)
        cand = nodes[rows]
        value = desc[rows, cols]
        after = value - pod.milli
        thr = fm.thresholds
        before_ge = value[:, None] >= thr
        after_ge = after[:, None] >= thr
        amount = state.amount[cand] - before_ge * value[:, None] + after_ge * after[:, None]
        count = state.count[cand] - before_ge + after_ge
        idle = state.idle[cand] - pod.milli
    else:
        cand = nodes
        value = np.full(len(nodes), -1, dtype=np.int64)
        taken = pod.num_gpu * GPU_MILLI if pod.num_gpu > 0 else 0
        amount = state.amount[cand] - taken
        count = state.count[cand] - pod.num_gpu
        idle = state.idle[cand] - taken
    cpu = state.cpu_left[cand] - pod.cpu
    return cand, value, fm.scaled(cpu, idle, amount, count, state.model[cand])


def sigmoid_scores(gain_scaled: FloatArray, weight_total: float) -> IntArray:
    """``int(100 * sigmoid(gain / 1000))`` with ``gain = gain_scaled / weight_total`` (GPU milli)."""
    x = gain_scaled / weight_total / 1000.0
    with np.errstate(over="ignore"):
        sig = 1.0 / (1.0 + np.exp(-x))
    scores: IntArray = (sig * 100.0).astype(np.int64)
    return scores


def group_starts(cand: IntArray) -> IntArray:
    """Start offsets of the runs of equal node ids in ``cand`` (which is grouped by node)."""
    if len(cand) == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(cand[1:] != cand[:-1]) + 1
    starts: IntArray = np.concatenate(([0], change)).astype(np.int64)
    return starts


def first_gpu_with(state: ClusterState, pod: Pod, node: int, values: IntArray, scores: IntArray) -> int:
    """The first GPU index (artifact order) on ``node`` whose value has the node's best score."""
    best = scores.max()
    good = set(int(v) for v in values[scores == best])
    row = state.gpu[node]
    for g in range(int(state.gpu_count[node])):
        if row[g] >= pod.milli and int(row[g]) in good:
            return g
    raise AssertionError("a fitting GPU must exist on a feasible node")


class FGD(Policy):
    name = "fgd"
    summary = "fragmentation gradient descent: least growth of idle GPU the typical pods cannot use"

    def bind(self, state: ClusterState, tie: TieBreak, rng: np.random.Generator) -> None:
        super().bind(state, tie, rng)
        state.track_fragmentation()

    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        st = self.state
        cand, value, after = frag_after(st, pod, nodes)
        scores = sigmoid_scores(st.frag[cand] - after, st.frag_model.weight_total)
        if not pod.shares_gpu:
            node = self.tie.pick(nodes, scores)
            return node, st.best_fit_gpus(pod, node)
        starts = group_starts(cand)
        node_scores = np.maximum.reduceat(scores, starts)
        node = self.tie.pick(cand[starts], node_scores)
        mine = cand == node
        return node, [first_gpu_with(st, pod, node, value[mine], scores[mine])]
