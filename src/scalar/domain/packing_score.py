"""Seed 001's node score and the choice of GPUs on one node.

The score is the seed's ``compute_score``, term for term::

    score = 1.0 * utilization - 0.5 * fragmentation - 0.3 * expiry_penalty + 0.2 * provider_bonus

with ``provider_bonus`` 0.2 (job of 8+ GPUs on SFCompute) or 0.1 (job below 8 GPUs on Prime Intellect), so
the weighted provider term is 0.04 or 0.02. The seed's worked examples 1 and 3 disagree with each other on
this term; the code wins (docs/seeds/001-packing.md).

Beyond the seed, the GPUs are not the first N that fit but the set that minimises the seed's own
fragmentation measure, and the score is computed on that set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scalar.domain.offers import PRIME, SFCOMPUTE
from scalar.domain.packing_model import GpuSlot, Job, Node

LARGE_JOB_GPUS = 8
SFCOMPUTE_BONUS = 0.2
PRIME_BONUS = 0.1
# Scores closer than this count as equal, so that float noise cannot decide between equal nodes.
SCORE_TIE_DIGITS = 9


@dataclass(frozen=True, slots=True)
class ScoreWeights:
    """The seed's weights (``w1``..``w4``). Signs are part of the weight, as in the seed."""

    utilization: float = 1.0
    fragmentation: float = -0.5
    expiry: float = -0.3
    provider: float = 0.2


SEED_WEIGHTS = ScoreWeights()


@dataclass(frozen=True, slots=True)
class ScoreBreakdown:
    """One node's score and the four raw terms it is made of (before weighting)."""

    utilization: float
    fragmentation: float
    expiry_penalty: float
    provider_bonus: float
    score: float


def provider_hint(gpu_count: int) -> str:
    """The seed's provider for new capacity: Prime Intellect below 8 GPUs, SFCompute from 8.

    Only a hint: procurement owns the real choice of provider.
    """
    return SFCOMPUTE if gpu_count >= LARGE_JOB_GPUS else PRIME


def utilization_after(total_vram_gb: float, used_vram_gb: float, job: Job) -> float:
    """The node's VRAM utilization once the job is on it, capped at 1.0 (0.0 for a node without VRAM)."""
    if total_vram_gb <= 0:
        return 0.0
    used_after = used_vram_gb + job.vram_per_gpu_gb * job.gpu_count
    return min(used_after / total_vram_gb, 1.0)


def fragmentation(indices: Sequence[int]) -> float:
    """The seed's measure: the gaps between the sorted chosen GPU indices, summed, over the number of GPUs.

    ``[0, 1, 2, 3]`` -> 0.0; ``[0, 2, 4, 6]`` -> 3 / 4 = 0.75.
    """
    if len(indices) <= 1:
        return 0.0
    ordered = sorted(indices)
    gaps = sum(ordered[i + 1] - ordered[i] - 1 for i in range(len(ordered) - 1))
    return gaps / len(ordered)


def expiry_penalty(time_to_expiry_s: float, expected_duration_sec: float) -> float:
    """``1 - tte / (2 * duration)`` when the node ends within twice the job's duration, else 0."""
    threshold = expected_duration_sec * 2
    if threshold <= 0 or time_to_expiry_s >= threshold:
        return 0.0
    return 1.0 - (time_to_expiry_s / threshold)


def provider_bonus(provider: str, gpu_count: int) -> float:
    """0.2 for a job of 8+ GPUs on SFCompute, 0.1 for a smaller job on Prime Intellect, else 0."""
    if gpu_count >= LARGE_JOB_GPUS and provider == SFCOMPUTE:
        return SFCOMPUTE_BONUS
    if gpu_count < LARGE_JOB_GPUS and provider == PRIME:
        return PRIME_BONUS
    return 0.0


def combine(
    utilization: float,
    fragmentation_value: float,
    expiry: float,
    bonus: float,
    weights: ScoreWeights = SEED_WEIGHTS,
) -> ScoreBreakdown:
    """The seed's weighted sum, in the seed's order of terms."""
    score = (
        (weights.utilization * utilization)
        + (weights.fragmentation * fragmentation_value)
        + (weights.expiry * expiry)
        + (weights.provider * bonus)
    )
    return ScoreBreakdown(utilization, fragmentation_value, expiry, bonus, score)


@dataclass(frozen=True, slots=True)
class GpuFit:
    """What one pass over a node's GPUs found for a job.

    ``indices`` is the chosen set (``None`` when fewer than ``gpu_count`` GPUs qualify). ``usable`` counts GPUs
    the job could take, ``held`` those another job keeps from it, ``too_small`` those without enough free
    VRAM. ``total_vram_gb``/``used_vram_gb`` are the node's totals, computed in the same pass.
    """

    indices: tuple[int, ...] | None
    usable: int
    held: int
    too_small: int
    total_vram_gb: float
    used_vram_gb: float


def fit_gpus(job: Job, node: Node) -> GpuFit:
    """Find the GPUs of ``node`` for ``job`` in one pass, then pick the most contiguous set of them.

    The pick minimises the seed's fragmentation, i.e. the span between the lowest and highest chosen index.
    Among equally compact sets a sharing job takes the tightest VRAM fit (least free VRAM left over, which
    fills shared GPUs before opening fresh ones); remaining ties go to the lowest indices.
    """
    need = job.vram_per_gpu_gb
    total = used = 0.0
    usable: list[GpuSlot] = []
    held = too_small = 0
    for slot in node.gpu_slots:
        total += slot.vram_total_gb
        used += slot.vram_used_gb
        if slot.job_id is not None or (slot.job_ids and not job.shares_on(slot)):
            held += 1
        elif slot.vram_used_gb + need > slot.vram_total_gb:
            too_small += 1
        else:
            usable.append(slot)
    indices = _most_contiguous(usable, job.gpu_count, prefer_tight=job.share_gpu, need_gb=need)
    return GpuFit(indices, len(usable), held, too_small, total, used)


def _most_contiguous(
    usable: Sequence[GpuSlot], count: int, *, prefer_tight: bool, need_gb: float
) -> tuple[int, ...] | None:
    """Slide a window of ``count`` over the usable GPUs (sorted by index); keep the best. O(len(usable)).

    The gaps inside a sorted set sum to ``span - (count - 1)``, so the least fragmented sets are exactly the
    windows of smallest span.
    """
    if count == 0:
        return ()
    if len(usable) < count:
        return None
    leftover_prefix = [0.0]
    if prefer_tight:
        for slot in usable:
            leftover_prefix.append(leftover_prefix[-1] + (slot.vram_free_gb - need_gb))
    best_start = 0
    best_key: tuple[int, float] | None = None
    for start in range(len(usable) - count + 1):
        end = start + count
        span = usable[end - 1].index - usable[start].index
        leftover = round(leftover_prefix[end] - leftover_prefix[start], 6) if prefer_tight else 0.0
        key = (span, leftover)
        if best_key is None or key < best_key:
            best_key = key
            best_start = start
    return tuple(slot.index for slot in usable[best_start : best_start + count])
