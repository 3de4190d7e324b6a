"""Fast cluster state for the simulator: numpy arrays over nodes, updated one node at a time.

Per node: CPU and memory left, per-GPU idle milli (``gpu``, padded with 0 past the node's GPU count) and
the same sorted descending (``gpu_desc``, so "has k GPUs with >= m free" is one column compare). Policies
that need it switch on fragmentation tracking: the per-threshold profile of ``FragModel``
(``amount``/``count``) and the scaled fragment ``frag`` of every node, recomputed only for the node a
placement changed.

Pods are reduced to *shapes* ``(cpu, memory, num_gpu, gpu_milli)``: policies cache per-shape scores.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scalar.sim.fragmentation import FragModel
from scalar.sim.traces import GPU_MILLI, NodeSpec, PodSpec

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod as the loop sees it: plain ints, its shape id and its GPU-model constraint id (-1 = any)."""

    index: int
    cpu: int
    mem: int
    num_gpu: int
    milli: int
    spec_id: int
    shape: int

    @property
    def total_milli(self) -> int:
        return self.num_gpu * self.milli

    @property
    def shares_gpu(self) -> bool:
        return self.num_gpu == 1 and self.milli < GPU_MILLI


class Shapes:
    """The distinct pod shapes ``(cpu, mem, num_gpu, milli)`` seen so far, with how often each occurs."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, int, int, int], int] = {}
        self._rows: list[tuple[int, int, int, int]] = []
        self.counts: Counter[int] = Counter()
        self._arrays: tuple[IntArray, IntArray, IntArray, IntArray] | None = None

    def intern(self, cpu: int, mem: int, num_gpu: int, milli: int, count: int = 1) -> int:
        key = (cpu, mem, num_gpu, milli)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self._rows)
            self._rows.append(key)
            self._arrays = None
        self.counts[found] += count
        return found

    def __len__(self) -> int:
        return len(self._rows)

    def arrays(self) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """``(cpu, mem, num_gpu, milli)`` as arrays indexed by shape id."""
        if self._arrays is None:
            table = np.array(self._rows, dtype=np.int64).reshape(-1, 4)
            self._arrays = (table[:, 0].copy(), table[:, 1].copy(), table[:, 2].copy(), table[:, 3].copy())
        return self._arrays

    def weights(self) -> FloatArray:
        return np.array([self.counts[i] for i in range(len(self._rows))], dtype=np.float64)


class ClusterState:
    """Mutable state of one simulated cluster. Only ``place`` changes it."""

    def __init__(self, nodes: Sequence[NodeSpec], frag: FragModel, model_names: Sequence[str]) -> None:
        n = len(nodes)
        self.n = n
        self.names = [node.name for node in nodes]
        self.model_names = list(model_names)
        model_index = {name: i for i, name in enumerate(self.model_names)}
        none_row = len(self.model_names)
        self.model: IntArray = np.array(
            [model_index.get(node.model, none_row) if node.gpus > 0 else none_row for node in nodes],
            dtype=np.int64,
        )
        self.width = max(1, max(node.gpus for node in nodes))
        self.gpu_count: IntArray = np.array([node.gpus for node in nodes], dtype=np.int64)
        self.cpu_cap: IntArray = np.array([node.cpu_milli for node in nodes], dtype=np.int64)
        self.mem_cap: IntArray = np.array([node.memory_mib for node in nodes], dtype=np.int64)
        self.cpu_left = self.cpu_cap.copy()
        self.mem_left = self.mem_cap.copy()
        gpu = np.zeros((n, self.width), dtype=np.int64)
        for i, node in enumerate(nodes):
            gpu[i, : node.gpus] = GPU_MILLI
        self.gpu: IntArray = gpu
        self.gpu_desc: IntArray = gpu.copy()
        self.idle: IntArray = gpu.sum(axis=1)
        self.capacity_milli = int(self.idle.sum())
        self.used_milli = 0
        self.frag_model = frag
        self.tracking = False
        self._trackers: set[str] = set()
        self.amount: IntArray = np.zeros((0, 0), dtype=np.int64)
        self.count: IntArray = np.zeros((0, 0), dtype=np.int64)
        self.frag: FloatArray = np.zeros(0)
        self.frag_total = 0.0
        self.shapes = Shapes()
        self.resource_mask: BoolArray = np.ones(n, dtype=bool)
        self._spec_ids: dict[tuple[str, ...], int] = {}
        self._spec_masks: list[BoolArray] = []
        self.changes: list[int] = []  # every node a placement or departure changed, in order
        self.stamp: IntArray = np.zeros(n, dtype=np.int64)  # len(changes) just after each node's last change

    # --- fragmentation ------------------------------------------------------------------------
    def track_fragmentation(self, who: str = "policy") -> None:
        """Keep every node's fragmentation profile up to date until ``who`` stops asking."""
        self._trackers.add(who)
        if self.tracking:
            return
        self.tracking = True
        self.amount, self.count = self.frag_model.profile(self.gpu)
        self.frag = self.frag_model.scaled(self.cpu_left, self.idle, self.amount, self.count, self.model)
        self.frag_total = float(self.frag.sum())
        # Python mirrors of the profile rows: cheaper to update one node at a time.
        self.amount_rows: list[list[int]] = self.amount.tolist()
        self.count_rows: list[list[int]] = self.count.tolist()

    def untrack_fragmentation(self, who: str) -> None:
        """``who`` no longer needs the profile; tracking stops when nobody does."""
        self._trackers.discard(who)
        if not self._trackers:
            self.tracking = False

    def fragmentation_ratio(self) -> float:
        """Fragmented idle GPU milli as % of idle GPU milli (0 when nothing is idle)."""
        idle_total = int(self.idle.sum())
        if idle_total <= 0:
            return 0.0
        if self.tracking:
            total = self.frag_total
        else:
            amount, count = self.frag_model.profile(self.gpu)
            total = float(self.frag_model.scaled(self.cpu_left, self.idle, amount, count, self.model).sum())
        return 100.0 * total / self.frag_model.weight_total / idle_total

    # --- pods -------------------------------------------------------------------------------
    def spec_id(self, spec: tuple[str, ...]) -> int:
        """Intern a GPU-model constraint; -1 means any model."""
        if not spec:
            return -1
        found = self._spec_ids.get(spec)
        if found is None:
            allowed = [i for i, name in enumerate(self.model_names) if name in spec]
            self._spec_masks.append(np.isin(self.model, np.array(allowed, dtype=np.int64)))
            found = self._spec_ids[spec] = len(self._spec_masks) - 1
        return found

    def spec_of(self, spec_id: int) -> tuple[str, ...]:
        """The GPU-model constraint of an interned id (``()`` for -1, any model)."""
        if spec_id < 0:
            return ()
        return next(spec for spec, i in self._spec_ids.items() if i == spec_id)

    def spec_nodes(self, spec_id: int) -> BoolArray:
        """Nodes whose GPU model the constraint allows."""
        return self._spec_masks[spec_id]

    def register(self, pods: Sequence[PodSpec]) -> list[Pod]:
        """Intern the shapes of ``pods`` (counting how often each occurs) and return their ``Pod`` views."""
        out = []
        for index, spec in enumerate(pods):
            shape = self.shapes.intern(spec.cpu_milli, spec.memory_mib, spec.num_gpu, spec.gpu_milli)
            out.append(
                Pod(
                    index,
                    spec.cpu_milli,
                    spec.memory_mib,
                    spec.num_gpu,
                    spec.gpu_milli,
                    self.spec_id(spec.gpu_spec),
                    shape,
                )
            )
        return out

    def make_pod(self, index: int, spec: PodSpec) -> Pod:
        """A ``Pod`` view of one pod without counting its shape (its shape is interned if new)."""
        shape = self.shapes.intern(spec.cpu_milli, spec.memory_mib, spec.num_gpu, spec.gpu_milli, count=0)
        return Pod(
            index,
            spec.cpu_milli,
            spec.memory_mib,
            spec.num_gpu,
            spec.gpu_milli,
            self.spec_id(spec.gpu_spec),
            shape,
        )

    # --- filters ----------------------------------------------------------------------------
    def feasible(self, pod: Pod) -> IntArray:
        """Indices of the nodes that can host ``pod`` now (CPU, memory, model, GPUs), ascending."""
        ok = (self.cpu_left >= pod.cpu) & (self.mem_left >= pod.mem)
        if pod.num_gpu > self.width:
            ok[:] = False
        elif pod.num_gpu > 0:
            ok &= self.gpu_desc[:, pod.num_gpu - 1] >= pod.milli
        # The nodes with the resources, whatever their GPU model: once False, False for good (nothing leaves).
        self.resource_mask = ok
        if pod.num_gpu > 0 and pod.spec_id >= 0:
            ok = ok & self.spec_nodes(pod.spec_id)
        return np.flatnonzero(ok)

    # --- GPU choice inside a node ---------------------------------------------------------------
    def exclusive_gpus(self, node: int, k: int) -> list[int]:
        """The first ``k`` fully idle GPUs by index."""
        free = [g for g, left in enumerate(self.gpu[node].tolist()) if left == GPU_MILLI]
        return free[:k]

    def best_fit_gpus(self, pod: Pod, node: int) -> list[int]:
        """Tightest GPU that fits a sharing pod (first index on ties); whole GPUs: first idle ones."""
        if pod.num_gpu == 0:
            return []
        if not pod.shares_gpu:
            return self.exclusive_gpus(node, pod.num_gpu)
        row = self.gpu[node]
        masked = np.where(row >= pod.milli, row, GPU_MILLI + 1)
        return [int(np.argmin(masked))]

    def first_gpu_with(self, node: int, value: int) -> int:
        """The first GPU index on ``node`` whose idle milli is exactly ``value``."""
        return int(np.flatnonzero(self.gpu[node] == value)[0])

    # --- mutation ---------------------------------------------------------------------------
    def place(self, pod: Pod, node: int, gpus: Sequence[int]) -> None:
        """Bind ``pod`` to ``node`` on ``gpus``. Raises if that would over-commit anything."""
        cpu_left = self.cpu_left.item(node)
        mem_left = self.mem_left.item(node)
        if cpu_left < pod.cpu or mem_left < pod.mem:
            raise ValueError(f"pod {pod.index} does not fit node {self.names[node]} (cpu/memory)")
        if len(gpus) != pod.num_gpu or len(set(gpus)) != len(gpus):
            raise ValueError(f"pod {pod.index} needs {pod.num_gpu} distinct GPUs, got {list(gpus)}")
        before: list[int] = []
        if gpus:
            row = self.gpu[node]
            values = row.tolist()
            count = self.gpu_count.item(node)
            for g in gpus:
                if not 0 <= g < count or values[g] < pod.milli:
                    raise ValueError(f"pod {pod.index} does not fit GPU {g} of node {self.names[node]}")
            for g in gpus:
                before.append(values[g])
                values[g] -= pod.milli
                row[g] = values[g]
            self.gpu_desc[node] = sorted(values, reverse=True)
            self.idle[node] -= pod.total_milli
        self.cpu_left[node] = cpu_left - pod.cpu
        self.mem_left[node] = mem_left - pod.mem
        self.used_milli += pod.total_milli
        self.changes.append(node)
        self.stamp[node] = len(self.changes)
        if self.tracking:
            self._refresh_fragmentation(node, before, pod.milli)

    def remove(self, pod: Pod, node: int, gpus: Sequence[int]) -> None:
        """Undo ``place(pod, node, gpus)`` (a departure; Protocol A never has one, the speed benchmark does)."""
        values = self.gpu[node].tolist()
        for g in gpus:
            values[g] += pod.milli
            if values[g] > GPU_MILLI:
                raise ValueError(f"pod {pod.index} was not on GPU {g} of node {self.names[node]}")
            self.gpu[node, g] = values[g]
        if gpus:
            self.gpu_desc[node] = sorted(values, reverse=True)
            self.idle[node] += pod.total_milli
        self.cpu_left[node] += pod.cpu
        self.mem_left[node] += pod.mem
        self.used_milli -= pod.total_milli
        self.changes.append(node)
        self.stamp[node] = len(self.changes)
        if self.tracking:
            amount, count = self.frag_model.profile(self.gpu[node : node + 1])
            self.amount[node], self.count[node] = amount[0], count[0]
            self.amount_rows[node], self.count_rows[node] = amount[0].tolist(), count[0].tolist()
            new = self.frag_model.scaled_py(
                self.cpu_left.item(node),
                self.idle.item(node),
                self.amount_rows[node],
                self.count_rows[node],
                self.model.item(node),
            )
            self.frag_total += new - self.frag.item(node)
            self.frag[node] = new

    def _refresh_fragmentation(self, node: int, before: Sequence[int], milli: int) -> None:
        fm = self.frag_model
        amount = self.amount_rows[node]
        count = self.count_rows[node]
        if before:
            thresholds = fm.threshold_list
            groups = [(before[0], len(before))] if min(before) == max(before) else [(b, 1) for b in before]
            for value, times in groups:
                # Thresholds up to the new idle milli lose ``milli``; those above it, up to the old idle milli,
                # lose the whole GPU (its milli and its count); higher ones never counted it.
                below = bisect.bisect_right(thresholds, value - milli)
                for j in range(below):
                    amount[j] -= times * milli
                for j in range(below, bisect.bisect_right(thresholds, value)):
                    amount[j] -= times * value
                    count[j] -= times
            self.amount[node] = amount
            self.count[node] = count
        new = fm.scaled_py(
            self.cpu_left.item(node), self.idle.item(node), amount, count, self.model.item(node)
        )
        self.frag_total += new - self.frag.item(node)
        self.frag[node] = new


def model_names_of(nodes: Sequence[NodeSpec]) -> list[str]:
    return sorted({node.model for node in nodes if node.gpus > 0 and node.model})
