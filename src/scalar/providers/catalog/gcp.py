"""GCP: a GPU VM's price is its GPU SKUs plus its host VM, so the two GCP files are joined here.

The accelerator file prices the GPUs alone (``AcceleratorName``, ``AcceleratorCount``, per zone); the
host file prices the accelerator-optimized machine types without their GPUs. A machine type has a
fixed GPU model and count (``a2-highgpu-8g`` = 8 x A100 40GB), so each host row is joined, in the same
zone, with the accelerator row of its model and count: instance price = GPU row + host row (on-demand
and spot alike; a spot price needs both parts). L4, T4 and V100 attach to general-purpose hosts (n1,
g2) the files do not price: they stay accelerator-only offers (``n1+T4x1``), flagged as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import TypeVar

from scalar.providers.catalog.records import DROPPED, KEPT, UNTRUSTED, CatalogAnomaly, PriceRow
from scalar.providers.catalog.sources import (
    GCP_ACCELERATOR_FILE,
    GCP_HOST_FILE,
    DataDir,
    MalformedRowError,
    money,
    number,
    read_table,
    resolve_model,
    vram_gb_from_mib,
)

PROVIDER = "gcp"
_T = TypeVar("_T")

# machine type -> (upstream accelerator name, GPUs per VM). GCP's accelerator-optimized shapes.
HOST_ACCELERATORS: MappingProxyType[str, tuple[str, int]] = MappingProxyType(
    {
        "a2-highgpu-1g": ("A100", 1),
        "a2-highgpu-2g": ("A100", 2),
        "a2-highgpu-4g": ("A100", 4),
        "a2-highgpu-8g": ("A100", 8),
        "a2-megagpu-16g": ("A100", 16),
        "a2-ultragpu-1g": ("A100-80GB", 1),
        "a2-ultragpu-2g": ("A100-80GB", 2),
        "a2-ultragpu-4g": ("A100-80GB", 4),
        "a2-ultragpu-8g": ("A100-80GB", 8),
        "a3-highgpu-1g": ("H100", 1),
        "a3-highgpu-2g": ("H100", 2),
        "a3-highgpu-4g": ("H100", 4),
        "a3-highgpu-8g": ("H100", 8),
        "a3-megagpu-8g": ("H100-MEGA", 8),
        "a3-ultragpu-8g": ("H200", 8),
        "a4-highgpu-8g": ("B200", 8),
    }
)

_MACHINE_BY_SHAPE = {
    (upstream, float(count)): machine for machine, (upstream, count) in HOST_ACCELERATORS.items()
}

# GPUs that attach to general-purpose hosts not priced in the files -> that host family.
ATTACHED_GPU_HOSTS: MappingProxyType[str, str] = MappingProxyType({"T4": "n1", "V100": "n1", "L4": "g2"})


@dataclass(frozen=True, slots=True)
class _Gpu:
    source: str
    upstream: str
    model: str
    count: float
    vram_gb: float
    region: str
    zone: str
    price: Decimal | None
    spot: Decimal | None


@dataclass(frozen=True, slots=True)
class _Host:
    source: str
    instance_type: str
    vcpu: float
    memory_gb: float
    region: str
    zone: str
    price: Decimal | None
    spot: Decimal | None


def attached_instance_type(model: str, count: float) -> str:
    """The name given to an accelerator-only offer: ``n1+T4x1``."""
    return f"{ATTACHED_GPU_HOSTS[model]}+{model}x{count:g}"


def _flag(
    instance_type: str,
    region: str,
    zone: str,
    source: str,
    code: str,
    message: str,
    action: str,
    spot: bool | None = None,
) -> CatalogAnomaly:
    return CatalogAnomaly(
        provider=PROVIDER,
        instance_type=instance_type,
        region=region,
        availability_zone=zone or None,
        code=code,
        message=message,
        action=action,
        spot=spot,
        source=source,
    )


def _read(
    data_dir: DataDir,
    name: str,
    name_column: str,
    build: Callable[[str, dict[str, str]], _T | CatalogAnomaly],
) -> tuple[list[_T], list[CatalogAnomaly]]:
    """Each row of a packaged GCP table built, or the anomaly that drops it (a malformed row's included)."""
    built: list[_T] = []
    anomalies: list[CatalogAnomaly] = []
    for source, raw in read_table(data_dir, name):
        try:
            made = build(source, raw)
        except MalformedRowError as err:
            made = _flag(
                raw[name_column],
                raw["Region"],
                raw["AvailabilityZone"],
                source,
                "malformed_row",
                str(err),
                DROPPED,
            )
        if isinstance(made, CatalogAnomaly):
            anomalies.append(made)
        else:
            built.append(made)
    return built, anomalies


def _gpu(source: str, raw: dict[str, str]) -> _Gpu | CatalogAnomaly:
    model, problem = resolve_model(PROVIDER, source, raw)
    if problem is not None:
        return problem
    assert model is not None
    return _Gpu(
        source=source,
        upstream=raw["AcceleratorName"],
        model=model,
        count=number(raw, "AcceleratorCount"),
        vram_gb=vram_gb_from_mib(raw),
        region=raw["Region"],
        zone=raw["AvailabilityZone"],
        price=money(raw, "Price"),
        spot=money(raw, "SpotPrice"),
    )


def _host(source: str, raw: dict[str, str]) -> _Host:
    return _Host(
        source=source,
        instance_type=raw["InstanceType"],
        vcpu=number(raw, "vCPUs"),
        memory_gb=number(raw, "MemoryGiB"),
        region=raw["Region"],
        zone=raw["AvailabilityZone"],
        price=money(raw, "Price"),
        spot=money(raw, "SpotPrice"),
    )


def _add(a: Decimal | None, b: Decimal | None) -> Decimal | None:
    return None if a is None or b is None else a + b


def _component_flags(host: _Host, gpu: _Gpu) -> list[CatalogAnomaly]:
    """Flags on the two parts of a joined VM; the joined prices are judged again by the general rules."""
    flags: list[CatalogAnomaly] = []
    where = (host.instance_type, host.region, host.zone)
    if host.price is not None and host.price == 0:
        flags.append(
            _flag(
                *where,
                host.source,
                "host_price_zero",
                f"host VM {host.instance_type} is published at {host.price}/h on-demand and {host.spot}/h "
                f"spot: the VM's whole price is its {gpu.count:g} x {gpu.upstream} GPU row "
                f"({gpu.price}/h, spot {gpu.spot}/h, {gpu.source}); kept",
                KEPT,
            )
        )
    for part, label in ((gpu, f"{gpu.count:g} x {gpu.upstream} GPU SKU"), (host, "host VM")):
        if part.price is not None and part.spot is not None and part.price > 0 and part.spot > part.price:
            flags.append(
                _flag(
                    *where,
                    part.source,
                    "component_spot_above_on_demand",
                    f"{label} spot {part.spot}/h is above its on-demand {part.price}/h; the joined VM's "
                    "prices are judged as a whole",
                    KEPT,
                    spot=True,
                )
            )
    return flags


def read_gcp(data_dir: DataDir) -> tuple[list[PriceRow], list[CatalogAnomaly]]:
    """Join the GCP accelerator and host files into one ``PriceRow`` per purchasable VM and zone."""
    gpus, anomalies = _read(data_dir, GCP_ACCELERATOR_FILE, "AcceleratorName", _gpu)
    hosts, host_anomalies = _read(data_dir, GCP_HOST_FILE, "InstanceType", _host)
    anomalies.extend(host_anomalies)
    by_key = {(gpu.upstream, gpu.count, gpu.zone): gpu for gpu in gpus}
    used: set[str] = set()
    rows: list[PriceRow] = []
    for host in hosts:
        shape = HOST_ACCELERATORS.get(host.instance_type)
        if shape is None:
            anomalies.append(
                _flag(
                    host.instance_type,
                    host.region,
                    host.zone,
                    host.source,
                    "gcp_unknown_host",
                    f"host VM {host.instance_type} has no known GPU shape; add it to catalog/gcp.py",
                    DROPPED,
                )
            )
            continue
        upstream, count = shape
        gpu = by_key.get((upstream, float(count), host.zone))
        if gpu is None:
            anomalies.append(
                _flag(
                    host.instance_type,
                    host.region,
                    host.zone,
                    host.source,
                    "gcp_no_gpu_price",
                    f"no {count} x {upstream} GPU price in zone {host.zone} to join with host {host.instance_type}",
                    DROPPED,
                )
            )
            continue
        used.add(gpu.source)
        anomalies.extend(_component_flags(host, gpu))
        rows.append(
            PriceRow(
                provider=PROVIDER,
                instance_type=host.instance_type,
                region=host.region,
                availability_zone=host.zone,
                gpu_model=gpu.model,
                gpu_count=gpu.count,
                gpu_memory_gb=gpu.vram_gb,
                vcpu=host.vcpu,
                memory_gb=host.memory_gb,
                price=_add(gpu.price, host.price),
                spot_price=_add(gpu.spot, host.spot),
                source=f"{gpu.source}+{host.source}",
                upstream_gpu_name=gpu.upstream,
                gpu_part_price=gpu.price,
                gpu_part_spot_price=gpu.spot,
            )
        )
    for gpu in gpus:
        if gpu.source in used:
            continue
        if gpu.model in ATTACHED_GPU_HOSTS:
            instance_type = attached_instance_type(gpu.model, gpu.count)
            row = PriceRow(
                provider=PROVIDER,
                instance_type=instance_type,
                region=gpu.region,
                availability_zone=gpu.zone,
                gpu_model=gpu.model,
                gpu_count=gpu.count,
                gpu_memory_gb=gpu.vram_gb,
                vcpu=0.0,
                memory_gb=0.0,
                price=gpu.price,
                spot_price=gpu.spot,
                source=gpu.source,
                upstream_gpu_name=gpu.upstream,
                host_included=False,
            )
            rows.append(row)
            anomalies.append(
                row.flag(
                    "gpu_only_price",
                    f"GCP prices {gpu.count:g} x {gpu.model} without its {ATTACHED_GPU_HOSTS[gpu.model]} host VM "
                    "(not in the catalog): the real VM costs more; offered, but left out of cheapest "
                    "lookups and reference prices",
                    action=UNTRUSTED,
                )
            )
            continue
        machine = _MACHINE_BY_SHAPE.get((gpu.upstream, gpu.count), f"{gpu.upstream}x{gpu.count:g}")
        anomalies.append(
            _flag(
                machine,
                gpu.region,
                gpu.zone,
                gpu.source,
                "gcp_no_host_price",
                f"{gpu.count:g} x {gpu.upstream} GPUs in {gpu.zone} have no host VM price to join with "
                "(the host file does not list that machine type there)",
                DROPPED,
            )
        )
    return rows, anomalies
