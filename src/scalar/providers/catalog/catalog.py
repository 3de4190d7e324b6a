"""The Catalog value: every offer made from the published prices, their flags, and fast lookups."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType

from scalar.domain.errors import DomainError
from scalar.domain.offers import Offer
from scalar.providers.catalog.records import CatalogAnomaly, InstanceSpec
from scalar.providers.catalog.stats import median

GroupKey = tuple[str, str, bool]  # (gpu_model, provider, spot)


class NoReferencePriceError(DomainError, LookupError):
    """No trusted offer of the GPU model (and spot-ness) to derive a reference price from."""


def _per_gpu(offer: Offer) -> Decimal:
    price = offer.price_per_gpu_hour
    assert price is not None
    return price


def _cheapness(offer: Offer) -> tuple[Decimal, Decimal, str]:
    """Sort key: cheapest per GPU-hour, then cheapest instance, then a stable identity."""
    return (_per_gpu(offer), offer.price_per_hour, offer.key)


@dataclass(frozen=True, eq=False)
class Catalog:
    """Offers made from the packaged price data, the anomalies found in it, and lookups over both.

    ``untrusted_keys`` holds the ``Offer.key`` of offers that stay listed but are left out of
    ``cheapest`` and reference prices (outliers, inconsistent pairs, GPU-only prices); ``specs`` maps
    ``(provider, instance_type)`` to the instance's hardware, including types whose rows carry no price;
    ``sources`` maps each ``Offer.key`` to the packaged row(s) it came from (``aws_vms.csv:42``; a GCP VM
    names its GPU row and its host row joined by ``+``).
    """

    offers: tuple[Offer, ...]
    anomalies: tuple[CatalogAnomaly, ...]
    untrusted_keys: frozenset[str] = frozenset()
    specs: Mapping[tuple[str, str], InstanceSpec] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    _by_provider: Mapping[str, tuple[Offer, ...]] = field(init=False, repr=False)
    _by_model: Mapping[str, tuple[Offer, ...]] = field(init=False, repr=False)
    _cheapest: Mapping[GroupKey, Offer] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_provider: dict[str, list[Offer]] = defaultdict(list)
        by_model: dict[str, list[Offer]] = defaultdict(list)
        cheapest: dict[GroupKey, Offer] = {}
        for offer in self.offers:
            by_provider[offer.provider].append(offer)
            if offer.gpu_model is None or offer.gpu_count <= 0:
                continue
            by_model[offer.gpu_model].append(offer)
            if offer.key in self.untrusted_keys:
                continue
            group = (offer.gpu_model, offer.provider, offer.spot)
            best = cheapest.get(group)
            if best is None or _cheapness(offer) < _cheapness(best):
                cheapest[group] = offer
        object.__setattr__(
            self, "_by_provider", MappingProxyType({k: tuple(v) for k, v in by_provider.items()})
        )
        object.__setattr__(self, "_by_model", MappingProxyType({k: tuple(v) for k, v in by_model.items()}))
        object.__setattr__(self, "_cheapest", MappingProxyType(dict(sorted(cheapest.items()))))
        object.__setattr__(self, "specs", MappingProxyType(dict(self.specs)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    # -- offers ---------------------------------------------------------------------------------------
    @property
    def providers(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_provider))

    @property
    def gpu_models(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_model))

    def by_provider(self, provider: str) -> tuple[Offer, ...]:
        return self._by_provider.get(provider, ())

    def by_gpu_model(self, gpu_model: str) -> tuple[Offer, ...]:
        return self._by_model.get(gpu_model, ())

    def is_trusted(self, offer: Offer) -> bool:
        return offer.key not in self.untrusted_keys

    def trusted_offers(self) -> tuple[Offer, ...]:
        return tuple(offer for offer in self.offers if offer.key not in self.untrusted_keys)

    def cheapest(self, gpu_model: str, provider: str, spot: bool) -> Offer | None:
        """The trusted offer with the lowest $/GPU-h for this model at this provider, spot or on-demand."""
        return self._cheapest.get((gpu_model, provider, spot))

    def cheapest_offers(self) -> Mapping[GroupKey, Offer]:
        """The cheapest trusted offer of every (gpu_model, provider, spot) group, sorted by key."""
        return self._cheapest

    def source_of(self, offer: Offer) -> str | None:
        """The packaged row(s) an offer was made from."""
        return self.sources.get(offer.key)

    # -- specs ----------------------------------------------------------------------------------------
    def spec(self, provider: str, instance_type: str) -> InstanceSpec | None:
        """The hardware of an instance type (GPU model, count, VRAM per GPU, vCPU, RAM), if known."""
        return self.specs.get((provider, instance_type))

    # -- anomalies ------------------------------------------------------------------------------------
    def anomaly_counts(self) -> dict[str, int]:
        """How many flags of each code, most frequent first."""
        return dict(Counter(anomaly.code for anomaly in self.anomalies).most_common())

    def anomalies_with(self, code: str) -> tuple[CatalogAnomaly, ...]:
        return tuple(anomaly for anomaly in self.anomalies if anomaly.code == code)

    def anomalies_for(self, offer: Offer) -> tuple[CatalogAnomaly, ...]:
        """The flags that concern this offer (its row, its spot-ness)."""
        return tuple(anomaly for anomaly in self.anomalies if anomaly.concerns(offer.key))

    # -- reference prices -----------------------------------------------------------------------------
    def reference_offers(
        self, gpu_model: str, spot: bool, *, min_gpu_count: float = 0.0
    ) -> tuple[Offer, ...]:
        """The offers a reference price is computed from: trusted, this model and spot-ness."""
        return tuple(
            offer
            for offer in self.by_gpu_model(gpu_model)
            if offer.spot == spot
            and offer.key not in self.untrusted_keys
            and offer.gpu_count >= min_gpu_count
        )

    def provider_medians(
        self, gpu_model: str, spot: bool, *, min_gpu_count: float = 0.0
    ) -> dict[str, Decimal]:
        """Each provider's median $/GPU-h over its reference offers."""
        prices: dict[str, list[Decimal]] = defaultdict(list)
        for offer in self.reference_offers(gpu_model, spot, min_gpu_count=min_gpu_count):
            prices[offer.provider].append(_per_gpu(offer))
        return {provider: median(values) for provider, values in sorted(prices.items())}

    def reference_price_per_gpu_hour(
        self, gpu_model: str, spot: bool, *, min_gpu_count: float = 0.0
    ) -> Decimal:
        """The market's reference $/GPU-h for a GPU model: the median of the providers' medians.

        Each provider's median is over its trusted offers of the model (spot or on-demand, with at
        least ``min_gpu_count`` GPUs); outliers and other untrusted offers are left out. Taking one
        median per provider first keeps a provider that lists the same price in 25 zones from
        outvoting the others.
        """
        medians = self.provider_medians(gpu_model, spot, min_gpu_count=min_gpu_count)
        if not medians:
            kind = "spot" if spot else "on-demand"
            known = ", ".join(self.gpu_models)
            raise NoReferencePriceError(
                f"no trusted {kind} offer of {gpu_model!r} with >= {min_gpu_count:g} GPUs in the catalog",
                f"use one of the catalog's GPU models ({known}) or the other spot-ness",
            )
        return median(medians.values())
