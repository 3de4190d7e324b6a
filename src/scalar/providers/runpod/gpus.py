"""RunPod's ``gpuTypes`` answers read into ``Offer``s: per-GPU prices times the pod's GPU count.

RunPod prices are USD per *GPU*-hour; an ``Offer`` is priced per instance (pod) hour, so a pod of ``n``
GPUs costs ``n`` times the GPU price. ``lowestPrice(input: {gpuCount, secureCloud})`` answers, for pods of
that many GPUs, the cheapest on-demand price (``uninterruptablePrice``, RunPod's spelling) and spot bid
(``minimumBidPrice``), and the pod's minimum vCPUs and RAM. A ``stockStatus`` of null means none is
available now: no offer.

Instance types are named as the packaged catalog names them: ``<n>x_<model>_<SECURE|COMMUNITY>``, with
RunPod's model names (``H100-SXM``, ``A100-80GB``...) from ``GPU_TYPES``. GPU types Scalar does not map
are skipped (and listed in ``RunPodProvider.skipped``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from scalar.domain.offers import RUNPOD, Offer
from scalar.providers.payload import Fields


@dataclass(frozen=True, slots=True)
class GpuType:
    """A RunPod GPU type id's name in instance types and its canonical GPU model."""

    runpod_model: str
    gpu_model: str


# RunPod gpuTypes id -> (model in instance type names, canonical model).
GPU_TYPES: dict[str, GpuType] = {
    "NVIDIA H100 80GB HBM3": GpuType("H100-SXM", "H100"),
    "NVIDIA H100 PCIe": GpuType("H100", "H100"),
    "NVIDIA H100 NVL": GpuType("H100-NVL", "H100"),
    "NVIDIA H200": GpuType("H200-SXM", "H200"),
    "NVIDIA B200": GpuType("B200", "B200"),
    "NVIDIA A100 80GB PCIe": GpuType("A100-80GB", "A100-80GB"),
    "NVIDIA A100-SXM4-80GB": GpuType("A100-80GB-SXM", "A100-80GB"),
    "NVIDIA L40S": GpuType("L40S", "L40S"),
    "NVIDIA L40": GpuType("L40", "L40"),
    "NVIDIA L4": GpuType("L4", "L4"),
    "NVIDIA A40": GpuType("A40", "A40"),
    "NVIDIA RTX A6000": GpuType("RTXA6000", "RTXA6000"),
    "NVIDIA RTX A4000": GpuType("RTXA4000", "RTXA4000"),
    "NVIDIA RTX 6000 Ada Generation": GpuType("RTX6000Ada", "RTX6000Ada"),
    "NVIDIA GeForce RTX 4090": GpuType("RTX4090", "RTX4090"),
}

GPU_TYPES_QUERY = """query GpuTypes($lowestPriceInput: GpuLowestPriceInput) {
  gpuTypes {
    id
    displayName
    manufacturer
    memoryInGb
    secureCloud
    communityCloud
    securePrice
    communityPrice
    secureSpotPrice
    communitySpotPrice
    maxGpuCount
    lowestPrice(input: $lowestPriceInput) {
      minimumBidPrice
      uninterruptablePrice
      minVcpu
      minMemory
      stockStatus
    }
  }
}"""


def instance_type_name(runpod_model: str, gpu_count: int, secure: bool) -> str:
    return f"{gpu_count}x_{runpod_model}_{'SECURE' if secure else 'COMMUNITY'}"


def read_offers(gpu: Fields, gpu_count: int, secure: bool, now: datetime) -> list[Offer] | str:
    """The on-demand and spot offers of one ``gpuTypes`` entry for pods of ``gpu_count`` GPUs.

    Returns the reason instead when the entry is not offered (unknown type, too many GPUs, no stock).
    """
    gpu_id = gpu.text("id")
    known = GPU_TYPES.get(gpu_id)
    if known is None:
        return f"{gpu_id!r} has no canonical GPU model"
    max_count = gpu.opt_integer("maxGpuCount")
    if max_count is not None and gpu_count > max_count:
        return f"{gpu_id!r} comes in at most {max_count} GPUs a pod"
    if not gpu.flag("secureCloud" if secure else "communityCloud", default=False):
        return f"{gpu_id!r} is not in the {'secure' if secure else 'community'} cloud"
    lowest = gpu.obj("lowestPrice", optional=True)
    if lowest is None or lowest.opt_text("stockStatus") is None:
        return f"{gpu_id!r} has no stock for {gpu_count} GPUs"
    memory_in_gb = gpu.decimal("memoryInGb")
    vcpu = lowest.opt_decimal("minVcpu")
    ram = lowest.opt_decimal("minMemory")
    name = instance_type_name(known.runpod_model, gpu_count, secure)
    prices: list[tuple[bool, Decimal]] = []
    for spot, key in ((False, "uninterruptablePrice"), (True, "minimumBidPrice")):
        per_gpu = lowest.opt_decimal(key)
        if per_gpu is None:
            continue
        if per_gpu <= 0:
            raise lowest.error(key, f"should be a positive $/GPU-hour, got {per_gpu}")
        prices.append((spot, per_gpu))
    if not prices:
        return f"{gpu_id!r} has stock but no price for {gpu_count} GPUs"
    return [
        Offer(
            provider=RUNPOD,
            instance_type=name,
            region="global",
            price_per_hour=per_gpu * gpu_count,
            gpu_model=known.gpu_model,
            gpu_count=float(gpu_count),
            gpu_memory_gb=float(memory_in_gb),
            vcpu=float(vcpu or 0),
            memory_gb=float(ram or 0),
            spot=spot,
            interruption_rate=None if spot else 0.0,
            observed_at=now,
        )
        for spot, per_gpu in prices
    ]
