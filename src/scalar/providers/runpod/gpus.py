"""RunPod's ``gpuTypes`` answers read into ``Offer``s: per-GPU prices times the pod's GPU count.

RunPod prices are USD per *GPU*-hour; an ``Offer`` is priced per instance (pod) hour, so a pod of ``n``
GPUs costs ``n`` times the GPU price. ``lowestPrice(input: {gpuCount, secureCloud})`` answers, for pods of
that many GPUs, the cheapest on-demand price (``uninterruptablePrice``, RunPod's spelling) and spot bid
(``minimumBidPrice``), and the pod's minimum vCPUs and RAM. A ``stockStatus`` of null means none is
available now: no offer.

Instance types are named as the packaged catalog names them: ``<n>x_<model>_<SECURE|COMMUNITY>``, with
RunPod's model names (``H100-SXM``, ``A100-80GB``...) from the GPU registry's ``RUNPOD_GPU_TYPES``. GPU
types Scalar does not map are skipped (and listed in ``RunPodProvider.skipped``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from types import MappingProxyType

from scalar.domain.gpus import RUNPOD_GPU_TYPES, GpuType, runpod_gpu_type
from scalar.domain.offers import RUNPOD, Offer
from scalar.providers.payload import Fields

# RunPod gpuTypes id -> its GPU type (name in instance types, canonical model): the GPU registry's table.
GPU_TYPES: Mapping[str, GpuType] = MappingProxyType({t.runpod_id: t for t in RUNPOD_GPU_TYPES})

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
    known = runpod_gpu_type(gpu_id)
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
    name = instance_type_name(known.name, gpu_count, secure)
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
            gpu_model=known.model.name,
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
