"""GCP Cloud Billing Catalog (API key): Compute Engine SKUs composed into GPU VM prices, as Offers.

```python
gcp = GcpBillingCatalog.from_env(os.environ)     # SCALAR_GCP_API_KEY (and/or SCALAR_GCP_BASE_URL)
offers = gcp.list_offers(now)
```

``GET /v1/services/6F81-5844-456A/skus?key&pageSize&pageToken`` is followed through ``nextPageToken``
(empty or absent on the last page), up to a page cap. GCP bills a GPU VM in parts, so a machine type's
hourly price is composed per region, on-demand and spot alike:

    GPUs x GPU SKU + vCPUs x "<family> Instance Core" SKU + GiB x "<family> Instance Ram" SKU

with the GPU count, vCPUs and RAM of the machine type taken from the packaged catalog (``a2-highgpu-1g``:
1 x A100, 12 vCPUs, 85 GiB). A unit price is ``units + nanos / 1e9``, exact. Shapes whose parts are not all
priced in a region, GPUs that attach to general-purpose hosts (L4, T4, V100: no fixed shape in the
catalog) and machine types the catalog has no specs for are skipped and counted. The exact description
mapping is in ``docs/providers-clouds.md``.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from scalar.domain.offers import GCP, Offer
from scalar.providers.base import ProviderError
from scalar.providers.catalog import Catalog, load_catalog
from scalar.providers.catalog.gcp import ATTACHED_GPU_HOSTS, HOST_ACCELERATORS
from scalar.providers.config import ProviderSettings, settings_from_env
from scalar.providers.http import HttpClient, RetryPolicy
from scalar.providers.price_only import (
    FetchReport,
    PriceOnlyProvider,
    decode_json,
    env_list,
    env_positive_int,
    page_cap_error,
)

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://cloudbilling.googleapis.com"
COMPUTE_ENGINE_SERVICE = "6F81-5844-456A"
SKUS_PATH = f"/v1/services/{COMPUTE_ENGINE_SERVICE}/skus"
PAGE_SIZE = 5000
DEFAULT_REGIONS = ("us-central1", "us-east4", "us-east5", "us-west1", "europe-west4")
DEFAULT_MAX_PAGES = 50
CURRENCY = "USD"
ON_DEMAND = "OnDemand"
PREEMPTIBLE = "Preemptible"
GPU_UNIT = "h"
CORE_UNIT = "h"
RAM_UNIT = "GiBy.h"
NANOS_PER_UNIT = 9  # unitPrice.nanos are 1e-9 units

# GPU SKU names (description without the spot marks and " running in <place>"), case-insensitive, -> the
# upstream accelerator name the catalog's GCP machine table uses (catalog/gcp.py HOST_ACCELERATORS).
GPU_SKU_NAMES: MappingProxyType[str, str] = MappingProxyType(
    {
        "nvidia tesla a100 gpu": "A100",
        "nvidia tesla a100 80gb gpu": "A100-80GB",
        "nvidia a100 80gb gpu": "A100-80GB",
        "nvidia h100 80gb gpu": "H100",
        "nvidia h100 80gb mega gpu": "H100-MEGA",
        "nvidia h100 mega 80gb gpu": "H100-MEGA",
        "h200 141gb gpu": "H200",
        "nvidia h200 141gb gpu": "H200",
        "a4 nvidia b200 (1 gpu slice)": "B200",
        # GPUs attached to general-purpose hosts (n1, g2): recognised, not composed (no fixed shape).
        "nvidia l4 gpu": "L4",
        "nvidia tesla t4 gpu": "T4",
        "nvidia tesla v100 gpu": "V100",
    }
)

# Machine-type prefix -> the host family of its "<family> Instance Core/Ram" SKUs (normalized: lower case,
# no spaces). ``None``: the GPU SKU is a slice of the whole VM (A4's "B200 (1 gpu slice)") and no host
# SKU is added.
HOST_FAMILIES: MappingProxyType[str, str | None] = MappingProxyType(
    {
        "a2-highgpu": "a2",
        "a2-megagpu": "a2",
        "a2-ultragpu": "a2",
        "a3-highgpu": "a3",
        "a3-megagpu": "a3plus",
        "a3-ultragpu": "a3ultra",
        "a4-highgpu": None,
    }
)

_RUNNING_IN = re.compile(r"^(?P<body>.+?) running in (?P<place>.+)$")
_HOST_PART = re.compile(r"^(?P<family>A\d+(?: ?[A-Za-z]+)?) Instance (?P<part>Core|Ram)$", re.IGNORECASE)
SPOT_PREFIXES = ("Spot Preemptible ", "Preemptible ")
SPOT_SUFFIXES = (" attached to Spot Preemptible VMs", " attached to Preemptible VMs")
OTHER_TIER_PREFIXES = ("DWS ", "Reserved ", "Commitment", "Calendar ", "Flex")


@dataclass(frozen=True, slots=True)
class SkuKind:
    """What a SKU description names: a GPU (``component="gpu"``, ``name`` the upstream accelerator) or a
    host part (``component`` "core" or "ram", ``name`` the normalized family), and whether it is spot."""

    component: str
    name: str
    spot: bool


def classify(description: str) -> SkuKind | None:
    """The GPU or host part a Compute Engine SKU description names, or ``None`` for anything else.

    ``"Spot Preemptible Nvidia H100 80GB GPU running in Virginia"`` -> gpu H100 spot;
    ``"Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas"`` -> the same;
    ``"A2 Instance Ram running in Americas"`` -> ram a2 on-demand.
    """
    text = description.strip()
    spot = False
    for prefix in SPOT_PREFIXES:
        if text.startswith(prefix):
            text, spot = text[len(prefix) :], True
            break
    match = _RUNNING_IN.match(text)
    if match is None:
        return None
    body = match.group("body").strip()
    for suffix in SPOT_SUFFIXES:
        if body.endswith(suffix):
            body, spot = body[: -len(suffix)], True
            break
    host = _HOST_PART.match(body)
    if host is not None:
        family = host.group("family").replace(" ", "").lower()
        return SkuKind(host.group("part").lower(), family, spot)
    upstream = GPU_SKU_NAMES.get(body.lower())
    if upstream is not None:
        return SkuKind("gpu", upstream, spot)
    return None


def host_family(machine_type: str) -> str | None:
    for prefix, family in HOST_FAMILIES.items():
        if machine_type.startswith(prefix + "-"):
            return family
    raise KeyError(machine_type)


def unit_price(units: Any, nanos: Any, where: str) -> Decimal:
    """``units + nanos / 1e9`` exactly (proto3 JSON leaves out zero fields: a missing one is 0)."""
    try:
        whole = Decimal(str(units if units is not None else "0"))
        frac = int(nanos if nanos is not None else 0)
    except (ArithmeticError, TypeError, ValueError):
        raise ProviderError(
            GCP, f"{where} has unitPrice units={units!r} nanos={nanos!r}, not numbers"
        ) from None
    if not whole.is_finite() or whole != whole.to_integral_value() or not -(10**9) < frac < 10**9:
        raise ProviderError(GCP, f"{where} has unitPrice units={units!r} nanos={nanos!r} out of range")
    return _plain(whole + Decimal(frac).scaleb(-NANOS_PER_UNIT))


def _plain(value: Decimal) -> Decimal:
    """Without trailing zeros and without an exponent: 0.031611000 -> 0.031611, 2.000 -> 2."""
    reduced = value.normalize()
    exponent = reduced.as_tuple().exponent
    return reduced if isinstance(exponent, int) and exponent <= 0 else reduced.quantize(Decimal(1))


def _field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ProviderError(GCP, f"{where} has no {key}")
    return value


def sku_price(sku: Mapping[str, Any], where: str) -> tuple[Decimal, str, str]:
    """(unit price, usage unit, currency) of a SKU's current pricing: its latest ``pricingInfo``, the tier
    starting at 0 units."""
    infos = _field(sku, "pricingInfo", list, where)
    if not infos or not all(isinstance(info, dict) for info in infos):
        raise ProviderError(GCP, f"{where} has no pricingInfo")
    info = max(infos, key=lambda i: str(i.get("effectiveTime") or ""))
    expression = _field(info, "pricingExpression", dict, f"{where} pricingInfo")
    unit = _field(expression, "usageUnit", str, f"{where} pricingExpression")
    tiers = _field(expression, "tieredRates", list, f"{where} pricingExpression")
    if not tiers or not all(isinstance(tier, dict) for tier in tiers):
        raise ProviderError(GCP, f"{where} pricingExpression has no tieredRates")
    tier = min(tiers, key=lambda t: Decimal(str(t.get("startUsageAmount") or 0)))
    price = _field(tier, "unitPrice", dict, f"{where} tieredRates")
    currency = str(price.get("currencyCode") or CURRENCY)
    return unit_price(price.get("units"), price.get("nanos"), f"{where} tieredRates"), unit, currency


@dataclass
class _Prices:
    """Unit prices found in the SKU list, by (component, name, region, spot)."""

    by_key: dict[tuple[str, str, str, bool], Decimal]

    def get(self, component: str, name: str, region: str, spot: bool) -> Decimal | None:
        return self.by_key.get((component, name, region, spot))


class GcpBillingCatalog(PriceOnlyProvider):
    """GCP GPU VM prices composed from Cloud Billing Catalog SKUs. Sells nothing (see ``PriceOnlyProvider``)."""

    name = GCP
    refusal = "Scalar reads GCP prices from the Cloud Billing Catalog; creating GCP VMs is not supported yet"

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        regions: Sequence[str] = DEFAULT_REGIONS,
        max_pages: int = DEFAULT_MAX_PAGES,
        page_size: int = PAGE_SIZE,
        catalog: Catalog | None = None,
        timeout_s: float = 20.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not regions:
            raise ValueError("regions is empty: name at least one GCP region, such as us-central1")
        if max_pages < 1 or not 1 <= page_size <= PAGE_SIZE:
            raise ValueError(f"max_pages must be >= 1 and page_size 1..{PAGE_SIZE}")
        self.settings = settings
        self.regions = tuple(regions)
        self.max_pages = max_pages
        self.page_size = page_size
        self.catalog = catalog or load_catalog()
        self.last_report: FetchReport | None = None
        self._http = HttpClient(
            GCP, settings.base_url, timeout_s=timeout_s, retry=retry, sleep=sleep, rng=rng
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str], **kwargs: Any) -> GcpBillingCatalog:
        """``SCALAR_GCP_API_KEY``, ``SCALAR_GCP_BASE_URL``, ``SCALAR_GCP_REGIONS``, ``SCALAR_GCP_MAX_PAGES``."""
        kwargs.setdefault("regions", env_list(env, "SCALAR_GCP_REGIONS", DEFAULT_REGIONS))
        kwargs.setdefault("max_pages", env_positive_int(env, "SCALAR_GCP_MAX_PAGES", DEFAULT_MAX_PAGES))
        return cls(settings_from_env(env, GCP, DEFAULT_BASE_URL), **kwargs)

    def close(self) -> None:
        self._http.close()

    # -- pages ----------------------------------------------------------------------------------------
    def _pages(self, report: FetchReport) -> Iterator[tuple[int, list[Any]]]:
        token = ""
        pages = 0
        while True:
            params: dict[str, Any] = {"pageSize": self.page_size}
            if self.settings.api_key:
                params["key"] = self.settings.api_key
            if token:
                params["pageToken"] = token
            what = f"Cloud Billing skus page {pages + 1}"
            body = decode_json(GCP, self._http.request("GET", SKUS_PATH, params=params), what)
            pages += 1
            report.pages += 1
            skus = body.get("skus", [])  # proto3 JSON leaves an empty list out
            if not isinstance(skus, list):
                raise ProviderError(GCP, f"{what} has skus that are not a list")
            yield pages, skus
            token = body.get("nextPageToken") or ""
            if not isinstance(token, str):
                raise ProviderError(GCP, f"{what} has nextPageToken {token!r}, not a string")
            if not token:
                return
            if pages >= self.max_pages:
                raise page_cap_error(GCP, "Cloud Billing skus", self.max_pages, "SCALAR_GCP_MAX_PAGES")

    def _collect(self, report: FetchReport) -> _Prices:
        prices: dict[tuple[str, str, str, bool], Decimal] = {}
        for page, skus in self._pages(report):
            for index, sku in enumerate(skus):
                report.rows += 1
                where = f"Cloud Billing skus page {page}, sku {index + 1}"
                for key, price in self._read_sku(sku, where, report):
                    known = prices.setdefault(key, price)
                    if known != price:
                        report.skip(
                            "duplicate SKUs with different prices (the first is kept)",
                            "/".join(map(str, key)),
                        )
        return _Prices(prices)

    def _read_sku(
        self, sku: Any, where: str, report: FetchReport
    ) -> list[tuple[tuple[str, str, str, bool], Decimal]]:
        if not isinstance(sku, dict):
            raise ProviderError(GCP, f"{where} is {type(sku).__name__}, not an object")
        description = _field(sku, "description", str, where)
        where = f"{where} ({description!r})"
        category = _field(sku, "category", dict, where)
        usage = _field(category, "usageType", str, f"{where} category")
        if usage not in (ON_DEMAND, PREEMPTIBLE) or description.startswith(OTHER_TIER_PREFIXES):
            report.exclude(f"usage type {usage}" if usage not in (ON_DEMAND, PREEMPTIBLE) else "other tiers")
            return []
        kind = classify(description)
        if kind is None:
            if category.get("resourceGroup") == "GPU":
                report.skip("GPU SKUs whose description names no GPU Scalar knows", description)
            return []
        if kind.spot != (usage == PREEMPTIBLE):
            report.skip("SKUs whose usageType and description disagree about spot", description)
            return []
        if kind.component == "gpu" and kind.name in ATTACHED_GPU_HOSTS:
            report.skip(
                "GPU SKUs of GPUs attached to general-purpose hosts (n1, g2) the catalog has no shapes for",
                kind.name,
            )
            return []
        regions = sku.get("serviceRegions")
        if not isinstance(regions, list) or not regions:
            raise ProviderError(GCP, f"{where} has no serviceRegions")
        price, unit, currency = sku_price(sku, where)
        expected = RAM_UNIT if kind.component == "ram" else GPU_UNIT
        if unit != expected:
            report.skip(
                f"SKUs priced per another unit than expected ({expected})", f"{description} per {unit}"
            )
            return []
        if currency != CURRENCY:
            report.skip(f"SKUs in another currency than {CURRENCY}", f"{description} in {currency}")
            return []
        return [((kind.component, kind.name, str(region), kind.spot), price) for region in regions]

    # -- offers ---------------------------------------------------------------------------------------
    def list_offers(self, now: datetime) -> list[Offer]:
        """Every catalog-known GPU machine type whose parts are all priced, per configured region."""
        report = FetchReport(GCP)
        prices = self._collect(report)
        offers: list[Offer] = []
        for machine, (upstream, _count) in HOST_ACCELERATORS.items():
            for region in self.regions:
                for spot in (False, True):
                    gpu = prices.get("gpu", upstream, region, spot)
                    if gpu is None:
                        continue
                    offer = self._compose(machine, region, spot, gpu, prices, report, now)
                    if offer is not None:
                        offers.append(offer)
        report.offers = len(offers)
        self.last_report = report
        report.log(logger)
        return offers

    def _compose(
        self,
        machine: str,
        region: str,
        spot: bool,
        gpu: Decimal,
        prices: _Prices,
        report: FetchReport,
        now: datetime,
    ) -> Offer | None:
        kind = "spot" if spot else "on-demand"
        spec = self.catalog.spec(GCP, machine)
        if spec is None or spec.gpu_model is None:
            report.skip("machine types the catalog has no specs for (not guessed)", machine)
            return None
        family = host_family(machine)
        price = _quantity(spec.gpu_count) * gpu
        if family is not None:
            core = prices.get("core", family, region, spot)
            ram = prices.get("ram", family, region, spot)
            if core is None or ram is None:
                missing = " and ".join(
                    part for part, value in (("Core", core), ("Ram", ram)) if value is None
                )
                report.skip(
                    "VMs whose host vCPU/RAM SKUs are not priced in their region",
                    f"{machine} {kind} in {region}: no {family} Instance {missing}",
                )
                return None
            price += _quantity(spec.vcpu) * core + _quantity(spec.memory_gb) * ram
        if price <= 0:
            report.skip("VMs whose composed price is 0 or less", f"{machine} {kind} in {region}")
            return None
        return spec.offer(region, price, now, spot=spot, interruption_rate=None if spot else 0.0)


def _quantity(value: float) -> Decimal:
    """A spec quantity (GPUs, vCPUs, GiB) as an exact Decimal: 12.0 -> 12, 0.5 -> 0.5."""
    exact = Decimal(str(value))
    return exact.to_integral_value() if exact == exact.to_integral_value() else exact
