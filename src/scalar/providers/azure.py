"""Azure Retail Prices (public, no credentials): VM pay-as-you-go and spot prices as Offers.

```python
azure = AzureRetailPrices.from_env(os.environ)    # enabled by SCALAR_AZURE_ENABLED=1 or SCALAR_AZURE_BASE_URL
offers = azure.list_offers(now)
```

One query, ``GET /api/retail/prices?api-version=2023-01-01-preview&$filter=serviceName eq 'Virtual
Machines' and priceType eq 'Consumption' and (armRegionName eq 'eastus' or ...)``, followed through
``NextPageLink`` until it is null or a page has no ``Items``, up to a page cap. Rows kept: ``type``
Consumption, ``unitOfMeasure`` "1 Hour", Linux (a ``productName`` naming Windows is another price), not
the " Low Priority" tier; ``skuName`` containing " Spot" is the spot price. ``armSkuName`` is looked up in
the packaged catalog for the GPU model, count, VRAM, vCPUs and RAM (its GPU-count corrections included);
sizes it does not know are skipped and counted. See ``docs/providers-clouds.md``.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from scalar.domain.offers import AZURE, Offer
from scalar.providers.base import ProviderError
from scalar.providers.catalog import Catalog, load_catalog
from scalar.providers.config import ProviderSettings, settings_from_env
from scalar.providers.http import HttpClient, RetryPolicy
from scalar.providers.price_only import (
    FetchReport,
    PriceOnlyProvider,
    decode_json,
    env_flag,
    env_list,
    env_positive_int,
    money_value,
    page_cap_error,
)

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://prices.azure.com"
PRICES_PATH = "/api/retail/prices"
API_VERSION = "2023-01-01-preview"
DEFAULT_REGIONS = ("eastus", "eastus2", "southcentralus", "westus2", "westus3")
DEFAULT_MAX_PAGES = 100
SERVICE_NAME = "Virtual Machines"
PRICE_TYPE = "Consumption"
UNIT_HOUR = "1 Hour"
SPOT_MARK = " Spot"
LOW_PRIORITY_MARK = " Low Priority"
CURRENCY = "USD"
_REGION_NAME = re.compile(r"^[a-z0-9]+$")
REQUIRED_FIELDS = (
    "armSkuName",
    "armRegionName",
    "retailPrice",
    "skuName",
    "productName",
    "unitOfMeasure",
    "type",
)


def azure_settings_from_env(env: Mapping[str, str]) -> ProviderSettings:
    """Azure's settings: ``SCALAR_AZURE_BASE_URL`` or ``SCALAR_AZURE_ENABLED=1`` turns it on.

    The Retail Prices API needs no credentials, so configuration alone enables it; nothing does by default.
    """
    settings = settings_from_env(env, AZURE, DEFAULT_BASE_URL)
    if settings.enabled:
        return settings
    if env_flag(env, "SCALAR_AZURE_ENABLED"):
        return replace(settings, enabled=True, disabled_reason=None)
    return replace(
        settings,
        disabled_reason=(
            "azure is off: set SCALAR_AZURE_ENABLED=1 (the Retail Prices API needs no credentials) or "
            "SCALAR_AZURE_BASE_URL to enable it"
        ),
    )


def retail_filter(regions: Sequence[str]) -> str:
    """The OData ``$filter`` asking for VM consumption prices in ``regions``."""
    clauses = " or ".join(f"armRegionName eq '{region}'" for region in regions)
    return f"serviceName eq '{SERVICE_NAME}' and priceType eq '{PRICE_TYPE}' and ({clauses})"


class AzureRetailPrices(PriceOnlyProvider):
    """Azure VM prices from the Retail Prices API as Offers. Sells nothing (see ``PriceOnlyProvider``)."""

    name = AZURE
    refusal = "Scalar reads Azure retail prices; creating Azure VMs is not supported yet"

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        regions: Sequence[str] = DEFAULT_REGIONS,
        max_pages: int = DEFAULT_MAX_PAGES,
        catalog: Catalog | None = None,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not regions:
            raise ValueError("regions is empty: name at least one Azure region, such as eastus")
        for region in regions:
            if not _REGION_NAME.match(region):
                raise ValueError(
                    f"{region!r} is not an Azure region name (lower-case letters and digits: eastus)"
                )
        if max_pages < 1:
            raise ValueError(f"max_pages must be at least 1, got {max_pages}")
        self.settings = settings
        self.regions = tuple(regions)
        self.max_pages = max_pages
        self.catalog = catalog or load_catalog()
        self.last_report: FetchReport | None = None
        self._http = HttpClient(
            AZURE, settings.base_url, timeout_s=timeout_s, retry=retry, sleep=sleep, rng=rng
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str], **kwargs: Any) -> AzureRetailPrices:
        """Settings, ``SCALAR_AZURE_REGIONS`` (comma list) and ``SCALAR_AZURE_MAX_PAGES`` from ``env``."""
        kwargs.setdefault("regions", env_list(env, "SCALAR_AZURE_REGIONS", DEFAULT_REGIONS))
        kwargs.setdefault("max_pages", env_positive_int(env, "SCALAR_AZURE_MAX_PAGES", DEFAULT_MAX_PAGES))
        return cls(azure_settings_from_env(env), **kwargs)

    def close(self) -> None:
        self._http.close()

    # -- pages ----------------------------------------------------------------------------------------
    def _pages(self, report: FetchReport) -> Iterator[tuple[int, list[Any]]]:
        url = PRICES_PATH
        params: dict[str, str] | None = {"api-version": API_VERSION, "$filter": retail_filter(self.regions)}
        pages = 0
        while True:
            what = f"Retail Prices page {pages + 1}"
            body = decode_json(AZURE, self._http.request("GET", url, params=params), what)
            pages += 1
            report.pages += 1
            items = body.get("Items")
            if not isinstance(items, list):
                raise ProviderError(AZURE, f"{what} has no Items list")
            if "NextPageLink" not in body:
                raise ProviderError(AZURE, f"{what} has no NextPageLink (null on the last page)")
            yield pages, items
            link = body["NextPageLink"]
            if not link or not items:
                return
            if not isinstance(link, str):
                raise ProviderError(AZURE, f"{what} has NextPageLink {link!r}, not a URL")
            if pages >= self.max_pages:
                raise page_cap_error(AZURE, "Retail Prices", self.max_pages, "SCALAR_AZURE_MAX_PAGES")
            url, params = _next_page(link), None

    # -- offers ---------------------------------------------------------------------------------------
    def list_offers(self, now: datetime) -> list[Offer]:
        """Every Linux pay-as-you-go and spot price of a catalog-known GPU size in the configured regions."""
        report = FetchReport(AZURE)
        best: dict[str, tuple[tuple[bool, str], Offer]] = {}
        for page, items in self._pages(report):
            for index, item in enumerate(items):
                report.rows += 1
                where = f"Retail Prices page {page}, item {index + 1}"
                made = self._offer(item, where, report, now)
                if made is None:
                    continue
                rank, offer = made
                known = best.get(offer.key)
                if known is None or rank > known[0]:
                    best[offer.key] = (rank, offer)
        offers = [offer for _, offer in best.values()]
        report.offers = len(offers)
        self.last_report = report
        report.log(logger)
        return offers

    def _offer(
        self, item: Any, where: str, report: FetchReport, now: datetime
    ) -> tuple[tuple[bool, str], Offer] | None:
        if not isinstance(item, dict):
            raise ProviderError(AZURE, f"{where} is {type(item).__name__}, not an object")
        for name in REQUIRED_FIELDS:
            if item.get(name) is None:
                raise ProviderError(AZURE, f"{where} ({item.get('meterId', 'no meterId')}) has no {name}")
        sku = str(item["armSkuName"])
        sku_name = str(item["skuName"])
        if item["type"] != PRICE_TYPE:
            report.exclude(f"price type {item['type']}")
            return None
        if item.get("serviceName", SERVICE_NAME) != SERVICE_NAME:
            report.exclude(f"service {item['serviceName']}")
            return None
        if "windows" in str(item["productName"]).lower():
            report.exclude("Windows prices")
            return None
        if LOW_PRIORITY_MARK.lower() in sku_name.lower():
            report.exclude("Low Priority tier")
            return None
        if item["unitOfMeasure"] != UNIT_HOUR:
            report.skip(
                f"rows priced per another unit than {UNIT_HOUR!r}", f"{sku} per {item['unitOfMeasure']}"
            )
            return None
        if item.get("currencyCode", CURRENCY) != CURRENCY:
            report.skip(f"rows in another currency than {CURRENCY}", f"{sku} in {item['currencyCode']}")
            return None
        region = str(item["armRegionName"])
        if region not in self.regions:
            report.exclude("regions not asked for")
            return None
        spec = self.catalog.spec(AZURE, sku)
        if spec is None:
            report.skip(
                "VM sizes the catalog does not know (no specs; not guessed)", sku or "(empty armSkuName)"
            )
            return None
        price = money_value(AZURE, item["retailPrice"], f"{where} ({sku}) retailPrice")
        if price <= 0:
            report.skip("rows with a price of 0 or less", f"{sku} in {region}")
            return None
        spot = SPOT_MARK.lower() in sku_name.lower()
        offer = spec.offer(region, price, now, spot=spot, interruption_rate=None if spot else 0.0)
        # Among rows for the same size, region and kind, the primary meter region's latest price wins.
        rank = (item.get("isPrimaryMeterRegion") is not False, str(item.get("effectiveStartDate") or ""))
        return rank, offer


def _next_page(link: str) -> str:
    """The next page's query, asked of the configured base URL (a replay server's pages stay on it)."""
    query = urlsplit(link).query
    if not query:
        raise ProviderError(AZURE, f"NextPageLink {link!r} has no query to follow")
    return f"{PRICES_PATH}?{query}"
