"""Hand-built pieces for the Protocol B tests: offers, pod CSVs and workloads."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

from scalar.domain.offers import Offer
from scalar.domain.tier import Tier
from scalar.sim.dynamic.workload import DynamicJob, Workload

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"


def offer(
    model: str,
    gpus: int,
    price_per_gpu_hour: str,
    *,
    vram: float,
    vcpu: float = 96.0,
    ram: float = 1024.0,
    provider: str = "aws",
    instance_type: str | None = None,
    spot: bool = False,
) -> Offer:
    return Offer(
        provider=provider,
        instance_type=instance_type or f"{gpus}x{model}",
        region="r1",
        price_per_hour=Decimal(price_per_gpu_hour) * gpus,
        gpu_model=model,
        gpu_count=float(gpus),
        gpu_memory_gb=vram,
        vcpu=vcpu,
        memory_gb=ram,
        spot=spot,
    )


def market_offers() -> list[Offer]:
    """A small market: T4, V100 16 GB, V100 32 GB, A10G, A100 40 GB, A100 80 GB."""
    return [
        offer("T4", 1, "0.30", vram=16.0, vcpu=8, ram=32),
        offer("V100", 4, "0.50", vram=16.0, vcpu=32, ram=244),
        offer("V100-32GB", 8, "0.90", vram=32.0),
        offer("A10G", 1, "1.00", vram=22.35, vcpu=16, ram=64),
        offer("A100", 8, "1.20", vram=40.0),
        offer("A100-80GB", 8, "1.60", vram=80.0),
    ]


def write_pods(path: Path, rows: Sequence[str]) -> Path:
    path.write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    return path


def job(
    job_id: str,
    *,
    arrival_s: float = 0.0,
    duration_s: float = 3600.0,
    gpu_count: int = 1,
    fraction: float = 1.0,
    cpu: float = 4.0,
    ram: float = 16.0,
    models: tuple[str, ...] = ("T4",),
    vram: float = 16.0,
    tier: Tier = Tier.FAST,
) -> DynamicJob:
    share = fraction < 1.0
    return DynamicJob(
        job_id=job_id,
        tier=tier,
        qos="LS" if tier is Tier.FAST else "BE",
        arrival_s=arrival_s,
        duration_s=duration_s,
        gpu_count=gpu_count,
        gpu_fraction=fraction,
        share_gpu=share,
        vram_per_gpu_gb=round(vram * fraction, 3) if share else vram,
        cpu_cores=cpu,
        ram_gb=ram,
        models=models,
        trace_models="any",
    )


def workload(jobs: Sequence[DynamicJob], horizon_s: float | None = None) -> Workload:
    end = horizon_s if horizon_s is not None else max(j.arrival_s + j.duration_s for j in jobs)
    tiers: dict[str, int] = {}
    for j in jobs:
        tiers[j.tier.value] = tiers.get(j.tier.value, 0) + 1
    return Workload(
        source="hand-built",
        jobs=tuple(sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))),
        start_s=0,
        end_s=int(end),
        compress=1.0,
        pods_read=len(jobs),
        skipped={},
        clipped=0,
        mapping=(),
        tiers=tiers,
    )
