"""Azure Retail Prices against a real loopback server replaying the sample pages."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from scalar.domain.market import CapacityRequest
from scalar.domain.tier import Tier
from scalar.providers.azure import (
    API_VERSION,
    PRICES_PATH,
    AzureRetailPrices,
    azure_settings_from_env,
)
from scalar.providers.base import Provider, ProviderError, WorkRunner
from scalar.providers.config import ProviderSettings
from scalar.providers.http import HttpStatusError, RetryPolicy
from tests.providers.fakeserver import FakeServer, Reply, Request

SAMPLES = Path(__file__).parent / "samples" / "azure"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def sample(name: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((SAMPLES / f"azure_retail_prices_{name}.json").read_text())
    return payload


PAGE1, PAGE2, EMPTY = sample("page1"), sample("page2"), sample("empty")
SKIP_2000 = PAGE1["NextPageLink"].replace("$skip=1000", "$skip=2000")


def by_skip(pages: dict[str, dict[str, Any]]) -> Any:
    """Serve ``pages[$skip]`` (``""`` for the first request), as the real API pages with ``$skip``."""

    def handler(request: Request) -> Reply:
        return Reply.json(pages[request.param("$skip", "") or ""])

    return handler


def three_pages() -> dict[str, dict[str, Any]]:
    """page 1 -> page 2 -> an empty page (page 2 pointing on instead of ending)."""
    page2 = copy.deepcopy(PAGE2)
    page2["NextPageLink"] = SKIP_2000
    return {"": PAGE1, "1000": page2, "2000": EMPTY}


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def api(_server: FakeServer) -> FakeServer:
    _server.requests.clear()
    _server.route("GET", PRICES_PATH, by_skip({"": PAGE1, "1000": PAGE2}))
    return _server


def client(server: FakeServer, sleeps: list[float] | None = None, **kw: Any) -> AzureRetailPrices:
    settings = ProviderSettings(name="azure", base_url=server.url, api_key=None, enabled=True)
    kw.setdefault("retry", RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05))
    return AzureRetailPrices(settings, sleep=(sleeps if sleeps is not None else []).append, **kw)


def item(**changes: Any) -> dict[str, Any]:
    """A real row of page 1 (NC24ads A100 v4, pay-as-you-go, eastus) with some fields changed."""
    row: dict[str, Any] = copy.deepcopy(PAGE1["Items"][0])
    row.pop("savingsPlan", None)
    row.update(changes)
    return row


def throttled(body: dict[str, Any], retry_after: str) -> Reply:
    """A 429 answer with a ``Retry-After`` header."""
    headers = {"Content-Type": "application/json", "Retry-After": retry_after}
    return Reply(429, json.dumps(body).encode(), headers)


def one_page(*items: dict[str, Any]) -> dict[str, Any]:
    return {**EMPTY, "Items": list(items), "Count": len(items)}


def test_sample_pages_become_offers_spot_and_on_demand(api: FakeServer) -> None:
    offers = client(api).list_offers(NOW)
    got = {(o.instance_type, o.region, o.spot): o.price_per_hour for o in offers}
    assert got == {
        ("Standard_NC24ads_A100_v4", "eastus", False): Decimal("3.673"),
        ("Standard_NC24ads_A100_v4", "eastus", True): Decimal("0.444433"),
        ("Standard_NC48ads_A100_v4", "eastus", False): Decimal("7.346"),
        ("Standard_NC48ads_A100_v4", "eastus", True): Decimal("0.888866"),
        ("Standard_NC96ads_A100_v4", "westus3", False): Decimal("14.692"),
        ("Standard_NC96ads_A100_v4", "westus3", True): Decimal("1.61612"),
    }
    assert len(api.requests) == 2


def test_spot_row_per_gpu_hour_by_hand(api: FakeServer) -> None:
    offers = client(api).list_offers(NOW)
    nc48_spot = next(o for o in offers if o.instance_type == "Standard_NC48ads_A100_v4" and o.spot)
    # "NC48ads A100 v4 Spot": retailPrice 0.888866 for 2 x A100 80GB -> 0.444433 $/GPU-h.
    assert (nc48_spot.gpu_model, nc48_spot.gpu_count, nc48_spot.gpu_memory_gb) == ("A100-80GB", 2.0, 80.0)
    assert nc48_spot.price_per_gpu_hour == Decimal("0.444433")
    assert (nc48_spot.vcpu, nc48_spot.memory_gb) == (48.0, 440.0)
    assert nc48_spot.interruption_rate is None and nc48_spot.availability_zone is None
    nc96_spot = next(o for o in offers if o.instance_type == "Standard_NC96ads_A100_v4" and o.spot)
    assert nc96_spot.price_per_gpu_hour == Decimal("1.61612") / 4 == Decimal("0.40403")
    on_demand = next(o for o in offers if o.instance_type == "Standard_NC24ads_A100_v4" and not o.spot)
    assert on_demand.interruption_rate == 0.0 and on_demand.observed_at == NOW


def test_windows_low_priority_and_reservation_rows_are_excluded(api: FakeServer) -> None:
    azure = client(api)
    prices = {o.price_per_hour for o in azure.list_offers(NOW)}
    # Windows spot 4.041, Low Priority 0.7346, 1-year reservation 19303: none of them is offered.
    assert prices.isdisjoint({Decimal("4.041"), Decimal("0.7346"), Decimal("19303")})
    report = azure.last_report
    assert report is not None and report.rows == 9 and report.offers == 6
    assert report.excluded == {"Low Priority tier": 1, "Windows prices": 1, "price type Reservation": 1}
    assert report.skipped == {}


def test_query_filters_vm_consumption_in_the_regions_and_follows_next_page_link(api: FakeServer) -> None:
    client(api, regions=("eastus", "westus3")).list_offers(NOW)
    first, second = api.requests
    assert first.param("api-version") == API_VERSION
    assert first.param("$filter") == (
        "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and "
        "(armRegionName eq 'eastus' or armRegionName eq 'westus3')"
    )
    # The link's query is followed on the configured server, not on prices.azure.com.
    assert second.param("$skip") == "1000" and second.path == PRICES_PATH
    assert "contains(armSkuName, 'A100')" in (second.param("$filter") or "")


def test_page1_page2_then_an_empty_page_ends(api: FakeServer) -> None:
    api.route("GET", PRICES_PATH, by_skip(three_pages()))
    azure = client(api)
    assert len(azure.list_offers(NOW)) == 6
    assert [r.param("$skip") for r in api.requests] == [None, "1000", "2000"]
    assert azure.last_report is not None and azure.last_report.pages == 3


def test_an_empty_first_page_gives_no_offers(api: FakeServer) -> None:
    api.route("GET", PRICES_PATH, Reply.json(EMPTY))
    assert client(api).list_offers(NOW) == []


def test_paging_past_the_cap_is_an_error_naming_the_cap(api: FakeServer) -> None:
    endless = {**PAGE1, "NextPageLink": SKIP_2000}
    api.route("GET", PRICES_PATH, Reply.json(endless))
    with pytest.raises(ProviderError, match="after 2 pages") as err:
        client(api, max_pages=2).list_offers(NOW)
    assert not err.value.retryable and "SCALAR_AZURE_MAX_PAGES" in str(err.value)
    assert len(api.requests) == 2


def test_nd96isr_h100_v5_has_8_gpus_not_the_published_12(api: FakeServer) -> None:
    row = item(
        armSkuName="Standard_ND96isr_H100_v5",
        skuName="ND96isr H100 v5",
        meterName="ND96isr H100 v5",
        productName="Virtual Machines ND H100 v5 Series",
        retailPrice=98.32,
    )
    api.route("GET", PRICES_PATH, Reply.json(one_page(row)))
    (offer,) = client(api).list_offers(NOW)
    assert (offer.gpu_model, offer.gpu_count) == ("H100", 8.0)
    assert offer.price_per_gpu_hour == Decimal("12.29")  # 98.32 / 8


def test_unknown_sizes_and_other_units_are_skipped_and_counted(api: FakeServer) -> None:
    rows = [
        item(armSkuName="Standard_D2s_v3", skuName="D2s v3"),
        item(unitOfMeasure="1/Month"),
        item(armRegionName="japaneast"),
        item(),
    ]
    api.route("GET", PRICES_PATH, Reply.json(one_page(*rows)))
    azure = client(api)
    assert [o.price_per_hour for o in azure.list_offers(NOW)] == [Decimal("3.673")]
    report = azure.last_report
    assert report is not None
    assert report.skipped == {
        "VM sizes the catalog does not know (no specs; not guessed)": 1,
        "rows priced per another unit than '1 Hour'": 1,
    }
    assert report.excluded == {"regions not asked for": 1}
    assert any("Standard_D2s_v3" in warning for warning in report.warnings)


def test_the_primary_meter_regions_latest_price_wins(api: FakeServer) -> None:
    rows = [
        item(retailPrice=3.5, effectiveStartDate="2023-01-01T00:00:00Z"),
        item(retailPrice=3.9, isPrimaryMeterRegion=False, effectiveStartDate="2025-01-01T00:00:00Z"),
        item(),
    ]
    api.route("GET", PRICES_PATH, Reply.json(one_page(*rows)))
    assert [o.price_per_hour for o in client(api).list_offers(NOW)] == [Decimal("3.673")]


@pytest.mark.parametrize("status", [400, 401, 403])
def test_client_errors_fail_at_once_with_the_message(api: FakeServer, status: int) -> None:
    api.route(
        "GET",
        PRICES_PATH,
        Reply.json({"Error": {"Code": "Bad", "Message": "x"}, "message": "bad filter"}, status),
    )
    sleeps: list[float] = []
    with pytest.raises(HttpStatusError) as err:
        client(api, sleeps).list_offers(NOW)
    assert err.value.status == status and not err.value.retryable and sleeps == []
    assert "bad filter" in str(err.value)


def test_429_then_200_succeeds_honouring_retry_after(api: FakeServer) -> None:
    api.route(
        "GET",
        PRICES_PATH,
        [throttled({"message": "slow down"}, "0.01"), Reply.json(PAGE2)],
    )
    sleeps: list[float] = []
    offers = client(api, sleeps).list_offers(NOW)
    assert len(offers) == 2 and sleeps == [0.01]


def test_500s_are_retried_then_reported(api: FakeServer) -> None:
    api.route("GET", PRICES_PATH, Reply.text("Internal Server Error", 500))
    sleeps: list[float] = []
    with pytest.raises(HttpStatusError) as err:
        client(api, sleeps).list_offers(NOW)
    assert err.value.status == 500 and err.value.retryable and len(sleeps) == 2 and len(api.requests) == 3


def test_timeout_is_a_retryable_error(api: FakeServer) -> None:
    api.route("GET", PRICES_PATH, Reply.json(PAGE2, delay_s=0.5))
    with pytest.raises(ProviderError, match="timed out") as err:
        client(api, timeout_s=0.1, retry=RetryPolicy(attempts=1)).list_offers(NOW)
    assert err.value.retryable


def test_malformed_json_is_a_clear_error(api: FakeServer) -> None:
    api.route("GET", PRICES_PATH, Reply.text('{"Items": [', 200, content_type="application/json"))
    with pytest.raises(ProviderError, match="page 1 answered with malformed JSON"):
        client(api).list_offers(NOW)


@pytest.mark.parametrize(
    ("page", "named"),
    [
        ({k: v for k, v in PAGE2.items() if k != "Items"}, "page 1 has no Items"),
        ({k: v for k, v in PAGE2.items() if k != "NextPageLink"}, "page 1 has no NextPageLink"),
        (one_page({k: v for k, v in item().items() if k != "retailPrice"}), "item 1 .* has no retailPrice"),
        (one_page({k: v for k, v in item().items() if k != "armSkuName"}), "item 1 .* has no armSkuName"),
        (one_page(item(retailPrice="cheap")), "retailPrice is 'cheap', not a number"),
    ],
)
def test_a_page_missing_fields_is_an_error_naming_them(
    api: FakeServer, page: dict[str, Any], named: str
) -> None:
    api.route("GET", PRICES_PATH, Reply.json(page))
    with pytest.raises(ProviderError, match=named):
        client(api).list_offers(NOW)


def test_it_sells_nothing_and_says_so(api: FakeServer) -> None:
    azure = client(api)
    assert isinstance(azure, Provider)
    request = CapacityRequest("azure", "Standard_NC24ads_A100_v4", 1, 3600, None, Tier.FLEX)
    with pytest.raises(ProviderError, match="creating Azure VMs is not supported yet") as err:
        azure.buy(request, "k", NOW)
    assert not err.value.retryable
    with pytest.raises(ProviderError):
        azure.release("b", NOW)
    assert not isinstance(azure, WorkRunner)  # work on its nodes runs through the node agent
    assert azure.orderbook("x", NOW) is None and azure.events_since(3, NOW) == ((), 3)
    assert api.requests == []


def test_enabled_by_configuration_alone_never_by_default(api: FakeServer) -> None:
    off = azure_settings_from_env({})
    assert not off.enabled and "SCALAR_AZURE_ENABLED" in (off.disabled_reason or "")
    switched = azure_settings_from_env({"SCALAR_AZURE_ENABLED": "true"})
    assert switched.enabled and switched.base_url == "https://prices.azure.com" and switched.api_key is None
    env = {"SCALAR_AZURE_BASE_URL": api.url, "SCALAR_AZURE_REGIONS": "westus3", "SCALAR_AZURE_MAX_PAGES": "4"}
    azure = AzureRetailPrices.from_env(env, sleep=lambda s: None)
    assert azure.settings.enabled and azure.regions == ("westus3",) and azure.max_pages == 4
    assert {o.region for o in azure.list_offers(NOW)} == {"westus3"}
