"""One view of the market: the built-in market's offers and the real providers' collected ones, together.

Every offer row carries its ``source`` (``builtin``: the simulated market the engine buys from; ``live``: a
real provider's published price, collected by ``scalar.runtime.prices``) and its freshness (``fetched_at``,
``age_s``, ``stale``), and for live rows the catalog's anomaly flags found in their fetch (``flags``,
``trusted``): untrusted offers are listed but left out of quotes (``quotable``) and of the aggregated
market. ``aggregate_market`` turns rows into one ask book per GPU model: levels by $/GPU-hour with the GPUs
offered at that price and the providers offering them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from scalar.domain.arbitrage import Placement, PlacementDecision
from scalar.domain.gpus import canonical_gpu_model
from scalar.domain.money import round_micros, to_json_number
from scalar.domain.offers import Offer
from scalar.providers.base import Book
from scalar.providers.catalog import CatalogAnomaly
from scalar.runtime.prices import LiveOffer
from scalar.wire.market import GpuMarketOut, MarketLevelOut, MarketOut, OfferFlagOut, OfferRowOut
from scalar.wire.quote import SourcedPlacementOut, SourcedQuoteOut, decision_out

BUILTIN, LIVE = "builtin", "live"
SORT_KEYS = ("price_per_gpu_hour", "price_per_hour", "provider", "gpu_model", "age_s")


@dataclass(frozen=True)
class SourcedOffer:
    offer: Offer
    source: str
    fetched_at: datetime
    age_s: float
    stale: bool
    flags: tuple[CatalogAnomaly, ...] = ()
    trusted: bool = True


def sourced(builtin: Iterable[Offer], live: Iterable[LiveOffer], now: datetime) -> list[SourcedOffer]:
    """The built-in offers (fresh: read just now) followed by the live ones."""
    out = [SourcedOffer(o, BUILTIN, now, 0.0, False) for o in builtin]
    out += [
        SourcedOffer(lo.offer, LIVE, lo.fetched_at, lo.age_s, lo.stale, lo.flags, lo.trusted) for lo in live
    ]
    return out


def quotable(items: Iterable[SourcedOffer]) -> list[SourcedOffer]:
    """The offers a quote may pick: untrusted ones (a flagged live price) are left out."""
    return [i for i in items if i.trusted]


def _number(value: Decimal | None) -> float | int | None:
    return None if value is None else to_json_number(round_micros(value))


def offer_row(item: SourcedOffer) -> OfferRowOut:
    o = item.offer
    return OfferRowOut(
        provider=o.provider,
        source=item.source,
        region=o.region,
        availability_zone=o.availability_zone,
        instance_type=o.instance_type,
        gpu_model=o.gpu_model,
        gpu_count=o.gpu_count,
        gpu_memory_gb=o.gpu_memory_gb,
        vcpu=o.vcpu,
        memory_gb=o.memory_gb,
        price_per_hour=_number(o.price_per_hour),
        price_per_gpu_hour=_number(o.price_per_gpu_hour),
        spot=o.spot,
        interruption_rate=o.interruption_rate,
        observed_at=None if o.observed_at is None else o.observed_at.isoformat(),
        fetched_at=item.fetched_at.isoformat(),
        age_s=round(item.age_s, 3),
        stale=item.stale,
        trusted=item.trusted,
        flags=[OfferFlagOut(code=a.code, action=a.action, message=a.message) for a in item.flags],
    )


def select_offers(
    items: Iterable[SourcedOffer],
    *,
    gpu_model: str | None = None,
    provider: str | None = None,
    spot: bool | None = None,
    source: str | None = None,
) -> list[SourcedOffer]:
    """Filter (the GPU model in any spelling the registry knows, ``scalar.domain.gpus``; the provider
    case-insensitively) and sort cheapest $/GPU-hour first."""
    model = canonical_gpu_model(gpu_model) if gpu_model and gpu_model.strip() else None
    seller = provider.strip().lower() if provider else None
    kept = [
        i
        for i in items
        if (
            model is None
            or (i.offer.gpu_model is not None and canonical_gpu_model(i.offer.gpu_model) == model)
        )
        and (seller is None or i.offer.provider.lower() == seller)
        and (spot is None or i.offer.spot == spot)
        and (source is None or i.source == source)
    ]
    return sort_offers(kept, "price_per_gpu_hour")


def sort_offers(items: Sequence[SourcedOffer], key: str, descending: bool = False) -> list[SourcedOffer]:
    """Sort by one of ``SORT_KEYS``; offers without the value (CPU-only for $/GPU-h) always go last."""
    if key not in SORT_KEYS:
        raise ValueError(f"cannot sort by {key!r}; sort by one of {', '.join(SORT_KEYS)}")

    def value(i: SourcedOffer) -> Any:
        o = i.offer
        return {
            "price_per_gpu_hour": o.price_per_gpu_hour,
            "price_per_hour": o.price_per_hour,
            "provider": o.provider,
            "gpu_model": o.gpu_model,
            "age_s": i.age_s,
        }[key]

    present = [i for i in items if value(i) is not None]
    missing = [i for i in items if value(i) is None]
    present.sort(key=lambda i: (value(i), i.offer.price_per_hour, i.offer.key, i.source), reverse=descending)
    return present + missing


def quote_json(decision: PlacementDecision, items: Sequence[SourcedOffer]) -> SourcedQuoteOut:
    """The ``scalar quote`` decision, with ``source``, ``stale`` and ``ageSeconds`` on the pick and each
    alternative (null for an offer not among ``items``)."""
    by_offer: dict[Offer, SourcedOffer] = {}
    for item in items:
        by_offer.setdefault(item.offer, item)

    def where(placement: Placement) -> dict[str, Any]:
        found = by_offer.get(placement.offer)
        return {
            "source": None if found is None else found.source,
            "stale": None if found is None else found.stale,
            "ageSeconds": None if found is None else round(found.age_s, 3),
        }

    plain = decision_out(decision)
    alternatives = [
        SourcedPlacementOut(**dict(out), **where(placement))
        for out, placement in zip(plain.alternatives, decision.alternatives, strict=True)
    ]
    pick = dict(plain) | {"alternatives": alternatives}
    return SourcedQuoteOut(**pick, **where(Placement(decision.offer, decision.score)))


@dataclass(frozen=True)
class LiveBook:
    """A real seller's public orderbook (SFCompute's depth): its asks join the market view level by level,
    in place of the seller's single best-ask offer for that instance type."""

    provider: str
    gpu_model: str
    book: Book


def aggregate_market(items: Iterable[SourcedOffer], books: Sequence[LiveBook] = ()) -> MarketOut:
    """One ask book per GPU model across providers: levels by $/GPU-hour (cheapest first), each with the GPUs
    offered at that price (one instance per offer, or a live orderbook's ask quantity), the providers and
    how many offers."""
    books_by_model: dict[str, dict[Decimal, dict[str, Any]]] = {}
    deep = {(b.provider, b.book.instance_type) for b in books}

    def add(model: str, per_gpu: Decimal, gpus: float, provider: str, source: str, stale: bool) -> None:
        level = books_by_model.setdefault(model, {}).setdefault(
            round_micros(per_gpu),
            {"quantity_gpus": 0.0, "providers": set(), "offers": 0, "sources": set(), "stale": 0},
        )
        level["quantity_gpus"] += gpus
        level["providers"].add(provider)
        level["sources"].add(source)
        level["offers"] += 1
        level["stale"] += int(stale)

    for item in quotable(items):
        o = item.offer
        per_gpu = o.price_per_gpu_hour
        if per_gpu is None or not o.gpu_model or (o.provider, o.instance_type) in deep:
            continue
        add(o.gpu_model, per_gpu, o.gpu_count, o.provider, item.source, item.stale)
    for live in books:
        for ask in live.book.asks:
            if ask.quantity_gpus > 0:
                add(
                    live.gpu_model,
                    ask.price_per_gpu_hour,
                    float(ask.quantity_gpus),
                    live.provider,
                    LIVE,
                    False,
                )
    models = []
    for model in sorted(books_by_model):
        levels: list[MarketLevelOut] = []
        cumulative = 0.0
        for price in sorted(books_by_model[model]):
            level = books_by_model[model][price]
            cumulative += level["quantity_gpus"]
            levels.append(
                MarketLevelOut(
                    price_per_gpu_hour=to_json_number(price),
                    quantity_gpus=level["quantity_gpus"],
                    cumulative_gpus=cumulative,
                    providers=sorted(level["providers"]),
                    sources=sorted(level["sources"]),
                    offers=level["offers"],
                    stale_offers=level["stale"],
                )
            )
        models.append(
            GpuMarketOut(
                gpu_model=model,
                best_price_per_gpu_hour=levels[0].price_per_gpu_hour,
                total_gpus=cumulative,
                providers=sorted({p for lv in levels for p in lv.providers}),
                levels=levels,
            )
        )
    return MarketOut(gpu_models=models)
