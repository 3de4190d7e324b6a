"""Price outliers: a robust rule over each (GPU model, provider, spot-ness) group of offers.

For every group of at least ``MIN_GROUP_SIZE`` trusted offers, the median per-GPU price is the group's
norm. An offer whose per-GPU price is above ``OUTLIER_FACTOR`` x the median is flagged
``price_outlier_high``; an on-demand offer below median / ``OUTLIER_FACTOR`` is flagged
``price_outlier_low`` (deep spot discounts are what spot is, so the low side is not applied to spot).
Flagged offers stay in the catalog but are left out of cheapest lookups and reference prices.

The per-GPU price compared is the offer's price / GPU count, except for GCP VMs, whose GPUs are a
separate SKU from the host: there the GPU SKU price / GPU count is compared, so that the host's own
regional pricing does not blur the GPU's.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from scalar.domain.offers import Offer
from scalar.providers.catalog.records import UNTRUSTED, CatalogAnomaly
from scalar.providers.catalog.stats import median

OUTLIER_FACTOR = Decimal(2)
MIN_GROUP_SIZE = 3


@dataclass(frozen=True, slots=True)
class PricePoint:
    """An offer and the per-GPU price the rule compares (``basis`` says what that price covers)."""

    offer: Offer
    per_gpu: Decimal
    basis: str = "instance price"
    source: str = ""


def _kind(spot: bool) -> str:
    return "spot" if spot else "on-demand"


def _flag(point: PricePoint, code: str, norm: Decimal, size: int, side: str) -> CatalogAnomaly:
    offer = point.offer
    ratio = point.per_gpu / norm
    return CatalogAnomaly(
        provider=offer.provider,
        instance_type=offer.instance_type,
        region=offer.region,
        availability_zone=offer.availability_zone,
        spot=offer.spot,
        code=code,
        action=UNTRUSTED,
        source=point.source,
        message=(
            f"{offer.gpu_model} {_kind(offer.spot)} at {point.per_gpu.normalize():f}/GPU-h ({point.basis}) is "
            f"{ratio:.2f}x the median {norm.normalize():f} of {size} {offer.provider} {offer.gpu_model} "
            f"{_kind(offer.spot)} offers ({side}); offered, but left out of cheapest lookups and reference prices"
        ),
    )


def flag_price_outliers(points: list[PricePoint]) -> list[CatalogAnomaly]:
    groups: dict[tuple[str, str, bool], list[PricePoint]] = defaultdict(list)
    for point in points:
        offer = point.offer
        if offer.gpu_model is None or offer.gpu_count <= 0:
            continue
        groups[(offer.gpu_model, offer.provider, offer.spot)].append(point)
    flags: list[CatalogAnomaly] = []
    for (_model, _provider, spot), group in sorted(groups.items()):
        if len(group) < MIN_GROUP_SIZE:
            continue
        norm = median(point.per_gpu for point in group)
        if norm <= 0:
            continue
        for point in group:
            if point.per_gpu > norm * OUTLIER_FACTOR:
                flags.append(
                    _flag(point, "price_outlier_high", norm, len(group), f"more than {OUTLIER_FACTOR}x")
                )
            elif not spot and point.per_gpu * OUTLIER_FACTOR < norm:
                flags.append(
                    _flag(point, "price_outlier_low", norm, len(group), f"less than 1/{OUTLIER_FACTOR}")
                )
    return flags
