"""GCP Cloud Billing Catalog against a real loopback server: paging, exact unit prices, composed VM prices."""

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
from scalar.providers.base import Provider, ProviderError, WorkRunner
from scalar.providers.config import ProviderSettings
from scalar.providers.gcp import SKUS_PATH, GcpBillingCatalog, SkuKind, classify, unit_price
from scalar.providers.http import HttpStatusError, RetryPolicy
from tests.providers.fakeserver import FakeServer, Reply, Request

SAMPLES = Path(__file__).parent / "samples" / "gcp"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
KEY = "test-api-key-123"


def sample(page: int) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((SAMPLES / f"gcp_cloudbilling_skus_page{page}.json").read_text())
    return payload


PAGE1, PAGE2 = sample(1), sample(2)
PAGE1_TOKEN = PAGE1["nextPageToken"]


def sku(
    description: str, region: str, usage: str, nanos: int, *, group: str, unit: str = "h", units: str = "0"
) -> dict[str, Any]:
    """A SKU in the sample's exact shape (a deep copy of its first SKU) with another part and price."""
    made: dict[str, Any] = copy.deepcopy(PAGE1["skus"][0])
    made["description"] = description
    made["category"]["usageType"] = usage
    made["category"]["resourceGroup"] = group
    made["serviceRegions"] = [region]
    made["geoTaxonomy"]["regions"] = [region]
    expression = made["pricingInfo"][0]["pricingExpression"]
    expression["usageUnit"] = unit
    expression["tieredRates"][0]["unitPrice"] = {"currencyCode": "USD", "units": units, "nanos": nanos}
    return made


def throttled(body: dict[str, Any], retry_after: str) -> Reply:
    """A 429 answer with a ``Retry-After`` header."""
    headers = {"Content-Type": "application/json", "Retry-After": retry_after}
    return Reply(429, json.dumps(body).encode(), headers)


def host(family: str, part: str, region: str, nanos: int, *, spot: bool = False) -> dict[str, Any]:
    place = {"us-central1": "Americas", "us-east4": "Virginia"}[region]
    prefix = "Spot Preemptible " if spot else ""
    group, unit = ("CPU", "h") if part == "Core" else ("RAM", "GiBy.h")
    usage = "Preemptible" if spot else "OnDemand"
    return sku(
        f"{prefix}{family} Instance {part} running in {place}", region, usage, nanos, group=group, unit=unit
    )


# Host vCPU/RAM SKUs the samples do not carry (prices per vCPU-hour and per GiB-hour).
HOST_SKUS = [
    host("A2", "Core", "us-central1", 31_611_000),  # 0.031611
    host("A2", "Ram", "us-central1", 4_237_000),  # 0.004237
    host("A2", "Core", "us-central1", 9_483_000, spot=True),  # 0.009483
    host("A2", "Ram", "us-central1", 1_271_000, spot=True),  # 0.001271
    host("A3", "Core", "us-east4", 25_270_000),  # 0.02527
    host("A3", "Ram", "us-east4", 2_265_000),  # 0.002265
    host("A3", "Core", "us-east4", 7_580_000, spot=True),  # 0.00758
    host("A3", "Ram", "us-east4", 680_000, spot=True),  # 0.00068
]


def paged(pages: dict[str, dict[str, Any]]) -> Any:
    def handler(request: Request) -> Reply:
        return Reply.json(pages[request.param("pageToken", "") or ""])

    return handler


def with_hosts() -> dict[str, dict[str, Any]]:
    """The two sample pages, page 2 pointing on to a third page of host SKUs."""
    page2 = {**PAGE2, "nextPageToken": "hosts"}
    return {"": PAGE1, PAGE1_TOKEN: page2, "hosts": {"skus": HOST_SKUS, "nextPageToken": ""}}


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def api(_server: FakeServer) -> FakeServer:
    _server.requests.clear()
    _server.route("GET", SKUS_PATH, paged(with_hosts()))
    return _server


def client(server: FakeServer, sleeps: list[float] | None = None, **kw: Any) -> GcpBillingCatalog:
    settings = ProviderSettings(name="gcp", base_url=server.url, api_key=KEY, enabled=True)
    kw.setdefault("retry", RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05))
    kw.setdefault("regions", ("us-central1", "us-east4"))
    return GcpBillingCatalog(settings, sleep=(sleeps if sleeps is not None else []).append, **kw)


def prices(offers: list[Any]) -> dict[tuple[str, str, bool], Decimal]:
    return {(o.instance_type, o.region, o.spot): o.price_per_hour for o in offers}


def test_units_plus_nanos_is_exact() -> None:
    assert unit_price("9", 796_550_000, "x") == Decimal("9.79655")
    assert unit_price("0", 560_040_000, "x") == Decimal("0.56004")
    assert unit_price(None, 4_237_000, "x") == Decimal("0.004237")  # proto3 JSON omits a zero field
    assert unit_price("2", None, "x") == Decimal("2")
    assert str(unit_price("0", 31_611_000, "x")) == "0.031611" and str(unit_price("10", 0, "x")) == "10"
    with pytest.raises(ProviderError, match="out of range"):
        unit_price("1", 1_000_000_000, "x")


def test_a2_and_a3_prices_are_gpu_skus_plus_host_vcpu_and_ram_by_hand(api: FakeServer) -> None:
    got = prices(client(api).list_offers(NOW))
    # a2-highgpu-1g (1 x A100, 12 vCPU, 85 GiB), us-central1 on-demand:
    #   2.93391 + 12 x 0.031611 + 85 x 0.004237 = 2.93391 + 0.379332 + 0.360145 = 3.673387
    assert got[("a2-highgpu-1g", "us-central1", False)] == Decimal("3.673387")
    #   spot: 1.4341 + 12 x 0.009483 + 85 x 0.001271 = 1.4341 + 0.113796 + 0.108035 = 1.655931
    assert got[("a2-highgpu-1g", "us-central1", True)] == Decimal("1.655931")
    # a2-highgpu-8g (8 x A100, 96 vCPU, 680 GiB): 23.47128 + 3.034656 + 2.88116 = 29.387096
    assert got[("a2-highgpu-8g", "us-central1", False)] == Decimal("29.387096")
    # a3-highgpu-8g (8 x H100, 208 vCPU, 1872 GiB), us-east4 on-demand:
    #   8 x 9.79655 + 208 x 0.02527 + 1872 x 0.002265 = 78.3724 + 5.25616 + 4.24008 = 87.86864
    assert got[("a3-highgpu-8g", "us-east4", False)] == Decimal("87.86864")
    #   spot: 8 x 2.2356 + 208 x 0.00758 + 1872 x 0.00068 = 17.8848 + 1.57664 + 1.27296 = 20.7344
    assert got[("a3-highgpu-8g", "us-east4", True)] == Decimal("20.7344")
    # a3-highgpu-1g (1 x H100, 26 vCPU, 234 GiB): 9.79655 + 0.65702 + 0.53001 = 10.98358
    assert got[("a3-highgpu-1g", "us-east4", False)] == Decimal("10.98358")


def test_a3_mega_uses_a3plus_host_skus_and_a4_is_priced_by_its_gpu_slices(api: FakeServer) -> None:
    mega, b200 = (
        "Nvidia H100 80GB Mega GPU running in Americas",
        "A4 Nvidia B200 (1 gpu slice) running in Americas",
    )
    skus = [
        sku(mega, "us-central1", "OnDemand", 344_276_000, group="GPU", units="10"),  # 10.344276
        host("A3Plus", "Core", "us-central1", 26_924_000),  # 0.026924
        host("A3Plus", "Ram", "us-central1", 2_344_000),  # 0.002344
        sku(b200, "us-central1", "OnDemand", 312_500_000, group="GPU", units="13"),  # 13.3125
    ]
    api.route("GET", SKUS_PATH, Reply.json({"skus": skus}))
    got = prices(client(api).list_offers(NOW))
    # a3-megagpu-8g (8 x H100 Mega, 208 vCPU, 1872 GiB): 8 x 10.344276 + 208 x 0.026924 + 1872 x 0.002344
    #   = 82.754208 + 5.600192 + 4.387968 = 92.742368
    # a4-highgpu-8g: the B200 SKU is a slice of the whole VM, so 8 x 13.3125 = 106.5 and no host part.
    assert got == {
        ("a3-megagpu-8g", "us-central1", False): Decimal("92.742368"),
        ("a4-highgpu-8g", "us-central1", False): Decimal("106.5"),
    }


def test_composed_offers_carry_catalog_specs_and_per_gpu_price(api: FakeServer) -> None:
    offers = client(api).list_offers(NOW)
    a3 = next(o for o in offers if o.instance_type == "a3-highgpu-8g" and not o.spot)
    assert (a3.gpu_model, a3.gpu_count, a3.gpu_memory_gb, a3.vcpu, a3.memory_gb) == (
        "H100",
        8.0,
        80.0,
        208.0,
        1872.0,
    )
    assert a3.price_per_gpu_hour == Decimal("87.86864") / 8
    assert (a3.provider, a3.region, a3.availability_zone, a3.observed_at) == ("gcp", "us-east4", None, NOW)
    assert a3.interruption_rate == 0.0
    spot = next(o for o in offers if o.instance_type == "a3-highgpu-8g" and o.spot)
    assert spot.interruption_rate is None  # GCP publishes no preemption rate


def test_follows_page_tokens_with_the_key_and_page_size(api: FakeServer) -> None:
    gcp = client(api)
    gcp.list_offers(NOW)
    first, second, third = api.requests
    assert (
        first.param("key") == KEY and first.param("pageSize") == "5000" and first.param("pageToken") is None
    )
    assert second.param("pageToken") == PAGE1_TOKEN and third.param("pageToken") == "hosts"
    assert gcp.last_report is not None and gcp.last_report.pages == 3 and gcp.last_report.rows == 16


def test_the_two_sample_pages_alone_compose_nothing_and_say_why(api: FakeServer) -> None:
    api.route("GET", SKUS_PATH, paged({"": PAGE1, PAGE1_TOKEN: PAGE2}))
    gcp = client(api)
    assert gcp.list_offers(NOW) == []
    assert len(api.requests) == 2
    report = gcp.last_report
    assert report is not None
    missing = report.skipped["VMs whose host vCPU/RAM SKUs are not priced in their region"]
    # A100 (on-demand, spot) x {a2-highgpu-1g, -8g, a2-megagpu-16g} + H100 x {a3-highgpu-1g, -8g} x 2.
    assert missing == 10
    attached = "GPU SKUs of GPUs attached to general-purpose hosts (n1, g2) the catalog has no shapes for"
    assert report.skipped[attached] == 3  # L4 on-demand and spot, T4 on-demand
    assert report.excluded == {"usage type Commit1Yr": 1}  # the T4 1-year commitment
    assert any("no a2 Instance Core and Ram" in w for w in report.warnings)


def test_only_configured_regions_are_offered(api: FakeServer) -> None:
    offers = client(api, regions=("us-east4",)).list_offers(NOW)
    assert {o.region for o in offers} == {"us-east4"} and offers


def test_a_region_missing_one_host_part_is_skipped_not_guessed(api: FakeServer) -> None:
    pages = with_hosts()
    pages["hosts"] = {
        "skus": [s for s in HOST_SKUS if s["description"] != "A3 Instance Ram running in Virginia"]
    }
    api.route("GET", SKUS_PATH, paged(pages))
    got = prices(client(api).list_offers(NOW))
    assert ("a3-highgpu-8g", "us-east4", False) not in got
    assert ("a3-highgpu-8g", "us-east4", True) in got and ("a2-highgpu-1g", "us-central1", False) in got


def test_empty_pages_are_followed_and_an_empty_object_is_a_last_page(api: FakeServer) -> None:
    api.route("GET", SKUS_PATH, paged({"": {"skus": [], "nextPageToken": "next"}, "next": {}}))
    gcp = client(api)
    assert gcp.list_offers(NOW) == [] and len(api.requests) == 2


def test_paging_past_the_cap_is_an_error_naming_the_cap(api: FakeServer) -> None:
    api.route("GET", SKUS_PATH, Reply.json({"skus": [], "nextPageToken": "again"}))
    with pytest.raises(ProviderError, match="after 3 pages") as err:
        client(api, max_pages=3).list_offers(NOW)
    assert not err.value.retryable and "SCALAR_GCP_MAX_PAGES" in str(err.value)


@pytest.mark.parametrize(
    ("description", "expected"),
    [
        ("Spot Preemptible Nvidia H100 80GB GPU running in Virginia", SkuKind("gpu", "H100", True)),
        (
            "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas",
            SkuKind("gpu", "H100", True),
        ),
        ("Nvidia Tesla A100 GPU running in Americas", SkuKind("gpu", "A100", False)),
        ("Nvidia Tesla A100 80GB GPU running in Iowa", SkuKind("gpu", "A100-80GB", False)),
        ("Nvidia H100 80GB Mega GPU running in Americas", SkuKind("gpu", "H100-MEGA", False)),
        ("A2 Instance Ram running in Americas", SkuKind("ram", "a2", False)),
        ("Spot Preemptible A3 Instance Core running in Virginia", SkuKind("core", "a3", True)),
        ("A3Plus Instance Core running in Americas", SkuKind("core", "a3plus", False)),
        ("N1 Predefined Instance Core running in Americas", None),
        ("SSD backed Local Storage running in Americas", None),
        ("Reserved Nvidia H100 80GB Mega GPU in Americas", None),
    ],
)
def test_sku_descriptions_map_to_parts(description: str, expected: SkuKind | None) -> None:
    assert classify(description) == expected


def test_description_and_usage_type_disagreeing_about_spot_is_skipped(api: FakeServer) -> None:
    liar = sku(
        "Spot Preemptible Nvidia Tesla A100 GPU running in Americas",
        "us-central1",
        "OnDemand",
        1,
        group="GPU",
    )
    api.route("GET", SKUS_PATH, Reply.json({"skus": [liar]}))
    gcp = client(api)
    assert gcp.list_offers(NOW) == []
    assert gcp.last_report is not None
    assert gcp.last_report.skipped == {"SKUs whose usageType and description disagree about spot": 1}


@pytest.mark.parametrize("status", [400, 401, 403])
def test_client_errors_fail_at_once_without_leaking_the_key(api: FakeServer, status: int) -> None:
    body = {"error": {"code": status, "message": "API key not valid. Please pass a valid API key."}}
    api.route("GET", SKUS_PATH, Reply.json(body, status))
    sleeps: list[float] = []
    with pytest.raises(HttpStatusError) as err:
        client(api, sleeps).list_offers(NOW)
    assert err.value.status == status and not err.value.retryable and sleeps == []
    assert "API key not valid" in str(err.value) and KEY not in str(err.value)


def test_429_then_200_succeeds_honouring_retry_after(api: FakeServer) -> None:
    api.route(
        "GET",
        SKUS_PATH,
        [throttled({"error": {"message": "quota"}}, "0.02"), Reply.json(PAGE2)],
    )
    sleeps: list[float] = []
    client(api, sleeps).list_offers(NOW)
    assert sleeps == [0.02] and len(api.requests) == 2


def test_500s_are_retried_then_reported(api: FakeServer) -> None:
    api.route("GET", SKUS_PATH, Reply.json({"error": {"message": "backend error"}}, 500))
    with pytest.raises(HttpStatusError, match="backend error") as err:
        client(api).list_offers(NOW)
    assert err.value.retryable and len(api.requests) == 3


def test_timeout_is_a_retryable_error(api: FakeServer) -> None:
    api.route("GET", SKUS_PATH, Reply.json(PAGE2, delay_s=0.5))
    with pytest.raises(ProviderError, match="timed out") as err:
        client(api, timeout_s=0.1, retry=RetryPolicy(attempts=1)).list_offers(NOW)
    assert err.value.retryable and KEY not in str(err.value)


def test_malformed_json_is_a_clear_error(api: FakeServer) -> None:
    api.route("GET", SKUS_PATH, Reply.text('{"skus": [{"name": ', content_type="application/json"))
    with pytest.raises(ProviderError, match="page 1 answered with malformed JSON"):
        client(api).list_offers(NOW)


def _without(path: tuple[str | int, ...]) -> dict[str, Any]:
    page = copy.deepcopy(PAGE1)
    target: Any = page["skus"][0]
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    return page


@pytest.mark.parametrize(
    ("page", "named"),
    [
        (_without(("description",)), "sku 1 has no description"),
        (_without(("category",)), "sku 1 .* has no category"),
        (_without(("pricingInfo",)), "sku 1 .* has no pricingInfo"),
        (_without(("serviceRegions",)), "sku 1 .* has no serviceRegions"),
        (_without(("pricingInfo", 0, "pricingExpression", "tieredRates")), "has no tieredRates"),
        (
            _without(("pricingInfo", 0, "pricingExpression", "tieredRates", 0, "unitPrice")),
            "has no unitPrice",
        ),
        ({"skus": "none"}, "skus that are not a list"),
    ],
)
def test_a_page_missing_fields_is_an_error_naming_them(
    api: FakeServer, page: dict[str, Any], named: str
) -> None:
    api.route("GET", SKUS_PATH, Reply.json(page))
    with pytest.raises(ProviderError, match=named):
        client(api).list_offers(NOW)


def test_it_sells_nothing_and_says_so(api: FakeServer) -> None:
    gcp = client(api)
    assert isinstance(gcp, Provider)
    request = CapacityRequest("gcp", "a3-highgpu-8g", 1, 3600, None, Tier.FAST)
    with pytest.raises(ProviderError, match="creating GCP VMs is not supported yet") as err:
        gcp.buy(request, "k", NOW)
    assert not err.value.retryable
    with pytest.raises(ProviderError):
        gcp.release("b", NOW)
    assert not isinstance(gcp, WorkRunner)  # work on its nodes runs through the node agent
    assert gcp.orderbook("x", NOW) is None and gcp.events_since(0, NOW) == ((), 0)
    assert api.requests == []


def test_settings_from_env(api: FakeServer) -> None:
    off = GcpBillingCatalog.from_env({})
    assert not off.settings.enabled and "SCALAR_GCP_API_KEY" in (off.settings.disabled_reason or "")
    env = {"SCALAR_GCP_API_KEY": "k2", "SCALAR_GCP_BASE_URL": api.url, "SCALAR_GCP_REGIONS": "us-east4"}
    gcp = GcpBillingCatalog.from_env(env, sleep=lambda s: None)
    assert gcp.settings.enabled and gcp.regions == ("us-east4",)
    assert {o.instance_type for o in gcp.list_offers(NOW)} == {"a3-highgpu-1g", "a3-highgpu-8g"}
    assert api.requests[0].param("key") == "k2"
