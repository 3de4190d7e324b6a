"""Read the packaged price files into ``PriceRow`` values (one per published row).

Values are parsed exactly (prices as ``Decimal``); nothing is judged here except what makes a row
unreadable (an unknown GPU model, a non-GPU accelerator, a malformed number), which is flagged and
dropped. GCP's two files are joined in ``gcp.py``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from decimal import Decimal, InvalidOperation
from importlib.resources.abc import Traversable
from pathlib import Path

from scalar.providers.catalog.corrections import GPU_MEMORY_GB_BY_INSTANCE
from scalar.providers.catalog.gpus import GPU_MEMORY_GB, canonical_gpu_model, is_non_gpu_accelerator
from scalar.providers.catalog.records import DROPPED, CatalogAnomaly, PriceRow

DataDir = Path | Traversable
# (source, raw row, canonical model) -> PriceRow
RowBuilder = Callable[[str, dict[str, str], str], PriceRow]

AWS_FILE = "aws_vms.csv"
AZURE_FILE = "azure_vms.csv"
GCP_ACCELERATOR_FILE = "gcp_accelerators.csv"
GCP_HOST_FILE = "gcp_host_vms.csv"
PRIME_FILE = "prime_vms.csv"
RUNPOD_FILE = "runpod_vms.csv"
SPOT_ADVISOR_FILE = "aws_spot_advisor.csv"

# provider -> the packaged files its rows come from
PROVIDER_FILES: dict[str, tuple[str, ...]] = {
    "aws": (AWS_FILE,),
    "azure": (AZURE_FILE,),
    "gcp": (GCP_ACCELERATOR_FILE, GCP_HOST_FILE),
    "prime": (PRIME_FILE,),
    "runpod": (RUNPOD_FILE,),
}

MIB_PER_GIB = 1024


class MalformedRowError(ValueError):
    """A field of a packaged row cannot be read (the message names the column and the value)."""


def read_table(data_dir: DataDir, name: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Yield ``(source, row)`` for each data row of a packaged CSV; ``source`` is ``file:line``."""
    text = (data_dir / name).read_text(encoding="utf-8")
    for index, row in enumerate(csv.DictReader(io.StringIO(text))):
        yield f"{name}:{index + 2}", {key: (value or "").strip() for key, value in row.items()}


def money(row: dict[str, str], column: str) -> Decimal | None:
    """An exact price, or ``None`` when the cell is empty (not published)."""
    text = row.get(column, "")
    if text == "":
        return None
    try:
        value = Decimal(text)
    except InvalidOperation as err:
        raise MalformedRowError(f"{column}={text!r} is not a number") from err
    if not value.is_finite():
        raise MalformedRowError(f"{column}={text!r} is not a finite number")
    return value


def number(row: dict[str, str], column: str, default: float | None = None) -> float:
    text = row.get(column, "")
    if text == "":
        if default is not None:
            return default
        raise MalformedRowError(f"{column} is empty")
    try:
        return float(Decimal(text))
    except InvalidOperation as err:
        raise MalformedRowError(f"{column}={text!r} is not a number") from err


def vram_gb_from_mib(row: dict[str, str], column: str = "GpuMemoryMiBPerGpu") -> float:
    return number(row, column) / MIB_PER_GIB


def _unreadable(provider: str, source: str, row: dict[str, str], code: str, message: str) -> CatalogAnomaly:
    return CatalogAnomaly(
        provider=provider,
        instance_type=row.get("InstanceType") or row.get("AcceleratorName", "?"),
        region=row.get("Region", ""),
        availability_zone=row.get("AvailabilityZone") or None,
        code=code,
        message=message,
        action=DROPPED,
        source=source,
    )


def resolve_model(
    provider: str, source: str, row: dict[str, str]
) -> tuple[str | None, CatalogAnomaly | None]:
    """The canonical model of a row's accelerator, or the flag explaining why the row is dropped."""
    name = row.get("AcceleratorName", "")
    model = canonical_gpu_model(name)
    if model is not None:
        return model, None
    if is_non_gpu_accelerator(name):
        return None, _unreadable(
            provider, source, row, "not_a_gpu", f"accelerator {name!r} is not a GPU; Scalar offers GPUs only"
        )
    return None, _unreadable(
        provider,
        source,
        row,
        "unknown_gpu_model",
        f"accelerator {name!r} has no canonical GPU model; add it to the GPU registry (scalar/domain/gpus.py) to offer it",
    )


def _read_rows(
    data_dir: DataDir, name: str, provider: str, build: RowBuilder
) -> tuple[list[PriceRow], list[CatalogAnomaly]]:
    rows: list[PriceRow] = []
    anomalies: list[CatalogAnomaly] = []
    for source, raw in read_table(data_dir, name):
        model, problem = resolve_model(provider, source, raw)
        if problem is not None:
            anomalies.append(problem)
            continue
        assert model is not None
        try:
            rows.append(build(source, raw, model))
        except MalformedRowError as err:
            anomalies.append(_unreadable(provider, source, raw, "malformed_row", str(err)))
    return rows, anomalies


def _aws(source: str, raw: dict[str, str], model: str) -> PriceRow:
    return PriceRow(
        provider="aws",
        instance_type=raw["InstanceType"],
        region=raw["Region"],
        availability_zone=raw["AvailabilityZone"] or None,
        gpu_model=model,
        gpu_count=number(raw, "AcceleratorCount"),
        gpu_memory_gb=vram_gb_from_mib(raw),
        vcpu=number(raw, "vCPUs"),
        memory_gb=number(raw, "MemoryGiB"),
        price=money(raw, "Price"),
        spot_price=money(raw, "SpotPrice"),
        source=source,
        upstream_gpu_name=raw["AcceleratorName"],
    )


def _azure(source: str, raw: dict[str, str], model: str) -> PriceRow:
    instance_type = raw["InstanceType"]
    vram = GPU_MEMORY_GB_BY_INSTANCE.get(("azure", instance_type), GPU_MEMORY_GB[model])
    return PriceRow(
        provider="azure",
        instance_type=instance_type,
        region=raw["Region"],
        availability_zone=None,
        gpu_model=model,
        gpu_count=number(raw, "AcceleratorCount"),
        gpu_memory_gb=vram,
        vcpu=number(raw, "vCPUs"),
        memory_gb=number(raw, "MemoryGiB"),
        price=money(raw, "Price"),
        spot_price=money(raw, "SpotPrice"),
        source=source,
        upstream_gpu_name=raw["AcceleratorName"],
    )


def _prime(source: str, raw: dict[str, str], model: str) -> PriceRow:
    instance_type = raw["InstanceType"]
    return PriceRow(
        provider="prime",
        instance_type=instance_type,
        region=raw["Region"],
        availability_zone=raw["AvailabilityZone"] or None,
        gpu_model=model,
        gpu_count=number(raw, "AcceleratorCount"),
        gpu_memory_gb=vram_gb_from_mib(raw),
        vcpu=number(raw, "vCPUs"),
        memory_gb=number(raw, "MemoryGiB"),
        price=money(raw, "Price"),
        spot_price=money(raw, "SpotPrice"),
        source=source,
        upstream_gpu_name=raw["AcceleratorName"],
        spot_listing=instance_type.upper().endswith("__SPOT"),
    )


def _runpod(source: str, raw: dict[str, str], model: str) -> PriceRow:
    return PriceRow(
        provider="runpod",
        instance_type=raw["InstanceType"],
        region=raw["Region"],
        availability_zone=raw["AvailabilityZone"] or None,
        gpu_model=model,
        gpu_count=number(raw, "AcceleratorCount"),
        gpu_memory_gb=GPU_MEMORY_GB[model],
        vcpu=number(raw, "vCPUs"),
        memory_gb=number(raw, "MemoryGiB"),
        price=money(raw, "Price"),
        spot_price=money(raw, "SpotPrice"),
        source=source,
        upstream_gpu_name=raw["AcceleratorName"],
    )


def read_aws(data_dir: DataDir) -> tuple[list[PriceRow], list[CatalogAnomaly]]:
    return _read_rows(data_dir, AWS_FILE, "aws", _aws)


def read_azure(data_dir: DataDir) -> tuple[list[PriceRow], list[CatalogAnomaly]]:
    return _read_rows(data_dir, AZURE_FILE, "azure", _azure)


def read_prime(data_dir: DataDir) -> tuple[list[PriceRow], list[CatalogAnomaly]]:
    return _read_rows(data_dir, PRIME_FILE, "prime", _prime)


def read_runpod(data_dir: DataDir) -> tuple[list[PriceRow], list[CatalogAnomaly]]:
    return _read_rows(data_dir, RUNPOD_FILE, "runpod", _runpod)


def read_spot_advisor(data_dir: DataDir) -> dict[tuple[str, str], int]:
    """(region, instance type) -> AWS Spot Advisor interruption range index (Linux)."""
    advice: dict[tuple[str, str], int] = {}
    for _source, raw in read_table(data_dir, SPOT_ADVISOR_FILE):
        advice[(raw["region"], raw["instance_type"])] = int(raw["interruption_range_index"])
    return advice
