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

Speed: a node's score for a pod depends only on that node and the pod's shape, and a placement or a
departure changes one node. With the ``name`` tie-break each shape (and GPU-model constraint) keeps one
integer key per node, ``score x 10^9 x N + (N - 1 - rank)`` (infeasible nodes: the smallest int64), and
only the nodes changed since that shape was last decided are scored again; the decision is one argmax.
``bench/speed.py`` checks it against ``scalar.sim.seed_reference`` (the seed's pseudocode, plain Python).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalar.sim.policies.base import Policy, TieBreak
from scalar.sim.state import ClusterState, FloatArray, IntArray, Pod
from scalar.sim.traces import GPU_MILLI

W_UTILIZATION = 1.0
W_FRAGMENTATION = -0.5
SCORE_DIGITS = 9
NO_NODE = np.iinfo(np.int64).min
SMALL_CHANGE = 32  # up to this many changes, list them; beyond, scan the per-node change stamps


class SeedPacking(Policy):
    name = "seed"
    summary = "seed 001: GPU utilization after placement - 0.5 x mean index gap of the chosen GPUs"

    def bind(self, state: ClusterState, tie: TieBreak, rng: np.random.Generator) -> None:
        super().bind(state, tie, rng)
        self._keys: dict[tuple[int, int], list[Any]] = {}  # (shape, spec) -> [keys, changes seen]
        n = max(1, state.n)
        self._tie_key = (n - 1 - tie.rank).astype(np.int64)
        self._n = n

    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        if self.tie.mode == "name":
            found = self.decide(pod)
            if found is not None:
                return found
        scores, _ = self.scores(pod, nodes)
        node = self.tie.pick(nodes, scores)
        return node, self.gpus_for(pod, node)

    def decide(self, pod: Pod) -> tuple[int, list[int]] | None:
        """The node and GPUs for ``pod`` with the ``name`` tie-break, or ``None`` when no node can host it
        (no feasibility pass needed: infeasible nodes carry the smallest key)."""
        st = self.state
        entry = self._keys.get((pod.shape, pod.spec_id))
        changes = st.changes
        if entry is None:
            entry = [self._node_keys(pod, np.arange(st.n)), len(changes)]
            self._keys[(pod.shape, pod.spec_id)] = entry
        elif entry[1] < len(changes):
            if len(changes) - entry[1] <= SMALL_CHANGE:
                keys = entry[0]
                for i in set(changes[entry[1] :]):
                    keys[i] = self._node_key(pod, i)
            else:
                idx = np.flatnonzero(st.stamp > entry[1])
                entry[0][idx] = self._node_keys(pod, idx)
            entry[1] = len(changes)
        keys = entry[0]
        node = int(keys.argmax())
        if keys.item(node) == NO_NODE:
            return None
        return node, self._gpus_py(pod, node)

    def _gpus_py(self, pod: Pod, node: int) -> list[int]:
        """``gpus_for`` in plain Python (one node's row is short: cheaper than numpy calls)."""
        k = pod.num_gpu
        if k == 0:
            return []
        row = self.state.gpu[node].tolist()
        milli = pod.milli
        if k == 1:
            if pod.shares_gpu:
                best = -1
                for g, free in enumerate(row):
                    if free >= milli and (best < 0 or free < row[best]):
                        best = g
                return [best]
            return [row.index(GPU_MILLI)]
        usable = [g for g, free in enumerate(row) if free >= milli]
        start = min(range(len(usable) - k + 1), key=lambda j: usable[j + k - 1] - usable[j])
        return usable[start : start + k]

    def _node_key(self, pod: Pod, i: int) -> int:
        """``_node_keys`` for one node in plain Python: the same float operations in the same order, so
        the same key (numpy's ``round(x, 9)`` is ``rint(x * 1e9) / 1e9``, which ``round`` reproduces)."""
        st = self.state
        if st.cpu_left.item(i) < pod.cpu or st.mem_left.item(i) < pod.mem:
            return int(NO_NODE)
        k = pod.num_gpu
        frag = 0.0
        if k > 0:
            if k > st.width or st.gpu_desc.item(i, k - 1) < pod.milli:
                return int(NO_NODE)
            if pod.spec_id >= 0 and not st.spec_nodes(pod.spec_id).item(i):
                return int(NO_NODE)
            if k > 1:
                usable = [g for g, free in enumerate(st.gpu[i].tolist()) if free >= pod.milli]
                span = min(usable[j + k - 1] - usable[j] for j in range(len(usable) - k + 1))
                frag = (span - (k - 1)) / k
        total = st.gpu_count.item(i) * GPU_MILLI
        util = min((total - st.idle.item(i) + pod.total_milli) / total, 1.0) if total > 0 else 0.0
        score = (W_UTILIZATION * util) + (W_FRAGMENTATION * frag)
        ticks = round(round(score * 1e9) / 1e9 * 1e9)
        return ticks * self._n + self._tie_key.item(i)

    def _node_keys(self, pod: Pod, idx: IntArray) -> IntArray:
        """Integer keys of ``idx``: higher is better, rounded score first, then the smaller tie rank."""
        st = self.state
        ok = (st.cpu_left[idx] >= pod.cpu) & (st.mem_left[idx] >= pod.mem)
        if pod.num_gpu > st.width:
            ok[:] = False
        elif pod.num_gpu > 0:
            ok &= st.gpu_desc[idx, pod.num_gpu - 1] >= pod.milli
            if pod.spec_id >= 0:
                ok &= st.spec_nodes(pod.spec_id)[idx]
        scores, _ = self.scores(pod, idx)
        ticks = np.rint(scores * 10**SCORE_DIGITS).astype(np.int64)
        keys = ticks * self._n + self._tie_key[idx]
        return np.where(ok, keys, NO_NODE)

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
