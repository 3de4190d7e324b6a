"""GPU fragmentation measured against the workload's typical pods (the FGD paper's definition).

Typical pods: the pod shapes ``(cpu_milli, gpu_milli, num_gpu, gpu_spec)`` of the original pod list, most
frequent first, taken until they make up ``threshold`` (95%) of all pods (CPU-only pods included, as in
the artifact's configuration); their weights are their counts, renormalised over the chosen shapes.

For a node and one typical pod ``t``, the fragment ``frag_t`` is the node's idle GPU milli that ``t``
cannot use: if ``t`` fits (model allowed, enough CPU, ``num_gpu`` GPUs each with ``gpu_milli`` free) it is
the idle milli of the GPUs too small for ``t``; otherwise (or when ``t`` is CPU-only) it is all idle milli.
``frag(node) = sum_t w_t * frag_t(node)``.

With ``L`` the node's idle milli and, for a per-GPU threshold ``m``, ``A_m`` the idle milli on GPUs with at
least ``m`` free and ``C_m`` their count, this is ``L - sum_{t fits} w_t * A_{m_t}``. Everything is kept as
exact integers scaled by the total typical weight ``weight_total`` (so ``frag = frag_scaled / weight_total``),
which makes equal states give bit-identical scores.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scalar.sim.traces import PodSpec

DEFAULT_POPULARITY = 0.95

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class TypicalPod:
    cpu_milli: int
    gpu_milli: int
    num_gpu: int
    gpu_spec: tuple[str, ...]
    count: int


def typical_pods(pods: Sequence[PodSpec], threshold: float = DEFAULT_POPULARITY) -> list[TypicalPod]:
    """The most frequent pod shapes covering ``threshold`` of all pods (ties: larger shape first)."""
    counts = Counter((p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_spec) for p in pods)
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], "|".join(kv[0][3])))
    ranked.reverse()
    need = threshold * len(pods)
    chosen: list[TypicalPod] = []
    cumulative = 0
    for (cpu, milli, num, spec), count in ranked:
        if cumulative >= need:
            break
        chosen.append(TypicalPod(cpu, milli, num, spec, count))
        cumulative += count
    return chosen


class FragModel:
    """Vectorised fragmentation of many node states against a fixed set of typical pods.

    The sum over typical pods is precomputed into a table ``usable[model, cpu_bucket, j, c]``: the weight
    of the typical pods with per-GPU milli ``thresholds[j]`` that a node of that GPU model, with CPU left in
    that bucket and ``c`` GPUs having ``>= thresholds[j]`` free, could host. A node state then costs one
    table lookup per threshold, whatever the number of typical pods.
    """

    def __init__(self, typical: Sequence[TypicalPod], model_names: Sequence[str], max_gpus: int = 8) -> None:
        self.typical = list(typical)
        self.weight_total = float(sum(t.count for t in self.typical))
        gpu_typical = [t for t in self.typical if t.num_gpu > 0 and t.gpu_milli > 0]
        self.thresholds: IntArray = np.array(
            sorted({t.gpu_milli for t in gpu_typical}) or [1], dtype=np.int64
        )
        self.cpu_levels: IntArray = np.array(sorted({t.cpu_milli for t in gpu_typical}), dtype=np.int64)
        self.max_gpus = (
            max(1, max_gpus, *(t.num_gpu for t in gpu_typical)) if gpu_typical else max(1, max_gpus)
        )
        n_models = len(model_names) + 1  # the last row is "no GPU model": it never fits a GPU pod
        col = {int(m): j for j, m in enumerate(self.thresholds)}
        level = {int(c): i for i, c in enumerate(self.cpu_levels)}
        table = np.zeros((n_models, len(self.cpu_levels) + 1, len(self.thresholds), self.max_gpus + 1))
        for t in gpu_typical:
            for i, name in enumerate(model_names):
                if t.gpu_spec and name not in t.gpu_spec:
                    continue
                table[i, level[t.cpu_milli] + 1 :, col[t.gpu_milli], t.num_gpu :] += t.count
        # Flat table and its strides: usable = table_flat[model * model_stride + bucket * cpu_stride
        #                                                   + col_offset[j] + count_j]
        self.table_flat: FloatArray = table.reshape(-1)
        self.model_stride = table.shape[1] * table.shape[2] * table.shape[3]
        self.cpu_stride = table.shape[2] * table.shape[3]
        self.col_offset: IntArray = np.arange(len(self.thresholds), dtype=np.int64) * table.shape[3]
        self._levels = [int(c) for c in self.cpu_levels]
        self._table_list: list[float] = self.table_flat.tolist()
        self._offset_list: list[int] = self.col_offset.tolist()
        self.threshold_list: list[int] = self.thresholds.tolist()

    @property
    def n_thresholds(self) -> int:
        return len(self.thresholds)

    def profile(self, gpu_left: IntArray) -> tuple[IntArray, IntArray]:
        """``(A, C)`` for rows of per-GPU idle milli: idle milli and count of GPUs with >= m free."""
        ge = gpu_left[..., :, None] >= self.thresholds
        amount = (ge * gpu_left[..., :, None]).sum(axis=-2)
        count = ge.sum(axis=-2)
        return amount.astype(np.int64), count.astype(np.int64)

    def scaled(
        self, cpu_left: IntArray, idle: IntArray, amount: IntArray, count: IntArray, model_row: IntArray
    ) -> FloatArray:
        """``frag * weight_total`` for K node states (exact: integer-valued float64)."""
        bucket = np.searchsorted(self.cpu_levels, cpu_left, side="right")
        base = model_row * self.model_stride + bucket * self.cpu_stride
        usable = self.table_flat[base[:, None] + self.col_offset + np.clip(count, 0, self.max_gpus)]
        result: FloatArray = idle * self.weight_total - np.einsum("kj,kj->k", amount, usable)
        return result

    def scaled_py(
        self, cpu_left: float, idle: float, amount: list[int], count: list[int], model_row: int
    ) -> float:
        """``scaled`` for one node given as Python numbers (the same exact arithmetic).

        ``count`` must be a real profile (each entry between 0 and the node's GPU count).
        """
        base = model_row * self.model_stride + bisect.bisect_right(self._levels, cpu_left) * self.cpu_stride
        table = self._table_list
        used = 0.0
        for a, c, o in zip(amount, count, self._offset_list, strict=True):
            used += a * table[base + o + c]
        return idle * self.weight_total - used
