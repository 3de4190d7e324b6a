"""GPUs differ: how long a job runs on each model, and what a unit of its work costs there.

A **work unit** is one GPU-hour on the reference model, :data:`REFERENCE_MODEL` (A100 40 GB, what the trace's
``G2`` maps to: 4,392 of the 6,212 GPUs of the openb cluster's node list are G2, so a pod that records no GPU
most likely ran on one; none of the default list's pods records the GPU it ran on). Each model's relative
throughput comes from the GPU registry (:func:`scalar.domain.gpus.relative_throughput`, with its source);
this module divides it by the reference's, so the reference runs at speed 1.

- A FLEX (batch) job's trace wall time is its work on the reference model: on model ``m`` it runs
  ``duration / speed(m)``, so a T4 takes longer and an A100 80 GB less.
- A FAST (latency-sensitive service) job holds its GPU for its trace wall time on any model: a service is
  up for as long as it is up, whatever the GPU's speed.

Every policy ranks offers by :func:`price_per_work_hour` (dollars per work unit for FLEX, per GPU-hour for
FAST), Scalar's engine included (it is told the same estimates; see docs/simulator-dynamic.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

from scalar.domain.gpus import relative_throughput
from scalar.domain.offers import Offer
from scalar.domain.tier import Tier

REFERENCE_MODEL = "A100"


@cache
def speed(model: str) -> float:
    """Throughput of ``model`` relative to :data:`REFERENCE_MODEL` (1.0 for the reference)."""
    ref = relative_throughput(REFERENCE_MODEL)
    value = relative_throughput(model.upper()) / ref
    if not (math.isfinite(value) and value > 0):  # pragma: no cover - the registry's values are positive
        raise ValueError(f"GPU model {model!r} has no positive relative throughput")
    return value


def scales_with_speed(tier: Tier) -> bool:
    """FLEX work runs faster on a faster GPU; a FAST service holds its GPU for its wall time."""
    return tier is Tier.FLEX


def run_seconds(duration_s: float, tier: Tier, model: str) -> float:
    """How long a job of ``duration_s`` reference seconds runs on ``model``."""
    return duration_s / speed(model) if scales_with_speed(tier) else duration_s


def price_per_work_hour(offer: Offer, tiers: Sequence[Tier]) -> float:
    """The offer's price per GPU-hour, divided by its model's speed when every job asking is FLEX."""
    per_gpu = float(offer.price_per_hour) / max(offer.gpu_count, 1e-9)
    if tiers and all(scales_with_speed(t) for t in tiers) and offer.gpu_model:
        return per_gpu / speed(offer.gpu_model)
    return per_gpu
