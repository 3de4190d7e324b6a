"""Prime Intellect's ``/availability/gpus`` items read into ``Offer``s, keeping what a pod create needs.

An item is one box (``gpuCount`` GPUs) sold by an upstream cloud (``provider``) in one data center.
Its price (``prices.communityPrice``, else ``prices.onDemand``) is USD per hour for the whole box.
Scalar names it as the packaged catalog does, so live and published prices meet on one instance type::

    <provider>__<gpuCount>x<gpuType>__<vcpu>__<memory GB>[__SPOT]     e.g. datacrunch__8xH100_80GB__176__1480__SPOT

``gpuType`` (``H100_80GB``, ``A100_40GB``, ``RTX_4090``...) maps to a canonical GPU model; ``gpuMemory``
is the whole box's VRAM in the published answers (640 for 8xH100), so VRAM per GPU comes from the type's
``_80GB`` suffix, else ``gpuMemory / gpuCount``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from scalar.domain.gpus import find_gpu_model
from scalar.domain.offers import PRIME, Offer
from scalar.providers.catalog import GPU_MEMORY_GB
from scalar.providers.payload import Fields

_VRAM_SUFFIX = re.compile(r"^(?P<model>.+?)_(?P<vram>\d+)GB$")


def gpu_model_of(gpu_type: str) -> tuple[str | None, float | None]:
    """``H100_80GB`` -> ``("H100", 80.0)``; ``A100_80GB`` -> ``("A100-80GB", 80.0)``; ``RTX_4090`` ->
    ``("RTX4090", None)``; unknown -> ``(None, ...)``. The GPU registry (``scalar.domain.gpus``) tells the
    model from the name and the memory its suffix states."""
    match = _VRAM_SUFFIX.match(gpu_type.strip())
    vram = float(match.group("vram")) if match else None
    model = find_gpu_model(gpu_type)
    return (None if model is None else model.name), vram


@dataclass(frozen=True, slots=True)
class PrimeListing:
    """One purchasable box: its normalized offer and the fields ``POST /pods`` needs to buy it."""

    offer: Offer
    cloud_id: str
    gpu_type: str
    socket: str | None
    upstream: str
    data_center: str | None
    country: str | None
    gpu_count: int
    vcpus: int | None
    memory_gb: int | None
    disk_gb: int | None
    security: str | None
    images: tuple[str, ...]
    stock_status: str | None

    @property
    def price_per_gpu_hour(self) -> Decimal:
        return self.offer.price_per_hour / self.gpu_count


@dataclass(frozen=True, slots=True)
class Skipped:
    """An item that is not an offer, and why (unknown GPU model, no price)."""

    cloud_id: str
    reason: str


def instance_type_name(
    upstream: str, gpu_count: int, gpu_type: str, vcpus: int, memory_gb: int, spot: bool
) -> str:
    name = f"{upstream}__{gpu_count}x{gpu_type}__{vcpus}__{memory_gb}"
    return name + "__SPOT" if spot else name


def read_listing(item: Fields, now: datetime) -> PrimeListing | Skipped:
    """One ``items[i]``; raises ``ProviderError`` naming the field when the item is malformed."""
    cloud_id = item.text("cloudId")
    gpu_type = item.text("gpuType")
    gpu_count = item.integer("gpuCount")
    if gpu_count < 1:
        raise item.error("gpuCount", f"should be at least 1, got {gpu_count}")
    upstream = item.text("provider")
    prices = item.req_obj("prices")
    community = prices.opt_decimal("communityPrice")
    on_demand = prices.opt_decimal("onDemand")
    currency = prices.opt_text("currency")
    if currency not in (None, "USD"):
        return Skipped(cloud_id, f"priced in {currency}, not USD")
    price = community if community is not None else on_demand
    if price is None:
        return Skipped(cloud_id, "no price (communityPrice and onDemand are null)")
    if price <= 0:
        raise prices.error(
            "onDemand" if community is None else "communityPrice", f"should be positive, got {price}"
        )
    model, vram = gpu_model_of(gpu_type)
    if model is None:
        return Skipped(cloud_id, f"gpuType {gpu_type!r} has no canonical GPU model")
    vcpus = _default_count(item, "vcpu")
    memory = _default_count(item, "memory")
    disk = _default_count(item, "disk")
    if vram is None:
        total = item.opt_integer("gpuMemory")
        vram = total / gpu_count if total else GPU_MEMORY_GB.get(model, 0.0)
    spot = item.flag("isSpot", default=False) or cloud_id.upper().endswith("_SPOT")
    data_center = item.opt_text("dataCenter")
    country = item.opt_text("country")
    images = item.raw("images", optional=True) or []
    if not isinstance(images, list) or not all(isinstance(i, str) for i in images):
        raise item.error("images", "should be a list of image names")
    offer = Offer(
        provider=PRIME,
        instance_type=instance_type_name(upstream, gpu_count, gpu_type, vcpus or 0, memory or 0, spot),
        region=country or data_center or "global",
        price_per_hour=price,
        gpu_model=model,
        gpu_count=float(gpu_count),
        gpu_memory_gb=vram,
        vcpu=float(vcpus or 0),
        memory_gb=float(memory or 0),
        availability_zone=data_center,
        spot=spot,
        interruption_rate=None if spot else 0.0,
        observed_at=now,
    )
    return PrimeListing(
        offer=offer,
        cloud_id=cloud_id,
        gpu_type=gpu_type,
        socket=item.opt_text("socket"),
        upstream=upstream,
        data_center=data_center,
        country=country,
        gpu_count=gpu_count,
        vcpus=vcpus,
        memory_gb=memory,
        disk_gb=disk,
        security=item.opt_text("security"),
        images=tuple(images),
        stock_status=item.opt_text("stockStatus"),
    )


def _default_count(item: Fields, key: str) -> int | None:
    """``vcpu.defaultCount`` and the like (a missing object is fine; a malformed one is not)."""
    config = item.obj(key, optional=True)
    if config is None:
        return None
    return config.opt_integer("defaultCount")
