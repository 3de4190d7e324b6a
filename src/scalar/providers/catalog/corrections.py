"""Facts the published rows get wrong or leave out, applied only where the fact is known.

General rules (``rules.py``) find suspicious rows; this table only fixes values when the truth is a
documented hardware fact. Every correction applied is flagged (``gpu_count_corrected``), so the
published value is never silently replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class GpuCountCorrection:
    """The true GPU count of an instance type (and its memory per GPU, for a fractional GPU)."""

    provider: str
    instance_type: str
    gpu_count: float
    fact: str
    gpu_memory_gb: float | None = None


def _nvv4(instance_type: str, fraction: float, vram_gb: float, vcpu: int, ram_gib: int) -> GpuCountCorrection:
    return GpuCountCorrection(
        provider="azure",
        instance_type=instance_type,
        gpu_count=fraction,
        gpu_memory_gb=vram_gb,
        fact=(
            f"Azure's NVv4 series partitions one Radeon MI25: {instance_type} ({vcpu} vCPUs, {ram_gib} GiB) "
            f"gets {fraction:g} of a GPU with {vram_gb:g} GB"
        ),
    )


GPU_COUNT_CORRECTIONS: MappingProxyType[tuple[str, str], GpuCountCorrection] = MappingProxyType(
    {
        ("azure", "Standard_ND96isr_H100_v5"): GpuCountCorrection(
            provider="azure",
            instance_type="Standard_ND96isr_H100_v5",
            gpu_count=8,
            fact="Azure's ND H100 v5 series has 8 NVIDIA H100 80GB GPUs per VM (ND96isr_H100_v5: 96 vCPUs, 1900 GiB)",
        ),
        ("azure", "Standard_NV4as_v4"): _nvv4("Standard_NV4as_v4", 0.125, 2.0, 4, 14),
        ("azure", "Standard_NV8as_v4"): _nvv4("Standard_NV8as_v4", 0.25, 4.0, 8, 28),
        ("azure", "Standard_NV16as_v4"): _nvv4("Standard_NV16as_v4", 0.5, 8.0, 16, 56),
    }
)

# Per-GPU memory (GB) of instance types whose GPU differs from its model's usual memory, for sources
# that publish no memory column (Azure). The NC H100 v5 series carries H100 NVL cards (94 GB each).
GPU_MEMORY_GB_BY_INSTANCE: MappingProxyType[tuple[str, str], float] = MappingProxyType(
    {
        ("azure", "Standard_NC40ads_H100_v5"): 94.0,
        ("azure", "Standard_NC80adis_H100_v5"): 94.0,
    }
)


def gpu_count_correction(provider: str, instance_type: str) -> GpuCountCorrection | None:
    return GPU_COUNT_CORRECTIONS.get((provider, instance_type))
