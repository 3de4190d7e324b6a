"""``MarketService``: the market as the control plane sees it: seed 000's orderbook, every offer (the
built-in market's, read now, and the real providers' collected ones: ``runtime/prices.py``,
``runtime/market_view.py``), each real provider's state, seed 002's quote, and one ask book per GPU model.
"""

from __future__ import annotations

import logging

from scalar.domain.arbitrage import WorkloadRequirements, find_optimal_placement
from scalar.domain.offers import Offer
from scalar.domain.orderbook import analyze_orderbook
from scalar.providers.base import ProviderError
from scalar.runtime.live_sellers import builtin_only, live_books
from scalar.runtime.market_view import (
    SourcedOffer,
    aggregate_market,
    offer_row,
    quotable,
    quote_json,
    select_offers,
    sort_offers,
    sourced,
)
from scalar.runtime.plane.core import PlaneCore
from scalar.wire.market import MarketOut, OfferRowOut
from scalar.wire.orderbook import OrderbookResponse, build_orderbook_response
from scalar.wire.providers import ProviderStatusOut
from scalar.wire.quote import SourcedQuoteOut

log = logging.getLogger("scalar.runtime.service")  # the logger these calls have always used


class MarketService:
    """The market calls of one control-plane process, over its ``PlaneCore``."""

    def __init__(self, core: PlaneCore) -> None:
        self._core = core

    def orderbook(self, instance_type: str, node_count: int, gpus_per_node: int = 8) -> OrderbookResponse:
        """Seed 000's GET /orderbook response over the current book; ``KeyError`` for an unknown type."""
        self._core.opened()
        now = self._core.clock()
        providers = self._core.providers
        for name in sorted(providers):
            try:
                book = providers[name].orderbook(instance_type, now)
            except ProviderError:
                continue
            if book is None:
                continue
            analysis = analyze_orderbook(book.asks, book.bids, node_count * gpus_per_node)
            return build_orderbook_response(
                analysis, instance_type, node_count, gpus_per_node, book.observed_at
            )
        raise KeyError(instance_type)

    def _all_offers(self) -> list[SourcedOffer]:
        """The built-in market's offers (read now) and the real providers' collected ones."""
        live = self._core.live_prices()
        now = self._core.clock()
        builtin: list[Offer] = []
        providers = builtin_only(self._core.providers, self._core.sellers)  # real sellers' are the live rows
        for name in sorted(providers):
            try:
                builtin.extend(providers[name].list_offers(now))
            except ProviderError as err:
                log.warning("listing %s's offers failed: %s", name, err)
        return sourced(builtin, live.offers(), now)

    def prices(
        self,
        gpu_model: str | None = None,
        provider: str | None = None,
        spot: bool | None = None,
        sort: str = "price_per_gpu_hour",
        descending: bool = False,
        source: str | None = None,
    ) -> list[OfferRowOut]:
        """Every offer (built-in and live), filtered and sorted; ``ValueError`` for an unknown sort key."""
        kept = select_offers(
            self._all_offers(), gpu_model=gpu_model, provider=provider, spot=spot, source=source
        )
        return [offer_row(i) for i in sort_offers(kept, sort, descending)]

    def provider_status(self) -> list[ProviderStatusOut]:
        """Each real provider: enabled (or why not), state, last successful fetch, offers, last error (the
        model ``GET /providers``, ``scalar providers`` and the dashboard share: ``wire/providers.py``)."""
        return [ProviderStatusOut.model_validate(s.to_dict()) for s in self._core.live_prices().statuses()]

    def quote(self, requirements: WorkloadRequirements, scorer: str = "default") -> SourcedQuoteOut:
        """Seed 002's placement over every offer; ``NoSuitableInstanceError`` (with counts) when none fits."""
        items = quotable(self._all_offers())  # untrusted (flagged) live prices are not quoted
        decision = find_optimal_placement(requirements, [i.offer for i in items], scorer=scorer)
        return quote_json(decision, items)

    def market_view(self, gpu_model: str | None = None) -> MarketOut:
        """One ask book per GPU model across providers (built-in and live)."""
        items = select_offers(self._all_offers(), gpu_model=gpu_model)
        live = [lo for lo in self._core.live_prices().offers() if lo.offer in {i.offer for i in items}]
        return aggregate_market(items, live_books(self._core.sellers, live, self._core.clock()))
