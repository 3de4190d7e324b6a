"""How Protocol B turns a trace pod into a job Scalar can buy for: its tier and the GPU models it may use.

**Tiers** (Kubernetes QoS classes of the Alibaba trace):

- ``LS`` (latency-sensitive) and ``Guaranteed`` -> FAST: they were promised their resources at once.
- ``BE`` (best effort) -> FLEX: it runs on whatever is left and tolerates waiting.
- ``Burstable`` -> FLEX. A Burstable pod is guaranteed only its requests, not its limits, so it already
  accepts being squeezed; in this trace its pods are batch-like (median life 1 h, 21 of its 100 pods ask for
  8 GPUs, 40 ended ``Failed`` and 39 ``Succeeded``, unlike the ``Running`` services of ``LS``). Batch work
  is what FLEX is for. ``--burstable fast`` is the other reading.
- an empty or unknown QoS -> FAST (the conservative reading: nothing says the pod may wait).

**GPU models.** The trace's models are not what markets sell today. Each maps to today's models by
memory class and generation (:data:`TRACE_MODEL_MAP`); a name not in the table that the market sells under
its canonical name (``A100``, ``H100``...) maps to itself; any other name is *unmapped* and such a pod is
skipped (counted). A pod with a ``gpu_spec`` may use the union of its models' mappings; a pod without one
may use any model the trace's GPUs map to (:data:`ANY_TRACE_MODEL`): it ran on whatever the cluster had.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scalar.domain.arbitrage import canonical_gpu_model
from scalar.domain.offers import Offer
from scalar.domain.tier import Tier


@dataclass(frozen=True, slots=True)
class ModelRule:
    """One trace model: the models sold today that stand for it, and why."""

    trace_model: str
    offered: tuple[str, ...]
    why: str


TRACE_MODEL_RULES: tuple[ModelRule, ...] = (
    ModelRule("T4", ("T4",), "Turing, 16 GB: still sold under its own name"),
    ModelRule("P100", ("V100",), "Pascal, 16 GB, no longer sold: the next generation at the same memory"),
    ModelRule("V100M16", ("V100",), "Volta, 16 GB"),
    ModelRule("V100M32", ("V100-32GB",), "Volta, 32 GB"),
    ModelRule("A10", ("A10", "A10G"), "Ampere, 24 GB: A10G is AWS's variant of the same chip"),
    ModelRule(
        "G2",
        ("A100",),
        "undisclosed 8-GPU training node (96 cores, 384 GB): assumed the data-center Ampere of its time, "
        "A100 40 GB",
    ),
    ModelRule(
        "G3",
        ("A100-80GB",),
        "undisclosed 8-GPU node, larger host (128 cores, 768 GB): assumed one step up, A100 80 GB",
    ),
)
TRACE_MODEL_MAP: dict[str, tuple[str, ...]] = {r.trace_model.upper(): r.offered for r in TRACE_MODEL_RULES}
ANY_TRACE_MODEL = "any"


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


ALL_MAPPED_MODELS: tuple[str, ...] = _unique(m for r in TRACE_MODEL_RULES for m in r.offered)


class ModelMapper:
    """Maps trace ``gpu_spec`` lists onto the canonical models sold in ``offers``."""

    def __init__(self, offers: Sequence[Offer]) -> None:
        self.sold: set[str] = {canonical_gpu_model(o.gpu_model) for o in offers if o.gpu_model}
        self.min_vram: dict[str, float] = {}
        for o in offers:
            if not o.gpu_model or o.gpu_count <= 0:
                continue
            model = canonical_gpu_model(o.gpu_model)
            seen = self.min_vram.get(model)
            if seen is None or o.gpu_memory_gb < seen:
                self.min_vram[model] = o.gpu_memory_gb

    def one(self, trace_model: str) -> tuple[str, ...]:
        """Today's models for one trace model (``()`` when it maps to nothing sold)."""
        name = trace_model.strip().upper()
        mapped = TRACE_MODEL_MAP.get(name)
        if mapped is None:
            mapped = (canonical_gpu_model(trace_model),)
        return tuple(m for m in mapped if m in self.sold)

    def models(self, gpu_spec: Sequence[str]) -> tuple[str, ...]:
        """The models a pod with this ``gpu_spec`` may use (empty spec: every mapped model sold)."""
        if not gpu_spec:
            return tuple(m for m in ALL_MAPPED_MODELS if m in self.sold)
        return _unique(m for name in gpu_spec for m in self.one(name))

    def reference_vram_gb(self, models: Sequence[str]) -> float:
        """The smallest GPU memory among ``models``' offers: what a pod's share of a GPU is measured in."""
        return min(self.min_vram[m] for m in models)


def tier_of(qos: str, burstable: Tier = Tier.FLEX) -> Tier:
    """LS and Guaranteed -> FAST, BE -> FLEX, Burstable -> ``burstable``, anything else -> FAST."""
    q = qos.strip().upper()
    if q == "BE":
        return Tier.FLEX
    if q == "BURSTABLE":
        return burstable
    return Tier.FAST
