"""Seed 001's packer written plainly from the seed's pseudocode: the yardstick for the ``seed`` policy.

``scalar.sim.policies.seed.SeedPacking`` makes the same decisions with numpy over every node at once. This
module is the literal version, one node and one GPU at a time in plain Python, kept only to check that the
fast one decides identically and to measure how much faster it is (``bench/speed.py``). Nothing else uses
it.

The seed's steps, with Protocol A's mapping (GPU memory is GPU milli, a GPU is 1000; expiry and provider
terms are 0 in a static cluster):

1. Filter: enough free CPU and memory, a GPU model the pod allows, and ``possible_gpus``, the GPUs with at
   least the pod's milli free, numbering at least its GPU count.
2. Choose GPUs as the domain's packer does: a pod sharing one GPU takes the tightest GPU that fits (first
   index on ties); a whole GPU, the first idle one; several GPUs, the window of consecutive possible GPUs
   with the smallest index span (first window on ties).
3. Score: ``1.0 * utilization - 0.5 * fragmentation``, utilization the node's GPU milli in use after the
   placement over its total (at most 1), fragmentation the summed gaps between the chosen indices over
   their number; rounded to 9 decimals.
4. The highest score wins; ties go to the node with the smallest tie rank (the artifact's smallest name).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scalar.sim.traces import GPU_MILLI

W_UTILIZATION = 1.0
W_FRAGMENTATION = -0.5


@dataclass(slots=True)
class RefNode:
    """One node as the seed sees it: free CPU and memory, and each GPU's free milli."""

    model: str
    cpu_free: int
    mem_free: int
    gpu_free: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RefPod:
    cpu: int
    mem: int
    num_gpu: int
    milli: int
    models: tuple[str, ...] = ()  # allowed GPU models; empty = any


def choose_gpus(node: RefNode, pod: RefPod, possible: Sequence[int]) -> list[int]:
    """Step 2: which of the possible GPUs the pod takes."""
    if pod.num_gpu == 1:
        if pod.milli < GPU_MILLI:
            tightest = possible[0]
            for g in possible:
                if node.gpu_free[g] < node.gpu_free[tightest]:
                    tightest = g
            return [tightest]
        return [possible[0]]
    best_start = 0
    best_span = None
    for start in range(len(possible) - pod.num_gpu + 1):
        span = possible[start + pod.num_gpu - 1] - possible[start]
        if best_span is None or span < best_span:
            best_span = span
            best_start = start
    return list(possible[best_start : best_start + pod.num_gpu])


def compute_score(node: RefNode, pod: RefPod, chosen: Sequence[int]) -> float:
    """Step 3, the seed's ``compute_score`` without its expiry and provider terms."""
    total = len(node.gpu_free) * GPU_MILLI
    used_before = total - sum(node.gpu_free)
    used_after = used_before + pod.milli * pod.num_gpu
    utilization = min(used_after / total, 1.0) if total > 0 else 0.0
    fragmentation = 0.0
    if len(chosen) > 1:
        ordered = sorted(chosen)
        gaps = [ordered[i + 1] - ordered[i] - 1 for i in range(len(ordered) - 1)]
        fragmentation = sum(gaps) / len(chosen)
    return round(W_UTILIZATION * utilization + W_FRAGMENTATION * fragmentation, 9)


def reference_choose(
    nodes: Sequence[RefNode], pod: RefPod, rank: Sequence[int]
) -> tuple[int, list[int]] | None:
    """The node index and GPUs the seed picks for ``pod``, or ``None`` when no node can host it."""
    best: tuple[float, int, int, list[int]] | None = None  # (score, rank, node, gpus)
    for i, node in enumerate(nodes):
        if node.cpu_free < pod.cpu or node.mem_free < pod.mem:
            continue
        chosen: list[int] = []
        if pod.num_gpu > 0:
            if pod.models and node.model not in pod.models:
                continue
            possible = [g for g, free in enumerate(node.gpu_free) if free >= pod.milli]
            if len(possible) < pod.num_gpu:
                continue
            chosen = choose_gpus(node, pod, possible)
        score = compute_score(node, pod, chosen)
        if best is None or score > best[0] or (score == best[0] and rank[i] < best[1]):
            best = (score, rank[i], i, chosen)
    if best is None:
        return None
    return best[2], best[3]


def place(node: RefNode, pod: RefPod, gpus: Sequence[int]) -> None:
    node.cpu_free -= pod.cpu
    node.mem_free -= pod.mem
    for g in gpus:
        node.gpu_free[g] -= pod.milli


def remove(node: RefNode, pod: RefPod, gpus: Sequence[int]) -> None:
    node.cpu_free += pod.cpu
    node.mem_free += pod.mem
    for g in gpus:
        node.gpu_free[g] += pod.milli
