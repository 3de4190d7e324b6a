"""The catalog's view of the GPU registry (``scalar.domain.gpus``): which upstream accelerator names are GPUs
Scalar offers, under which canonical name, and the per-GPU memory used where a source publishes none.

Upstream spellings that name the same GPU map onto one name (``H100-SXM``, ``H100-MEGA`` -> ``H100``), so an
H100 is an H100 whichever provider sells it: the form factor (SXM/PCIe) and networking variant stay visible
in the instance type. A new model or spelling is added to the registry, not here.
"""

from __future__ import annotations

from types import MappingProxyType

from scalar.domain.gpus import GPU_MODELS, find_gpu_model

# Canonical model -> memory per GPU in GB, used where a source does not publish it (Azure, RunPod).
GPU_MEMORY_GB: MappingProxyType[str, float] = MappingProxyType(
    {m.name: float(m.memory_gb) for m in GPU_MODELS}
)

#: Every GPU model an Offer of the catalog can carry.
CANONICAL_GPU_MODELS: frozenset[str] = frozenset(GPU_MEMORY_GB)

# Accelerators in the sources that are not GPUs (GCP TPUs): not offered, flagged when met.
NON_GPU_PREFIXES: tuple[str, ...] = ("tpu-",)


def canonical_gpu_model(name: str) -> str | None:
    """The canonical name of an upstream accelerator name, or ``None`` if Scalar does not know it."""
    if is_non_gpu_accelerator(name):
        return None
    model = find_gpu_model(name)
    return None if model is None else model.name


def is_non_gpu_accelerator(name: str) -> bool:
    return name.strip().lower().startswith(NON_GPU_PREFIXES)
