"""Load the packaged catalog: rows -> judged rows -> offers and flags, parsed once per process."""

from __future__ import annotations

import functools
from decimal import Decimal
from importlib.resources import files

from scalar.domain.offers import Offer
from scalar.providers.catalog.catalog import Catalog
from scalar.providers.catalog.gcp import read_gcp
from scalar.providers.catalog.interruptions import interruption_rate
from scalar.providers.catalog.outliers import PricePoint, flag_price_outliers
from scalar.providers.catalog.records import DROPPED, KEPT, CatalogAnomaly, InstanceSpec, PriceRow
from scalar.providers.catalog.rules import judge_row
from scalar.providers.catalog.sources import (
    DataDir,
    read_aws,
    read_azure,
    read_prime,
    read_runpod,
    read_spot_advisor,
)

READERS = (read_aws, read_azure, read_gcp, read_prime, read_runpod)


def package_data_dir() -> DataDir:
    """Where the curated price files ship inside the package."""
    return files("scalar.providers.catalog") / "data"


def read_rows(data_dir: DataDir) -> tuple[list[PriceRow], list[CatalogAnomaly]]:
    """Every provider's rows (GCP joined), with the flags of rows that could not be read."""
    rows: list[PriceRow] = []
    anomalies: list[CatalogAnomaly] = []
    for reader in READERS:
        provider_rows, provider_anomalies = reader(data_dir)
        rows.extend(provider_rows)
        anomalies.extend(provider_anomalies)
    return rows, anomalies


def make_offer(row: PriceRow, spot: bool, rate: float | None) -> Offer:
    price = row.spot_price if spot else row.price
    assert price is not None
    return Offer(
        provider=row.provider,
        instance_type=row.instance_type,
        region=row.region,
        price_per_hour=price,
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        gpu_memory_gb=row.gpu_memory_gb,
        vcpu=row.vcpu,
        memory_gb=row.memory_gb,
        availability_zone=row.availability_zone,
        spot=spot,
        interruption_rate=rate if spot else 0.0,
    )


def _price_point(row: PriceRow, offer: Offer) -> PricePoint:
    part = row.gpu_part_spot_price if offer.spot else row.gpu_part_price
    count = Decimal(str(offer.gpu_count))
    if part is not None:
        return PricePoint(offer, part / count, "GPU SKU price, host excluded", row.source)
    return PricePoint(offer, offer.price_per_hour / count, "instance price", row.source)


def _spec(row: PriceRow) -> InstanceSpec:
    return InstanceSpec(
        provider=row.provider,
        instance_type=row.instance_type,
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        gpu_memory_gb=row.gpu_memory_gb,
        vcpu=row.vcpu,
        memory_gb=row.memory_gb,
    )


def _record_spec(specs: dict[tuple[str, str], InstanceSpec], row: PriceRow) -> CatalogAnomaly | None:
    spec = _spec(row)
    key = (row.provider, row.instance_type)
    known = specs.setdefault(key, spec)
    if known == spec:
        return None
    return row.flag(
        "spec_conflict",
        f"{row.instance_type} is listed with {spec.gpu_count:g} x {spec.gpu_model}, {spec.vcpu:g} vCPUs, "
        f"{spec.memory_gb:g} GB here and {known.gpu_count:g} x {known.gpu_model}, {known.vcpu:g} vCPUs, "
        f"{known.memory_gb:g} GB in an earlier row; the spec lookup keeps the earlier one",
        action=KEPT,
    )


def build_catalog(data_dir: DataDir) -> Catalog:
    """Build a catalog from the price files in ``data_dir`` (deterministic: same files, same catalog)."""
    rows, anomalies = read_rows(data_dir)
    advice = read_spot_advisor(data_dir)
    offers: list[Offer] = []
    untrusted: set[str] = set()
    points: list[PricePoint] = []
    specs: dict[tuple[str, str], InstanceSpec] = {}
    sources: dict[str, str] = {}
    for row in rows:
        verdict = judge_row(row)
        anomalies.extend(verdict.anomalies)
        judged = verdict.row
        conflict = _record_spec(specs, judged)
        if conflict is not None:
            anomalies.append(conflict)
        rate = None
        if judged.provider == "aws":
            rate = interruption_rate(advice.get((judged.region, judged.instance_type)))
        choices = (
            (False, verdict.on_demand, verdict.on_demand_trusted),
            (True, verdict.spot, verdict.spot_trusted),
        )
        for spot, make, trusted in choices:
            if not make:
                continue
            offer = make_offer(judged, spot, rate)
            if offer.key in sources:
                anomalies.append(
                    judged.flag(
                        "duplicate_offer",
                        f"{offer.key} is already listed by {sources[offer.key]}; this row's price is not offered",
                        action=DROPPED,
                        spot=spot,
                    )
                )
                continue
            sources[offer.key] = judged.source
            offers.append(offer)
            if not trusted:
                untrusted.add(offer.key)
            elif offer.gpu_count > 0:
                points.append(_price_point(judged, offer))
    outlier_flags = flag_price_outliers(points)
    anomalies.extend(outlier_flags)
    untrusted.update(key for flag in outlier_flags for key in flag.offer_keys())
    return Catalog(
        offers=tuple(offers),
        anomalies=tuple(anomalies),
        untrusted_keys=frozenset(untrusted),
        specs=specs,
        sources=sources,
    )


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The packaged catalog, parsed once per process."""
    return build_catalog(package_data_dir())


def reference_price_per_gpu_hour(gpu_model: str, spot: bool, *, min_gpu_count: float = 0.0) -> Decimal:
    """The packaged catalog's reference $/GPU-h for ``gpu_model`` (see ``Catalog.reference_price_per_gpu_hour``)."""
    return load_catalog().reference_price_per_gpu_hour(gpu_model, spot, min_gpu_count=min_gpu_count)
