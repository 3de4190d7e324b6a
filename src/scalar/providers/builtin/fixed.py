"""Fixed-price offers (Prime Intellect, RunPod, AWS, Azure, GCP) from the packaged catalog.

The catalog's trusted offers with whole GPUs are sold as published; spot prices drift up to
``spot_price_drift`` either way each market hour (a seeded draw per offer and hour), on-demand prices stay
as published. Offers with a fraction of a GPU are not sold (a node has whole GPUs).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_EVEN, Decimal

from scalar.domain.offers import Offer
from scalar.providers.builtin.draws import uniform_for
from scalar.providers.catalog import Catalog

SPOT_QUANTUM = Decimal("0.0001")  # spot prices are published to 4 decimals (AWS)


@dataclass(frozen=True, slots=True)
class FixedPriceList:
    """One provider's offers in one market hour (``observed_at`` not yet stamped)."""

    provider: str
    hour: int
    offers: tuple[Offer, ...]

    def find(self, instance_type: str, spot: bool, region: str | None) -> tuple[Offer, ...]:
        """Offers of this shape (cheapest first), in ``region`` when given."""
        found = [
            offer
            for offer in self.offers
            if offer.instance_type == instance_type
            and offer.spot == spot
            and (region is None or offer.region == region)
        ]
        return tuple(sorted(found, key=lambda offer: (offer.price_per_hour, offer.key)))


def sellable(catalog: Catalog, provider: str) -> tuple[Offer, ...]:
    """The catalog offers the market sells for ``provider``: trusted, GPU model known, whole GPUs."""
    return tuple(
        offer
        for offer in catalog.by_provider(provider)
        if catalog.is_trusted(offer)
        and offer.gpu_model is not None
        and offer.gpu_count >= 1
        and float(offer.gpu_count).is_integer()
    )


def drifted(offer: Offer, seed: int, hour: int, drift: float) -> Offer:
    if not offer.spot or drift <= 0:
        return offer
    factor = 1.0 + drift * (2.0 * uniform_for(seed, "drift", offer.key, hour) - 1.0)
    price = (offer.price_per_hour * Decimal(repr(factor))).quantize(SPOT_QUANTUM, rounding=ROUND_HALF_EVEN)
    return replace(offer, price_per_hour=max(price, SPOT_QUANTUM))


@functools.lru_cache(maxsize=64)
def price_list(
    catalog: Catalog,
    provider: str,
    seed: int,
    hour: int,
    drift: float,
    gpu_models: frozenset[str] | None = None,
) -> FixedPriceList:
    """``provider``'s offers in market hour ``hour`` (deterministic, so cached per process); with
    ``gpu_models`` (upper-case names), only the offers of those models (each offer's price is its own draw,
    so they are the same offers at the same prices)."""
    offers = tuple(
        drifted(offer, seed, hour, drift)
        for offer in _sellable(catalog, provider)
        if gpu_models is None or (offer.gpu_model is not None and offer.gpu_model.upper() in gpu_models)
    )
    return FixedPriceList(provider, hour, offers)


_sellable = functools.lru_cache(maxsize=64)(sellable)  # a pure function of the (immutable) catalog
