"""Canonical GPU model names and the per-GPU memory of each model.

Canonical names are SkyPilot's accelerator names (the ones the published catalogs use). Upstream
spellings that name the same GPU are mapped onto one name, so that an H100 is an H100 whichever
provider sells it: form factor (SXM/PCIe) and networking variants stay visible in the instance type.
"""

from __future__ import annotations

from types import MappingProxyType

# Canonical model -> memory per GPU in GB, used where a source does not publish it (Azure, RunPod).
GPU_MEMORY_GB: MappingProxyType[str, float] = MappingProxyType(
    {
        "A10": 24.0,
        "A10G": 24.0,
        "A100": 40.0,
        "A100-80GB": 80.0,
        "B200": 180.0,
        "B300": 288.0,
        "H100": 80.0,
        "H200": 141.0,
        "K80": 12.0,
        "L4": 24.0,
        "L40": 48.0,
        "L40S": 48.0,
        "M60": 8.0,
        "MI25": 16.0,
        "RTX6000Ada": 48.0,
        "RTXA4000": 16.0,
        "RTXA6000": 48.0,
        "T4": 16.0,
        "T4g": 16.0,
        "V100": 16.0,
        "V100-32GB": 32.0,
    }
)

#: Every GPU model an Offer of the catalog can carry.
CANONICAL_GPU_MODELS: frozenset[str] = frozenset(GPU_MEMORY_GB)

# Upstream spelling -> canonical name, for spellings that are not canonical themselves.
GPU_ALIASES: MappingProxyType[str, str] = MappingProxyType(
    {
        # RunPod names the SXM variants separately; the GPU is the same model.
        "A100-80GB-SXM": "A100-80GB",
        "H100-SXM": "H100",
        "H200-SXM": "H200",
        # GCP's a3-megagpu-8g carries H100 80GB GPUs (more network bandwidth, same GPU).
        "H100-MEGA": "H100",
        # Prime Intellect (and Lambda) drop the RTX prefix of the workstation cards.
        "A6000": "RTXA6000",
        "A4000": "RTXA4000",
        # Azure's AMD card.
        "Radeon MI25": "MI25",
    }
)

# Accelerators in the sources that are not GPUs (GCP TPUs): not offered, flagged when met.
NON_GPU_PREFIXES: tuple[str, ...] = ("tpu-",)


def canonical_gpu_model(name: str) -> str | None:
    """The canonical name of an upstream accelerator name, or ``None`` if Scalar does not know it."""
    cleaned = name.strip()
    canonical = GPU_ALIASES.get(cleaned, cleaned)
    return canonical if canonical in CANONICAL_GPU_MODELS else None


def is_non_gpu_accelerator(name: str) -> bool:
    return name.strip().lower().startswith(NON_GPU_PREFIXES)
