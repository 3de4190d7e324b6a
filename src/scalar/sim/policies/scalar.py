"""Scalar's own placement policy for GPU-sharing clusters (the simulator's default).

A pod goes to the node (and, for a pod sharing a GPU, the GPU) with the highest score

    score = frag_gain - LAMBDA * strand_change - NU * hole_change          (GPU milli, rounded down to STEP)

* ``frag_gain``: FGD's gradient, the decrease of the node's fragmentation measured against the workload's
  typical pods (``scalar.sim.fragmentation``).
* ``strand_change``: growth of the idle GPU milli the node can no longer feed with CPU or memory.
  ``stranded = max(0, idle - cpu_left / cpu_per_gpu, idle - mem_left / mem_per_gpu)`` where the per-GPU
  needs are those of the workload's GPU pods (total CPU and memory over total GPUs requested). A decrease
  counts ``RHO`` times (putting a light pod where CPU is short is good; starving a node is worse).
  FGD only sees CPU when a single typical pod no longer fits; this sees it coming, which keeps CPU-heavy
  pods (CPU-only ones above all) off GPU nodes that need their cores for their GPUs.
* ``hole_change``: for a pod sharing a GPU, the change of the expected *dead* leftover of that GPU,
  ``hole_waste(idle - milli) - hole_waste(idle)``. ``hole_waste(h)`` is the milli a hole of ``h`` is
  expected to keep unused when pods keep arriving from the workload's per-GPU size mix, each fitting pod
  landing in it at rate ``HOLE_RATE`` x its frequency against one "end" event: so a 320-milli pod goes
  next to a 650 (leaving 30) rather than next to a 470 (leaving 210, which only rare tiny pods fill).

All three terms depend on the node's state only, so scores are cached per (pod shape, node): a pod only
rescores the feasible nodes changed since its shape was last scored (in plain Python when they are few,
with numpy otherwise; both give the same numbers, bit for bit). Ties go to the run's tie-break; among a
node's GPUs with the best score, the tightest one (then the first by index) is used.

The weights were chosen on the default trace (seeds 42..51) and checked on all 17 pod lists
(docs/simulator.md); the typical-pod fragmentation, CPU/memory per GPU and the size mix all come from the
pod list itself, so nothing is specific to one trace.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np

from scalar.sim.fragmentation import DEFAULT_POPULARITY, FragModel, TypicalPod
from scalar.sim.policies.base import Policy, TieBreak
from scalar.sim.state import ClusterState, FloatArray, IntArray, Pod
from scalar.sim.traces import GPU_MILLI

LAMBDA = 2.0
RHO = 0.5
NU = 1.0
HOLE_RATE = 30.0
STEP = 10.0
# Stale (shape, node) batches up to this size are scored in plain Python (cheaper than numpy's overhead).
SMALL_BATCH = 8
# Up to this many placements since a shape was last scored, the changed nodes are checked one by one.
LOG_SCAN_LIMIT = 32

NEG = -np.inf
# The online prior: pods seen so far, each weighing 2^(-age / HALF_LIFE) (age in pods), relearned after
# 1, 2, 4, ... pods and then every RELEARN_EVERY pods. Weights are kept as integers (WEIGHT_SCALE per pod)
# so fragmentation stays exact integer arithmetic in float64, as with the whole-list prior.
HALF_LIFE = 4096
RELEARN_EVERY = 512
WEIGHT_SCALE = 1024


def hole_waste_table(sizes: IntArray, weights: FloatArray, rate: float = HOLE_RATE) -> FloatArray:
    """Expected dead leftover of a GPU hole of ``h`` milli, for h in 0..1000.

    ``w(h) = (h + sum_{s<=h} r p_s w(h - s)) / (1 + sum_{s<=h} r p_s)`` with ``p_s`` the share of per-GPU
    demand ``s`` among GPU pods: the hole ends as it is with weight 1, or first receives a fitting pod.
    """
    waste = np.zeros(GPU_MILLI + 1)
    total = float(weights.sum())
    if total <= 0:
        waste[:] = np.arange(GPU_MILLI + 1)
        return waste
    rate_of = rate * weights / total
    for h in range(GPU_MILLI + 1):
        fits = (sizes <= h) & (sizes > 0)
        r = rate_of[fits]
        waste[h] = (h + float((r * waste[h - sizes[fits]]).sum())) / (1.0 + float(r.sum()))
    return waste


def typical_of(
    weights: dict[tuple[int, int, int, tuple[str, ...]], int], threshold: float
) -> list[TypicalPod]:
    """``typical_pods`` over weighted shapes ``(cpu_milli, gpu_milli, num_gpu, gpu_spec) -> weight``: the
    heaviest shapes covering ``threshold`` of the total weight (ties: larger shape first)."""
    ranked = sorted(weights.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], "|".join(kv[0][3])))
    ranked.reverse()
    need = threshold * sum(weights.values())
    chosen: list[TypicalPod] = []
    cumulative = 0
    for (cpu, milli, num, spec), weight in ranked:
        if cumulative >= need or weight <= 0:
            break
        chosen.append(TypicalPod(cpu, milli, num, spec, weight))
        cumulative += weight
    return chosen


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
        self._seen: dict[tuple[int, int, int, tuple[str, ...]], float] = {}  # pod shape -> decayed weight
        self._seen_shape = np.zeros(0)  # per sim shape id: decayed weight
        self._arrived = 0
        self._arrived_base = 0  # weights are in units where a pod arriving then weighs 1
        self._next_learn = 1
        if self.prior == "list":
            self._learn()  # online: learnt at the first pod (nothing is known before it)

    def _learn(self) -> None:
        """(Re)build everything the prior decides: shape tables, fragmentation model, node profiles, cache."""
        state = self.state
        if self.prior == "list":
            self.fm = state.frag_model
        else:
            weights = {k: round(w * WEIGHT_SCALE) for k, w in self._seen.items()}
            self.fm = FragModel(
                typical_of({k: w for k, w in weights.items() if w > 0}, DEFAULT_POPULARITY),
                state.model_names,
                state.width,
            )
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

    def _observe(self, pod: Pod) -> None:
        """Count an arriving pod into the online prior (never a pod that has not arrived yet)."""
        self._arrived += 1
        if self.prior == "list":
            return
        grow = 2.0 ** ((self._arrived - self._arrived_base) / HALF_LIFE)  # newer pods weigh more
        spec = self._specs.get(pod.spec_id)
        if spec is None:
            spec = self._specs[pod.spec_id] = self.state.spec_of(pod.spec_id)
        key = (pod.cpu, pod.milli, pod.num_gpu, spec)
        self._seen[key] = self._seen.get(key, 0.0) + grow
        if pod.shape >= len(self._seen_shape):
            self._seen_shape = np.concatenate(
                (self._seen_shape, np.zeros(pod.shape + 1 - len(self._seen_shape)))
            )
        self._seen_shape[pod.shape] += grow
        if self._arrived >= self._next_learn:
            self._next_learn = (
                self._next_learn * 2 if self._next_learn < RELEARN_EVERY else self._next_learn + RELEARN_EVERY
            )
            scale = 2.0 ** (-(self._arrived - self._arrived_base) / HALF_LIFE)
            self._seen = {k: w * scale for k, w in self._seen.items()}
            self._seen_shape = self._seen_shape * scale
            self._arrived_base = self._arrived
            self._learn()

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
        if self.prior == "list":
            weight = st.shapes.weights()
        else:
            weight = np.zeros(len(cpu))
            seen = self._seen_shape[: len(cpu)]
            weight[: len(seen)] = seen
        gpu_milli = (num * milli * weight).sum()
        gpu_pod = num > 0
        # CPU and memory the workload's GPU pods need per whole GPU (milli-cores, MiB).
        if gpu_milli > 0:
            self.cpu_per_gpu = float((cpu * weight)[gpu_pod].sum()) * GPU_MILLI / gpu_milli
            self.mem_per_gpu = float((mem * weight)[gpu_pod].sum()) * GPU_MILLI / gpu_milli
        else:
            self.cpu_per_gpu = self.mem_per_gpu = np.inf
        # stranded = max(0, idle - cpu * cpu_gpu, idle - mem * mem_gpu): GPU milli per CPU milli / MiB.
        self.cpu_gpu = GPU_MILLI / self.cpu_per_gpu
        self.mem_gpu = GPU_MILLI / self.mem_per_gpu
        self.hole_waste = hole_waste_table(
            np.where(gpu_pod, milli, 0), np.where(gpu_pod, weight, 0.0), HOLE_RATE
        )
        self.n_shapes = len(cpu)
        self.shape_cpu, self.shape_mem, self.shape_num, self.shape_milli = cpu, mem, num, milli
        self._shape_rows = list(zip(cpu.tolist(), mem.tolist(), num.tolist(), milli.tolist(), strict=True))
        self._hole_waste: list[float] = self.hole_waste.tolist()

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
        self._observe(pod)
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
