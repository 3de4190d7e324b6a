"""The catalog's anomaly rules applied to one live fetch of a provider's offers.

A live fetch can carry the same oddities as the packaged data (``docs/prices.md``, "Anomaly rules"), so
the collector judges each fetch with the same rules and the same actions:

- ``non_positive_price``: a price of 0 or less -> ``dropped`` (no offer);
- ``spot_not_discounted``: a spot offer priced as the on-demand offer of the same shape (provider, region,
  zone, instance type), once on-demand is rounded to the spot price's decimals -> the spot offer ``dropped``
  (Azure's H100 v5 sizes publish spot = on-demand);
- ``spot_above_on_demand``: spot above on-demand -> the spot offer ``dropped``, and the on-demand offer
  flagged ``on_demand_doubtful`` -> ``untrusted``;
- ``price_outlier_high`` / ``price_outlier_low``: per-GPU price above 2x (or, on-demand only, below half)
  the median of the fetch's (GPU model, spot-ness) group of at least 3 trusted offers -> ``untrusted``;
- ``gpu_count_unusual``: a GPU count other than 1/8, 1/4, 1/2, 1, 2, 4, 8, 16 -> ``kept`` (information).

``untrusted`` offers stay listed (with their flags) but quotes and the aggregated market leave them out, as
``Catalog.cheapest`` leaves the catalog's out. The outlier basis is the whole instance price over its GPUs
(a live GCP offer is already GPU SKUs plus host; the catalog compares GCP's GPU SKU alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scalar.domain.offers import Offer
from scalar.providers.catalog.outliers import PricePoint, flag_price_outliers
from scalar.providers.catalog.records import DROPPED, KEPT, UNTRUSTED, CatalogAnomaly
from scalar.providers.catalog.rules import _same_price, is_usual_gpu_count

LIVE_SOURCE = "live fetch"


@dataclass(frozen=True)
class LiveJudgement:
    """One fetch judged: the offers kept, each kept offer's flags by ``Offer.key``, the flags of dropped
    offers, and the keys of the untrusted ones."""

    offers: tuple[Offer, ...]
    flags: dict[str, tuple[CatalogAnomaly, ...]] = field(default_factory=dict)
    dropped: tuple[CatalogAnomaly, ...] = ()
    untrusted: frozenset[str] = frozenset()

    def trusted(self, offer: Offer) -> bool:
        return offer.key not in self.untrusted


def _flag(offer: Offer, code: str, message: str, action: str) -> CatalogAnomaly:
    return CatalogAnomaly(
        provider=offer.provider,
        instance_type=offer.instance_type,
        region=offer.region,
        availability_zone=offer.availability_zone,
        spot=offer.spot,
        code=code,
        message=message,
        action=action,
        source=f"{LIVE_SOURCE} ({offer.provider})",
    )


def _shape(offer: Offer) -> tuple[str, str, str, str]:
    return (offer.provider, offer.region, offer.availability_zone or "-", offer.instance_type)


def judge_live_offers(offers: Sequence[Offer]) -> LiveJudgement:
    """Apply the catalog's rules to one fetch (see the module docstring); order of ``offers`` is kept."""
    flags: dict[str, list[CatalogAnomaly]] = {}
    dropped: list[CatalogAnomaly] = []
    untrusted: set[str] = set()
    drop: set[str] = set()

    def note(offer: Offer, anomaly: CatalogAnomaly) -> None:
        if anomaly.action == DROPPED:
            dropped.append(anomaly)
            drop.add(offer.key)
        else:
            flags.setdefault(offer.key, []).append(anomaly)
            if anomaly.action == UNTRUSTED:
                untrusted.add(offer.key)

    on_demand: dict[tuple[str, str, str, str], Offer] = {}
    for offer in offers:
        if offer.price_per_hour <= 0:
            note(
                offer,
                _flag(
                    offer, "non_positive_price", f"price {offer.price_per_hour}/h is not positive", DROPPED
                ),
            )
            continue
        if not offer.spot:
            on_demand.setdefault(_shape(offer), offer)
        if offer.gpu_count > 0 and not is_usual_gpu_count(offer.gpu_count):
            note(
                offer,
                _flag(offer, "gpu_count_unusual", f"{offer.gpu_count:g} GPUs is an unusual count", KEPT),
            )
    for offer in offers:
        base = on_demand.get(_shape(offer))
        if not offer.spot or base is None or offer.key in drop:
            continue
        spot, price = offer.price_per_hour, base.price_per_hour
        if _same_price(spot, price):
            note(
                offer,
                _flag(
                    offer,
                    "spot_not_discounted",
                    f"spot price {spot}/h equals on-demand {price}/h: not a spot discount; only the "
                    "on-demand offer is kept",
                    DROPPED,
                ),
            )
        elif spot > price:
            note(
                offer,
                _flag(
                    offer,
                    "spot_above_on_demand",
                    f"spot price {spot}/h is above on-demand {price}/h ({spot / price:.2f}x): the spot "
                    "offer is dropped",
                    DROPPED,
                ),
            )
            note(
                base,
                _flag(
                    base,
                    "on_demand_doubtful",
                    f"on-demand {price}/h is below this shape's spot price {spot}/h, so one of them is "
                    "wrong: listed, but left out of quotes and the market view",
                    UNTRUSTED,
                ),
            )
    points = [
        PricePoint(o, o.price_per_gpu_hour, source=LIVE_SOURCE)
        for o in offers
        if o.key not in drop and o.key not in untrusted and o.price_per_gpu_hour is not None and o.gpu_model
    ]
    for anomaly in flag_price_outliers(points):
        offer = next(p.offer for p in points if anomaly.concerns(p.offer.key))
        note(offer, anomaly)
    kept = tuple(o for o in offers if o.key not in drop)
    return LiveJudgement(
        offers=kept,
        flags={k: tuple(v) for k, v in flags.items() if k not in drop},
        dropped=tuple(dropped),
        untrusted=frozenset(untrusted - drop),
    )
