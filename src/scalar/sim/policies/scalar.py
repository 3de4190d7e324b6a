"""Scalar's placement policy (the simulator's default): the score of ``scalar.domain.packing_scalar``.

The score, its prior and its constants are the domain's, the same code the controller places with
(``[controller] packing_score = "scalar"``); see that module for the formula. What lives here are its fast
paths for Protocol A's thousands of nodes: scores are cached per (pod shape, node) and a pod only rescores
the feasible nodes changed since its shape was last scored, in plain Python from precomputed tables when
they are few, with numpy otherwise. Both give the domain's numbers bit for bit
(``tests/sim/test_scalar_identity.py``). Ties go to the run's tie-break; among a node's GPUs with the best
score, the tightest one (then the first by index) is used.

The weights were chosen on the default trace (seeds 42..51) and checked on all 17 pod lists
(docs/simulator.md). ``scalar`` learns its prior online from the pods seen so far (what the controller can
know); ``scalar-list`` reads it from the whole pod list up front (the future), kept to measure what that is
worth.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np

from scalar.domain.packing_scalar import (
    GPU_MILLI,
    HOLE_RATE,
    LAMBDA,
    NU,
    RHO,
    STEP,
    Scale,
    Shape,
    ShapeWindow,
    Typical,
    make_scale,
)
from scalar.sim.fragmentation import FragModel, TypicalPod
from scalar.sim.policies.base import Policy, TieBreak
from scalar.sim.state import ClusterState, IntArray, Pod

__all__ = ["HOLE_RATE", "ScalarListPolicy", "ScalarPolicy", "shape_of"]

# Stale (shape, node) batches up to this size are scored in plain Python (cheaper than numpy's overhead).
SMALL_BATCH = 8
# Up to this many placements since a shape was last scored, the changed nodes are checked one by one.
LOG_SCAN_LIMIT = 32

NEG = -np.inf


def shape_of(pod: Pod, spec: tuple[str, ...]) -> Shape:
    """The domain's shape of a Protocol A pod (its GPU share is in milli of a GPU: ``gpu_size`` 1000)."""
    need = pod.milli if pod.num_gpu > 0 and pod.milli < GPU_MILLI else None
    return Shape(pod.cpu, pod.mem, pod.num_gpu, need, spec)


class ScalarPolicy(Policy):
    """The score above. Its prior (the typical pods, the CPU and memory per GPU, the per-GPU size mix)
    comes from the pods seen so far (``online``, the default: what the controller can know) or from the
    whole pod list up front (``list``, which reads the future; kept to measure what that is worth)."""

    name = "scalar"
    summary = "FGD gain + CPU/memory stranding look-ahead + expected dead leftover of shared GPUs"
    prior = "online"

    def bind(self, state: ClusterState, tie: TieBreak, rng: np.random.Generator) -> None:
        super().bind(state, tie, rng)
        self._specs: dict[int, tuple[str, ...]] = {}
        self.window = ShapeWindow()
        self._last_arrived = -1
        if self.prior == "list":
            self._learn(self._list_scale())  # online: learnt at the first pod (nothing is known before it)

    def _list_scale(self) -> Scale:
        """The prior of the whole pod list: its typical pods and its shapes' counts."""
        st = self.state
        typical = [
            Typical(t.cpu_milli, t.gpu_milli, t.num_gpu, t.gpu_spec, t.count) for t in st.frag_model.typical
        ]
        cpu, mem, num, milli = st.shapes.arrays()
        weight = st.shapes.weights()
        rows = zip(cpu.tolist(), mem.tolist(), num.tolist(), milli.tolist(), weight.tolist(), strict=True)
        return make_scale(typical, rows)

    def _learn(self, scale: Scale) -> None:
        """(Re)build everything the prior decides: shape tables, fragmentation model, node profiles, cache."""
        state = self.state
        self.scale = scale
        self.fm = FragModel(
            [TypicalPod(t.cpu, t.milli, t.num_gpu, t.models, t.weight) for t in scale.typical],
            state.model_names,
            state.width,
        )
        self.cpu_gpu, self.mem_gpu = scale.cpu_gpu, scale.mem_gpu
        self._hole_waste: list[float] = scale.hole_waste
        self.hole_waste = np.array(scale.hole_waste)
        self._build_shape_tables()
        fm = self.fm
        self.amount, self.count = fm.profile(state.gpu)
        self.frag = fm.scaled(state.cpu_left, state.idle, self.amount, self.count, state.model)
        self.amount_rows: list[list[int]] = self.amount.tolist()
        self.count_rows: list[list[int]] = self.count.tolist()
        self.model_base = state.model * fm.model_stride
        # Nodes in the order placements changed them; per shape, how much of it the cache has absorbed.
        self.changes: list[int] = []
        self.last_change = np.full(state.n, -1, dtype=np.int64)
        # Per node: the idle GPU milli CPU or memory can no longer feed (see the module docstring).
        self.stranded = np.zeros(state.n)
        # The same per-node facts as Python objects, for the small-batch path.
        self._table = fm.table_flat.tolist()
        self._offsets = fm.col_offset.tolist()
        self._thresholds = fm.thresholds.tolist()
        self._levels = fm.cpu_levels.tolist()
        self._model_base = self.model_base.tolist()
        self._cpu_stride = fm.cpu_stride
        self._weight = fm.weight_total
        self._rows: list[tuple[float, float, float, float, float, list[int], list[int], list[int]]] = [
            (0.0, 0.0, 0.0, 0.0, 0.0, [], [], [])
        ] * state.n
        for node in range(state.n):
            self._update_features(node)
        self._reset_cache()

    def arrived(self, pod: Pod) -> None:
        """Count an arriving pod into the online prior (never a pod that has not arrived yet), whether or
        not it will fit: the controller counts every job submitted."""
        self._last_arrived = pod.index
        if self.prior == "list":
            return
        spec = self._specs.get(pod.spec_id)
        if spec is None:
            spec = self._specs[pod.spec_id] = self.state.spec_of(pod.spec_id)
        if self.window.observe(shape_of(pod, spec)):
            self._learn(self.window.prior.at(GPU_MILLI))

    def _reset_cache(self) -> None:
        """Score every shape on every node that can host it, once per group of identical nodes."""
        st = self.state
        shape = (self.n_shapes, st.n)
        self.scores = np.full(shape, NEG)
        self.values = np.full(shape, -1, dtype=np.int64)
        self.seen = [len(self.changes)] * self.n_shapes
        groups: dict[tuple[int, ...], int] = {}
        rep_of = np.zeros(st.n, dtype=np.int64)  # each node's first identical node
        for node in range(st.n):
            key = (
                st.model.item(node),
                st.cpu_left.item(node),
                st.mem_left.item(node),
                *st.gpu_desc[node].tolist(),
            )
            rep_of[node] = groups.setdefault(key, node)
        reps = np.array(sorted(groups.values()), dtype=np.int64)
        for s in range(self.n_shapes):
            num, milli = int(self.shape_num[s]), int(self.shape_milli[s])
            if num > st.width:
                continue
            fits = (st.cpu_left[reps] >= self.shape_cpu[s]) & (st.mem_left[reps] >= self.shape_mem[s])
            if num > 0:
                fits &= st.gpu_desc[reps, num - 1] >= milli
            hosts = reps[fits]
            if len(hosts):
                self._compute(s, hosts)
                self.scores[s] = self.scores[s][rep_of]
                self.values[s] = self.values[s][rep_of]

    # --- workload-derived constants ---------------------------------------------------------------
    def _build_shape_tables(self) -> None:
        st = self.state
        cpu, mem, num, milli = st.shapes.arrays()
        self.n_shapes = len(cpu)
        self.shape_cpu, self.shape_mem, self.shape_num, self.shape_milli = cpu, mem, num, milli
        self._shape_rows = list(zip(cpu.tolist(), mem.tolist(), num.tolist(), milli.tolist(), strict=True))

    def _update_features(self, node: int) -> None:
        st = self.state
        cpu, mem, idle = st.cpu_left.item(node), st.mem_left.item(node), st.idle.item(node)
        stranded = max(idle - cpu * self.cpu_gpu, idle - mem * self.mem_gpu, 0.0)
        self.stranded[node] = stranded
        row = st.gpu[node, : st.gpu_count.item(node)].tolist()
        self._rows[node] = (
            cpu,
            mem,
            idle,
            stranded,
            self.frag.item(node),
            self.amount_rows[node],
            self.count_rows[node],
            sorted(set(row), reverse=True),
        )

    # --- scoring ----------------------------------------------------------------------------------
    def _compute(self, shape: int, nodes: IntArray) -> None:
        """Score ``shape`` on ``nodes`` (all able to host it) and stamp the cache."""
        st = self.state
        fm = self.fm
        num, milli = int(self.shape_num[shape]), int(self.shape_milli[shape])
        shares = num == 1 and milli < GPU_MILLI
        if shares:
            desc = st.gpu_desc[nodes]
            distinct = desc >= milli
            distinct[:, 1:] &= desc[:, 1:] != desc[:, :-1]
            rows, cols = np.nonzero(distinct)
            cand = nodes[rows]
            value = desc[rows, cols]
            after = value - milli
            thr = fm.thresholds
            before_ge = value[:, None] >= thr
            after_ge = after[:, None] >= thr
            amount = self.amount[cand] - before_ge * value[:, None] + after_ge * after[:, None]
            count = self.count[cand] - before_ge + after_ge
            take = milli
        else:
            cand = nodes
            take = num * milli
            amount = self.amount[cand] - take  # whole GPUs: every typical threshold is <= 1000
            count = self.count[cand] - num
        cpu2 = st.cpu_left[cand] - self.shape_cpu[shape]
        idle2 = st.idle[cand] - take
        bucket = np.searchsorted(fm.cpu_levels, cpu2, side="right")
        index = (self.model_base[cand] + bucket * fm.cpu_stride)[:, None] + (count + fm.col_offset)
        usable = fm.table_flat[index]
        frag_after = idle2 * fm.weight_total - (amount * usable).sum(axis=1)
        stranded2 = np.maximum(
            np.maximum(
                idle2 - cpu2 * self.cpu_gpu,
                idle2 - (st.mem_left[cand] - self.shape_mem[shape]) * self.mem_gpu,
            ),
            0.0,
        )
        change = stranded2 - self.stranded[cand]
        score = (self.frag[cand] - frag_after) / fm.weight_total - LAMBDA * np.maximum(change, RHO * change)
        if shares:
            score -= NU * (self.hole_waste[after] - self.hole_waste[value])
            score = np.floor(score / STEP)
            if len(rows) == len(nodes):  # one fitting GPU value per node: nothing to choose
                self.scores[shape, nodes] = score
                self.values[shape, nodes] = value
            else:
                # Per node: the best score, and the tightest GPU value reaching it (values come descending).
                starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
                best = np.maximum.reduceat(score, starts)
                last = np.maximum.reduceat(np.where(score == best[rows], np.arange(len(score)), -1), starts)
                self.scores[shape, nodes] = best
                self.values[shape, nodes] = value[last]
        else:
            self.scores[shape, nodes] = np.floor(score / STEP)

    def _compute_small(self, shape: int, nodes: Sequence[int]) -> None:
        """``_compute`` for a few nodes, in plain Python: the same arithmetic, value for value."""
        cpu_need, mem_need, num, milli = self._shape_rows[shape]
        shares = num == 1 and milli < GPU_MILLI
        take = milli if shares else num * milli
        weight = self._weight
        table, cpu_stride, levels, model_base = self._table, self._cpu_stride, self._levels, self._model_base
        cpu_gpu, mem_gpu, hole_waste = self.cpu_gpu, self.mem_gpu, self._hole_waste
        scores = self.scores[shape]
        values = self.values[shape]
        for node in nodes:
            cpu, mem, idle, stranded, frag, amount, count, distinct = self._rows[node]
            cpu2 = cpu - cpu_need
            idle2 = idle - take
            base = model_base[node] + bisect.bisect_right(levels, cpu2) * cpu_stride
            s2 = max(max(idle2 - cpu2 * cpu_gpu, idle2 - (mem - mem_need) * mem_gpu), 0.0)
            change = s2 - stranded
            penalty = LAMBDA * max(change, RHO * change)
            if not shares:
                used = 0.0
                offset = base - num
                for a, c, o in zip(amount, count, self._offsets, strict=True):
                    used += (a - take) * table[offset + o + c]
                frag_after = idle2 * weight - used
                scores[node] = math.floor(((frag - frag_after) / weight - penalty) / STEP)
                continue
            best = NEG
            best_value = -1
            for value in distinct:  # descending: the last one reaching the best is the tightest
                if value < milli:
                    break
                after = value - milli
                used = 0.0
                for t, a, c, o in zip(self._thresholds, amount, count, self._offsets, strict=True):
                    if value >= t:
                        a -= value
                        c -= 1
                    if after >= t:
                        a += after
                        c += 1
                    used += a * table[base + o + c]
                frag_after = idle2 * weight - used
                score = (frag - frag_after) / weight - penalty
                score -= NU * (hole_waste[after] - hole_waste[value])
                score = math.floor(score / STEP)
                if score >= best:
                    best = score
                    best_value = value
            scores[node] = best
            values[node] = best_value

    # --- policy -----------------------------------------------------------------------------------
    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        if pod.index != self._last_arrived:  # a caller that does not announce arrivals
            self.arrived(pod)
        if pod.shape >= self.n_shapes:
            self._build_shape_tables()
            self._reset_cache()
        shape = pod.shape
        self._refresh_stale(shape)
        node = self.tie.pick(nodes, self.scores[shape][nodes])
        if pod.shares_gpu:
            return node, [self.state.gpu[node].tolist().index(self.values[shape].item(node))]
        return node, self.state.best_fit_gpus(pod, node)

    def _refresh_stale(self, shape: int) -> None:
        """Rescore the nodes whose cached score for ``shape`` is out of date and that could still use it.

        Only nodes changed since the shape was last scored can be out of date. Of those, the ones without
        the shape's CPU, memory or GPUs are skipped: in Protocol A nothing ever leaves a node, so they will
        never host the shape again. (GPU models are not checked: pods of one shape may allow different
        models, and the score does not depend on them.)
        """
        seen = self.seen[shape]
        now = self.seen[shape] = len(self.changes)
        can_host = self.state.resource_mask
        if now - seen <= LOG_SCAN_LIMIT:  # few changes since: look at them one by one
            stale = [n for n in dict.fromkeys(self.changes[seen:]) if can_host.item(n)]
        else:  # many: every node that can host the shape and changed since
            stale = np.flatnonzero(can_host & (self.last_change >= seen)).tolist()
        if len(stale) > SMALL_BATCH:
            self._compute(shape, np.array(sorted(stale), dtype=np.int64))
        elif stale:
            self._compute_small(shape, stale)

    def placed(self, pod: Pod, node: int) -> None:
        st = self.state
        # The node's fragmentation profile against this prior (FragModel.profile, for one row in Python).
        negated = [-v for v in st.gpu_desc[node].tolist()]  # ascending
        prefix = [0]
        for v in negated:
            prefix.append(prefix[-1] - v)
        count = [bisect.bisect_right(negated, -t) for t in self.fm.threshold_list]
        amount = [prefix[c] for c in count]
        self.amount[node], self.count[node] = amount, count
        self.amount_rows[node], self.count_rows[node] = amount, count
        self.frag[node] = self.fm.scaled_py(
            st.cpu_left.item(node),
            st.idle.item(node),
            self.amount_rows[node],
            self.count_rows[node],
            st.model.item(node),
        )
        self.last_change[node] = len(self.changes)
        self.changes.append(node)
        self._update_features(node)


class ScalarListPolicy(ScalarPolicy):
    """``scalar`` with its prior read from the whole pod list up front (future pods included): what the
    simulator ran before the prior was learnt online; kept to measure what reading the future is worth."""

    name = "scalar-list"
    summary = "scalar with the prior of the whole pod list (reads the future; for comparison only)"
    prior = "list"
