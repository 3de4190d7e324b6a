"""The packaged price catalog: every published row accounted for, exact conversions, flagged anomalies."""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.offers import Offer
from scalar.providers.catalog import (
    CANONICAL_GPU_MODELS,
    DROPPED,
    KEPT,
    PROVIDERS,
    UNTRUSTED,
    Catalog,
    NoReferencePriceError,
    build_catalog,
    canonical_gpu_model,
    load_catalog,
    package_data_dir,
    reference_price_per_gpu_hour,
)
from scalar.providers.catalog.names import parse_prime_name, parse_runpod_name
from scalar.providers.catalog.outliers import PricePoint, flag_price_outliers
from scalar.providers.catalog.records import CatalogAnomaly, PriceRow
from scalar.providers.catalog.rules import is_usual_gpu_count, judge_row
from scalar.providers.catalog.sources import PROVIDER_FILES, SPOT_ADVISOR_FILE
from tests.conftest import DATA, REPO

DOC = REPO / "docs" / "prices.md"
# The Spot Advisor buckets and the probability the catalog uses for each (docs/prices.md).
BUCKET_MIDPOINTS = {0: 0.025, 1: 0.075, 2: 0.125, 3: 0.175, 4: 0.25}


def packaged_rows(name: str) -> list[dict[str, str]]:
    text = (package_data_dir() / name).read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def manifest() -> dict[str, dict[str, object]]:
    data = json.loads((package_data_dir() / "manifest.json").read_text(encoding="utf-8"))
    files: dict[str, dict[str, object]] = data["files"]
    return files


def dec(text: str) -> Decimal | None:
    return Decimal(text) if text else None


def at_precision(price: Decimal, spot: Decimal) -> Decimal:
    """On-demand rounded to the spot price's decimals (AWS publishes spot to 4 decimals)."""
    if int(spot.as_tuple().exponent) > int(price.as_tuple().exponent):
        return price.quantize(spot, rounding=ROUND_HALF_UP)
    return price


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def find(catalog: Catalog, provider: str, instance_type: str, zone_or_region: str, spot: bool) -> Offer:
    matches = [
        offer
        for offer in catalog.by_provider(provider)
        if offer.instance_type == instance_type
        and zone_or_region in (offer.availability_zone, offer.region)
        and offer.spot == spot
    ]
    assert len(matches) == 1, matches
    return matches[0]


def flags(
    catalog: Catalog, code: str, provider: str | None = None, instance_type: str | None = None
) -> list[CatalogAnomaly]:
    return [
        anomaly
        for anomaly in catalog.anomalies_with(code)
        if (provider is None or anomaly.provider == provider)
        and (instance_type is None or anomaly.instance_type == instance_type)
    ]


# -- every published row is accounted for ---------------------------------------------------------------


def test_manifest_row_counts_match_the_packaged_files() -> None:
    for name, info in manifest().items():
        assert len(packaged_rows(name)) == info["rows"], name


def test_every_packaged_row_becomes_offers_or_a_dropped_flag(catalog: Catalog) -> None:
    accounted: set[str] = set()
    for source in catalog.sources.values():
        accounted.update(source.split("+"))
    for anomaly in catalog.anomalies:
        if anomaly.action == DROPPED and anomaly.spot is None:
            accounted.update(anomaly.source.split("+"))
    for provider, names in PROVIDER_FILES.items():
        for name in names:
            expected = {f"{name}:{line + 2}" for line in range(len(packaged_rows(name)))}
            missing = expected - accounted
            assert not missing, f"{provider}: rows neither offered nor flagged: {sorted(missing)[:5]}"
    assert {offer.provider for offer in catalog.offers} == set(PROVIDERS)


@pytest.mark.parametrize("provider", ["aws", "azure", "prime", "runpod"])
def test_offer_counts_per_provider_follow_from_the_published_prices(catalog: Catalog, provider: str) -> None:
    """One on-demand offer per positive price; one spot offer per positive spot price below it (or alone)."""
    (name,) = PROVIDER_FILES[provider]
    on_demand = spot = 0
    for row in packaged_rows(name):
        price, spot_price = dec(row["Price"]), dec(row["SpotPrice"])
        if canonical_gpu_model(row["AcceleratorName"]) is None:
            continue
        if price is not None and price > 0:
            on_demand += 1
        if (
            spot_price is not None
            and spot_price > 0
            and (price is None or spot_price < at_precision(price, spot_price))
        ):
            spot += 1
    offers = catalog.by_provider(provider)
    assert sum(not offer.spot for offer in offers) == on_demand
    assert sum(offer.spot for offer in offers) == spot


def test_gcp_offers_are_one_per_joined_host_row_plus_gpu_only_rows(catalog: Catalog) -> None:
    hosts = packaged_rows("gcp_host_vms.csv")
    attached = [
        row for row in packaged_rows("gcp_accelerators.csv") if row["AcceleratorName"] in ("L4", "T4", "V100")
    ]
    on_demand = [offer for offer in catalog.by_provider("gcp") if not offer.spot]
    joined = [offer for offer in on_demand if "+" not in offer.instance_type]
    gpu_only = [offer for offer in on_demand if "+" in offer.instance_type]
    unjoined = flags(catalog, "gcp_no_gpu_price") + flags(catalog, "gcp_unknown_host")
    assert len(joined) + len(unjoined) == len(hosts)
    assert len(gpu_only) == len(attached)
    assert all(catalog.source_of(offer).count("+") == 1 for offer in joined)  # type: ignore[union-attr]


# -- exact conversions on specific rows -------------------------------------------------------------------


def test_aws_p5_48xlarge_row_per_instance_and_per_gpu(catalog: Catalog) -> None:
    # aws_vms.csv: p5.48xlarge,H100,8,192,2048,81920,55.04,11.2543,us-east-2,use2-az1
    on_demand = find(catalog, "aws", "p5.48xlarge", "use2-az1", spot=False)
    assert on_demand.price_per_hour == Decimal("55.04")
    assert on_demand.price_per_gpu_hour == Decimal("6.88")
    assert (on_demand.gpu_model, on_demand.gpu_count, on_demand.gpu_memory_gb) == ("H100", 8.0, 80.0)
    assert (on_demand.vcpu, on_demand.memory_gb, on_demand.region) == (192.0, 2048.0, "us-east-2")
    assert on_demand.interruption_rate == 0.0  # on-demand capacity is not interrupted
    spot = find(catalog, "aws", "p5.48xlarge", "use2-az1", spot=True)
    assert spot.price_per_hour == Decimal("11.2543")
    assert spot.price_per_gpu_hour == Decimal("1.4067875")
    # Spot Advisor: us-east-2 p5.48xlarge r=1 (5-10%) -> midpoint 7.5%
    assert spot.interruption_rate == 0.075


def test_aws_fractional_gpu_row(catalog: Catalog) -> None:
    # g6f.2xlarge,L4,0.25,8,32,5722,0.52741,0.1727,ca-central-1,cac1-az1: a quarter of an L4
    offer = find(catalog, "aws", "g6f.2xlarge", "cac1-az1", spot=False)
    assert offer.gpu_count == 0.25
    assert offer.gpu_memory_gb == pytest.approx(5722 / 1024)
    assert offer.price_per_gpu_hour == Decimal("2.10964")


def test_gcp_a2_highgpu_1g_is_the_a100_sku_plus_its_host(catalog: Catalog) -> None:
    # gcp_accelerators.csv: A100,1,40960,us-central1,us-central1-a,2.93391,1.4341
    # gcp_host_vms.csv:     a2-highgpu-1g,12,85,us-central1,us-central1-a,0.73948,0.36975
    on_demand = find(catalog, "gcp", "a2-highgpu-1g", "us-central1-a", spot=False)
    assert on_demand.price_per_hour == Decimal("3.67339")
    assert (on_demand.gpu_model, on_demand.gpu_count, on_demand.gpu_memory_gb) == ("A100", 1.0, 40.0)
    assert (on_demand.vcpu, on_demand.memory_gb) == (12.0, 85.0)
    spot = find(catalog, "gcp", "a2-highgpu-1g", "us-central1-a", spot=True)
    assert spot.price_per_hour == Decimal("1.80385")
    assert catalog.source_of(on_demand) == "gcp_accelerators.csv:13+gcp_host_vms.csv:13"


def test_gcp_a3_megagpu_is_an_h100_and_t4_stays_gpu_only(catalog: Catalog) -> None:
    mega = find(catalog, "gcp", "a3-megagpu-8g", "us-central1-a", spot=False)
    assert (mega.gpu_model, mega.gpu_count) == ("H100", 8.0)
    assert mega.price_per_hour == Decimal("82.75421") + Decimal("9.46006")
    t4 = find(catalog, "gcp", "n1+T4x1", "us-central1-a", spot=False)
    assert (t4.price_per_hour, t4.vcpu, t4.memory_gb) == (Decimal("0.35"), 0.0, 0.0)
    assert not catalog.is_trusted(t4)
    assert [a.code for a in catalog.anomalies_for(t4)] == ["gpu_only_price"]


def test_prime_names_are_parsed_and_cross_checked(catalog: Catalog) -> None:
    shape = parse_prime_name("dc_wildebeest__8xB200_180GB__160__1792")
    assert shape is not None
    assert (shape.upstream, shape.gpu_count, shape.gpu_memory_gb, shape.vcpu, shape.memory_gb) == (
        "dc_wildebeest",
        8.0,
        180.0,
        160.0,
        1792.0,
    )
    nvlink = parse_prime_name("hyperstack__8xA100_80GB__252__1920__NVLINK")
    assert nvlink is not None and nvlink.tags == ("NVLINK",)
    assert parse_runpod_name("8x_H100-SXM_SECURE") is not None
    assert parse_prime_name("not-a-prime-name") is None
    # ten L40S on one Crusoe box: an unusual count, kept as published
    ten = find(catalog, "prime", "crusoecloud__10xL40S_48GB__80__1470", "us-east1-a", spot=False)
    assert (ten.gpu_count, ten.price_per_hour, ten.price_per_gpu_hour) == (
        10.0,
        Decimal("10.0"),
        Decimal("1"),
    )
    assert [(a.code, a.action) for a in catalog.anomalies_for(ten)] == [("gpu_count_unusual", KEPT)]
    # a __SPOT listing is a spot-only instance type: one spot offer, nothing flagged
    listing = "datacrunch__1xA100_80GB__22__120__SPOT"
    offers = [offer for offer in catalog.by_provider("prime") if offer.instance_type == listing]
    assert [(offer.spot, offer.price_per_hour) for offer in offers] == [(True, Decimal("0.53"))]
    assert offers[0].gpu_model == "A100-80GB" and offers[0].interruption_rate is None
    assert not catalog.anomalies_for(offers[0])
    assert not flags(catalog, "spec_name_mismatch") and not flags(catalog, "gpu_count_name_mismatch")


def test_upstream_spellings_map_to_one_canonical_model(catalog: Catalog) -> None:
    assert {canonical_gpu_model(name) for name in ("H100", "H100-SXM", "H100-MEGA")} == {"H100"}
    assert canonical_gpu_model("A6000") == canonical_gpu_model("RTXA6000") == "RTXA6000"
    assert canonical_gpu_model("Radeon MI25") == "MI25"
    assert canonical_gpu_model("tpu-v6e-1") is None
    runpod_sxm = find(catalog, "runpod", "8x_H200-SXM_SECURE", "US-TX-1", spot=False)
    assert (runpod_sxm.gpu_model, runpod_sxm.gpu_memory_gb) == ("H200", 141.0)


# -- anomalies, each by its rule --------------------------------------------------------------------------


def test_gcp_h100_price_levels_are_flagged_by_the_median_rule(catalog: Catalog) -> None:
    """GCP lists H100 GPU SKUs at 4.20 in some regions and 9.80-12.74 in others (us-east4: 9.80)."""
    gcp_h100 = [
        offer
        for offer in catalog.by_gpu_model("H100")
        if offer.provider == "gcp" and not offer.spot and "+" not in offer.instance_type
    ]
    flagged = {f"{a.availability_zone}{a.instance_type}" for a in flags(catalog, "price_outlier_low", "gcp")}
    # per-GPU SKU price per zone, from the packaged accelerator file
    sku = {
        (row["AvailabilityZone"], row["AcceleratorName"], row["AcceleratorCount"]): Decimal(row["Price"])
        / Decimal(row["AcceleratorCount"])
        for row in packaged_rows("gcp_accelerators.csv")
    }
    upstream = {
        "a3-megagpu-8g": ("H100-MEGA", "8"),
        "a3-highgpu-8g": ("H100", "8"),
        "a3-highgpu-1g": ("H100", "1"),
    }
    per_gpu = {
        offer: sku[(str(offer.availability_zone), *upstream[offer.instance_type])] for offer in gcp_h100
    }
    norm = statistics.median(per_gpu.values())
    for offer, price in per_gpu.items():
        is_flagged = f"{offer.availability_zone}{offer.instance_type}" in flagged
        assert is_flagged == (price * 2 < norm), (offer.key, price, norm)
        assert catalog.is_trusted(offer) == (not is_flagged)
    east4 = find(catalog, "gcp", "a3-highgpu-8g", "us-east4-a", spot=False)
    assert catalog.is_trusted(east4), "9.80/GPU in us-east4 sits at the median of GCP's H100 prices"
    central = find(catalog, "gcp", "a3-highgpu-8g", "us-central1-a", spot=False)
    (flag,) = catalog.anomalies_for(central)
    assert flag.code == "price_outlier_low" and flag.action == UNTRUSTED
    assert "4.20076125/GPU-h" in flag.message and "0.43x the median" in flag.message
    assert catalog.cheapest("H100", "gcp", False) not in {central, None}


def test_outlier_rule_on_a_hand_built_group() -> None:
    def point(price: str, spot: bool = False, zone: str = "a") -> PricePoint:
        offer = Offer(
            "x",
            "box",
            "r",
            Decimal(price) * 8,
            gpu_model="H100",
            gpu_count=8,
            availability_zone=zone,
            spot=spot,
        )
        return PricePoint(offer, Decimal(price))

    group = [
        point("2.0", zone="a"),
        point("2.2", zone="b"),
        point("2.1", zone="c"),
        point("9.8", zone="d"),
        point("0.9", zone="e"),
    ]
    found = {(a.availability_zone, a.code) for a in flag_price_outliers(group)}
    assert found == {("d", "price_outlier_high"), ("e", "price_outlier_low")}
    # deep spot discounts are not flagged; fewer than three offers are not judged
    spot = [
        point("2.0", True, "a"),
        point("2.1", True, "b"),
        point("0.5", True, "c"),
        point("5.0", True, "d"),
    ]
    assert {(a.availability_zone, a.code) for a in flag_price_outliers(spot)} == {("d", "price_outlier_high")}
    assert flag_price_outliers([point("1"), point("10")]) == []


def test_a4_host_at_zero_is_flagged_and_the_b200_rows_carry_the_price(catalog: Catalog) -> None:
    zero_hosts = [
        row
        for row in packaged_rows("gcp_host_vms.csv")
        if row["InstanceType"] == "a4-highgpu-8g" and Decimal(row["Price"]) == 0
    ]
    found = flags(catalog, "host_price_zero", "gcp", "a4-highgpu-8g")
    assert len(found) == len(zero_hosts) > 0
    assert all(flag.action == KEPT for flag in found)
    b200 = find(catalog, "gcp", "a4-highgpu-8g", "us-central1-b", spot=False)
    assert b200.price_per_hour == Decimal("90.216") and b200.gpu_model == "B200"


def test_spot_equal_to_on_demand_keeps_only_the_on_demand_offer(catalog: Catalog) -> None:
    equal = [
        row for row in packaged_rows("azure_vms.csv") if row["Price"] and row["Price"] == row["SpotPrice"]
    ]
    assert equal and all("H100_v5" in row["InstanceType"] for row in equal)
    assert len(flags(catalog, "spot_not_discounted", "azure")) == len(equal)
    for row in equal:
        offers = [
            o
            for o in catalog.by_provider("azure")
            if (o.instance_type, o.region) == (row["InstanceType"], row["Region"])
        ]
        assert [(o.spot, o.price_per_hour) for o in offers] == [(False, Decimal(row["Price"]))]


def test_spot_equal_to_on_demand_at_its_published_precision_is_not_a_discount(catalog: Catalog) -> None:
    def row_flags(zone: str) -> list[tuple[str, bool | None, str]]:
        return [
            (a.code, a.spot, a.action)
            for a in catalog.anomalies
            if (a.provider, a.instance_type, a.availability_zone) == ("aws", "p4d.24xlarge", zone)
        ]

    # p4d.24xlarge,...,27.43298,27.433,eu-central-1,euc1-az2: spot is on-demand rounded to 4 decimals
    assert row_flags("euc1-az2") == [("spot_not_discounted", True, DROPPED)]
    assert catalog.is_trusted(find(catalog, "aws", "p4d.24xlarge", "euc1-az2", spot=False))
    # ...,25.25174,25.2517,ca-central-1,cac1-az1: 0.00004 below is no discount either
    assert row_flags("cac1-az1") == [("spot_not_discounted", True, DROPPED)]
    assert not [
        o for o in catalog.by_gpu_model("A100") if o.spot and o.availability_zone in ("euc1-az2", "cac1-az1")
    ]


def test_nd96isr_h100_v5_is_corrected_to_eight_gpus(catalog: Catalog) -> None:
    published = [
        row for row in packaged_rows("azure_vms.csv") if row["InstanceType"] == "Standard_ND96isr_H100_v5"
    ]
    assert {row["AcceleratorCount"] for row in published} == {"12"}
    assert not is_usual_gpu_count(12.0), "the general rule flags 12 on its own"
    corrected = flags(catalog, "gpu_count_corrected", "azure", "Standard_ND96isr_H100_v5")
    assert len(corrected) == len(published)
    assert all(
        "published GPU count 12" in flag.message and "corrected to 8" in flag.message for flag in corrected
    )
    spec = catalog.spec("azure", "Standard_ND96isr_H100_v5")
    assert spec is not None and (spec.gpu_model, spec.gpu_count, spec.gpu_memory_gb) == ("H100", 8.0, 80.0)
    eastus = find(catalog, "azure", "Standard_ND96isr_H100_v5", "eastus", spot=False)
    assert eastus.price_per_gpu_hour == Decimal("12.29")


def test_azure_nvv4_sizes_are_fractions_of_an_mi25(catalog: Catalog) -> None:
    per_gpu = {
        offer.instance_type: offer.price_per_gpu_hour
        for offer in catalog.by_gpu_model("MI25")
        if offer.region == "eastus" and not offer.spot
    }
    # 0.233 / (1/8) == 0.466 / (1/4) == 0.932 / (1/2) == 1.864 / 1
    assert set(per_gpu.values()) == {Decimal("1.864")}
    assert catalog.spec("azure", "Standard_NV4as_v4").gpu_count == 0.125  # type: ignore[union-attr]


def test_runpod_l40s_spot_above_on_demand_drops_spot_and_distrusts_on_demand(catalog: Catalog) -> None:
    inverted = [
        row
        for row in packaged_rows("runpod_vms.csv")
        if row["SpotPrice"] and Decimal(row["SpotPrice"]) > Decimal(row["Price"])
    ]
    assert inverted and {row["AcceleratorName"] for row in inverted} == {"L40S"}
    assert len(flags(catalog, "spot_above_on_demand", "runpod")) == len(inverted)
    l40s = [offer for offer in catalog.by_provider("runpod") if offer.gpu_model == "L40S"]
    assert l40s and not any(offer.spot for offer in l40s)
    assert not any(catalog.is_trusted(offer) for offer in l40s)
    assert catalog.cheapest("L40S", "runpod", False) is None


def test_aws_p5e_is_spot_only_and_empty_prices_make_no_offer(catalog: Catalog) -> None:
    rows = [row for row in packaged_rows("aws_vms.csv") if row["InstanceType"] == "p5e.48xlarge"]
    with_spot = [row for row in rows if row["SpotPrice"]]
    offers = [offer for offer in catalog.by_provider("aws") if offer.instance_type == "p5e.48xlarge"]
    assert all(offer.spot for offer in offers) and len(offers) == len(with_spot)
    assert len(flags(catalog, "no_on_demand_price", "aws", "p5e.48xlarge")) == len(with_spot)
    assert len(flags(catalog, "no_price", "aws", "p5e.48xlarge")) == len(rows) - len(with_spot)
    spec = catalog.spec("aws", "p5e.48xlarge")
    assert spec is not None and (spec.gpu_model, spec.gpu_count, spec.gpu_memory_gb) == ("H200", 8.0, 141.0)
    # empty SpotPrice: no spot offer and no flag
    no_spot = find(catalog, "aws", "p5.48xlarge", "eun1-az1", spot=False)
    assert not catalog.anomalies_for(no_spot)
    assert not [
        o
        for o in catalog.by_provider("aws")
        if o.spot and o.availability_zone == "eun1-az1" and o.instance_type == "p5.48xlarge"
    ]


def test_tpus_are_flagged_not_offered(catalog: Catalog) -> None:
    tpus = [row for row in packaged_rows("gcp_accelerators.csv") if row["AcceleratorName"].startswith("tpu-")]
    assert len(flags(catalog, "not_a_gpu", "gcp")) == len(tpus) > 0


@given(
    price=st.one_of(st.none(), st.decimals(min_value=-1, max_value=100, places=3, allow_nan=False)),
    spot=st.one_of(st.none(), st.decimals(min_value=-1, max_value=100, places=3, allow_nan=False)),
    count=st.sampled_from([0.25, 1.0, 3.0, 8.0, 12.0]),
)
def test_judged_rows_never_offer_a_bad_price(
    price: Decimal | None, spot: Decimal | None, count: float
) -> None:
    row = PriceRow("aws", "x.large", "r", "z", "H100", count, 80.0, 8.0, 64.0, price, spot, "t.csv:2")
    verdict = judge_row(row)
    if verdict.on_demand:
        assert price is not None and price > 0
    if verdict.spot:
        # a spot price is offered below a valid on-demand price, or alone (no valid on-demand price)
        assert spot is not None and spot > 0 and (price is None or price <= 0 or spot < price)
    if not (verdict.on_demand or verdict.spot):
        assert any(a.action == DROPPED for a in verdict.anomalies), "a row that makes no offer says why"
    assert (not is_usual_gpu_count(count)) == any(a.code == "gpu_count_unusual" for a in verdict.anomalies)


# -- catalog-wide invariants ------------------------------------------------------------------------------


def test_every_offer_has_a_positive_price_and_a_documented_canonical_model(catalog: Catalog) -> None:
    gpus_doc = DOC.parent / "gpus.md"
    table = gpus_doc.read_text(encoding="utf-8").split("## Models")[1].split("##")[0]
    documented = set(re.findall(r"^\| `([A-Za-z0-9-]+)` \|", table, re.MULTILINE))
    assert documented >= CANONICAL_GPU_MODELS
    for offer in catalog.offers:
        assert offer.price_per_hour > 0, offer.key
        assert offer.gpu_model in CANONICAL_GPU_MODELS, offer.key
        assert offer.gpu_count > 0 and offer.gpu_memory_gb > 0
    assert len({offer.key for offer in catalog.offers}) == len(catalog.offers)
    assert {a.action for a in catalog.anomalies} <= {KEPT, UNTRUSTED, DROPPED, "corrected"}


def test_interruption_rates_come_from_the_spot_advisor_bucket(catalog: Catalog) -> None:
    advice = {
        (row["region"], row["instance_type"]): int(row["interruption_range_index"])
        for row in packaged_rows(SPOT_ADVISOR_FILE)
    }
    rated = 0
    for offer in catalog.offers:
        if offer.provider == "aws" and offer.spot:
            index = advice.get((offer.region, offer.instance_type))
            expected = None if index is None else BUCKET_MIDPOINTS[index]
            assert offer.interruption_rate == expected, offer.key
            rated += expected is not None
        elif offer.spot:
            assert offer.interruption_rate is None, offer.key
        else:
            assert offer.interruption_rate == 0.0, offer.key
    assert rated > 0


def test_lookups_agree_with_the_offers(catalog: Catalog) -> None:
    assert sum(len(catalog.by_provider(p)) for p in catalog.providers) == len(catalog.offers)
    assert sum(len(catalog.by_gpu_model(m)) for m in catalog.gpu_models) == len(catalog.offers)
    groups: dict[tuple[str, str, bool], list[Offer]] = defaultdict(list)
    for offer in catalog.trusted_offers():
        assert offer.gpu_model is not None
        groups[(offer.gpu_model, offer.provider, offer.spot)].append(offer)
    assert set(catalog.cheapest_offers()) == set(groups)
    for key, offers in groups.items():
        best = catalog.cheapest(*key)
        assert best is not None
        assert best.price_per_gpu_hour == min(o.price_per_gpu_hour for o in offers)  # type: ignore[type-var]
    for (provider, instance_type), spec in catalog.specs.items():
        assert (spec.provider, spec.instance_type) == (provider, instance_type)
    assert catalog.spec("aws", "no-such-type") is None


def test_reference_price_is_the_median_of_provider_medians_without_outliers(catalog: Catalog) -> None:
    for model in ("H100", "H200"):
        for spot in (False, True):
            per_provider: dict[str, list[Decimal]] = defaultdict(list)
            for offer in catalog.by_gpu_model(model):
                if offer.spot == spot and catalog.is_trusted(offer):
                    per_provider[offer.provider].append(offer.price_per_gpu_hour)  # type: ignore[arg-type]
            expected = statistics.median(statistics.median(v) for v in per_provider.values())
            assert reference_price_per_gpu_hour(model, spot) == expected
    excluded = [o for o in catalog.by_gpu_model("H100") if not catalog.is_trusted(o)]
    assert excluded and not set(excluded) & set(catalog.reference_offers("H100", False))
    with pytest.raises(NoReferencePriceError, match="To fix"):
        catalog.reference_price_per_gpu_hour("NOPE", False)


def test_the_documented_reference_prices_are_the_computed_ones() -> None:
    text = DOC.read_text(encoding="utf-8")
    for model in ("H100", "H200"):
        for spot, kind in ((False, "on-demand"), (True, "spot")):
            for minimum in (0.0, 8.0):
                value = reference_price_per_gpu_hour(model, spot, min_gpu_count=minimum)
                line = f"| {model} | {kind} | {'8+' if minimum else 'any'} | {value} |"
                assert line in text, line


def test_documented_anomaly_counts_are_current(catalog: Catalog) -> None:
    text = DOC.read_text(encoding="utf-8")
    for code, count in catalog.anomaly_counts().items():
        assert f"| `{code}` | {count} |" in text, code


# -- determinism, caching, speed, curation ----------------------------------------------------------------


def test_loading_is_cached_deterministic_and_fast() -> None:
    assert load_catalog() is load_catalog()
    started = time.perf_counter()
    fresh = build_catalog(package_data_dir())
    elapsed = time.perf_counter() - started
    again = build_catalog(package_data_dir())
    assert fresh.offers == again.offers and fresh.anomalies == again.anomalies
    assert fresh.offers == load_catalog().offers
    assert elapsed < 2.0, f"building the catalog took {elapsed:.2f}s (target < 0.5s)"


def test_curation_script_regenerates_the_packaged_data_byte_for_byte(tmp_path: Path) -> None:
    source = DATA / "prices"
    assert source.is_dir(), f"the published prices are expected at {source}"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "curate_prices.py"),
            "--source",
            str(source),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    packaged = Path(str(package_data_dir()))
    names = sorted(path.name for path in packaged.iterdir() if path.suffix in (".csv", ".json"))
    assert names == sorted(path.name for path in tmp_path.iterdir())
    for name in names:
        assert (tmp_path / name).read_bytes() == (packaged / name).read_bytes(), name
