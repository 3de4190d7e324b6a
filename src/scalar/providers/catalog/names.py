"""What instance type names say about their hardware, for cross-checking the published columns.

Prime Intellect: ``<upstream>__<N>x<MODEL>_<VRAM>GB__<vCPU>__<RAM GB>[__NVLINK][__SPOT]``;
RunPod: ``<N>x_<MODEL>_SECURE``; GCP accelerator-optimized hosts: ``a2-highgpu-<N>g``. AWS and Azure
names do not encode the GPU count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PRIME_GPU = re.compile(r"^(?P<count>\d+(?:\.\d+)?)x(?P<model>.+?)(?:_(?P<vram>\d+)GB)?$")
_RUNPOD = re.compile(r"^(?P<count>\d+(?:\.\d+)?)x_(?P<model>.+?)_(?P<tier>SECURE|COMMUNITY)$")
_GCP_HOST = re.compile(r"^[a-z]\d-[a-z]+gpu-(?P<count>\d+)g$")


@dataclass(frozen=True, slots=True)
class NamedShape:
    """The hardware an instance type name states (``None``: the name does not say)."""

    gpu_count: float | None = None
    gpu_memory_gb: float | None = None
    vcpu: float | None = None
    memory_gb: float | None = None
    upstream: str | None = None
    tags: tuple[str, ...] = ()


def parse_prime_name(name: str) -> NamedShape | None:
    """Parse a Prime Intellect instance type, e.g. ``crusoecloud__10xL40S_48GB__80__1470``."""
    parts = name.split("__")
    if len(parts) < 4:
        return None
    upstream, gpu_part, vcpu, ram, *tags = parts
    match = _PRIME_GPU.match(gpu_part)
    if match is None or not vcpu.isdigit() or not ram.isdigit():
        return None
    vram = match.group("vram")
    return NamedShape(
        gpu_count=float(match.group("count")),
        gpu_memory_gb=float(vram) if vram else None,
        vcpu=float(vcpu),
        memory_gb=float(ram),
        upstream=upstream,
        tags=tuple(tags),
    )


def parse_runpod_name(name: str) -> NamedShape | None:
    """Parse a RunPod instance type, e.g. ``8x_H100-SXM_SECURE``."""
    match = _RUNPOD.match(name)
    if match is None:
        return None
    return NamedShape(gpu_count=float(match.group("count")), tags=(match.group("tier"),))


def parse_gcp_host_name(name: str) -> NamedShape | None:
    """Parse a GCP accelerator-optimized machine type, e.g. ``a3-highgpu-8g`` (8 GPUs)."""
    match = _GCP_HOST.match(name)
    if match is None:
        return None
    return NamedShape(gpu_count=float(match.group("count")))


def named_shape(provider: str, instance_type: str) -> NamedShape | None:
    if provider == "prime":
        return parse_prime_name(instance_type)
    if provider == "runpod":
        return parse_runpod_name(instance_type)
    if provider == "gcp":
        return parse_gcp_host_name(instance_type)
    return None
