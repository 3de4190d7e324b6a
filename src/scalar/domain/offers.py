"""What a market or cloud sells: one offer shape at one price, normalized across providers.

Seed 002's ``SpotPrice`` and seed 000's orderbook asks both reduce to this. GPU models use canonical
names (SkyPilot's accelerator names, as in the published price catalogs: ``H100``, ``H200``,
``A100-80GB``, ``A100``, ``L40S``, ``L4``, ``A10G``, ``T4``, ``V100``, ``RTX4090``, ``RTXA6000``, ``A40``,
``B200``...).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

# Providers Scalar knows by name. Offers from others are allowed; these get the seeds' size rules.
SFCOMPUTE = "sfcompute"
PRIME = "prime"
RUNPOD = "runpod"
AWS = "aws"
AZURE = "azure"
GCP = "gcp"
KNOWN_PROVIDERS = (SFCOMPUTE, PRIME, RUNPOD, AWS, AZURE, GCP)


@dataclass(frozen=True, slots=True)
class Offer:
    """One purchasable shape at one price.

    ``price_per_hour`` is USD per *instance*-hour (the whole box), exact. ``gpu_count`` may be fractional
    for shared GPUs (a published catalog lists 0.25 GPUs for some shapes) and is 0 for CPU-only offers.
    ``interruption_rate`` is the probability of interruption as the provider publishes it (AWS Spot Advisor
    buckets are per month); ``None`` means not published.
    """

    provider: str
    instance_type: str
    region: str
    price_per_hour: Decimal
    gpu_model: str | None = None
    gpu_count: float = 0.0
    gpu_memory_gb: float = 0.0
    vcpu: float = 0.0
    memory_gb: float = 0.0
    availability_zone: str | None = None
    spot: bool = False
    interruption_rate: float | None = None
    observed_at: datetime | None = None
    cuda_version: str | None = None  # the CUDA version its nodes come with ("12.8"), None: not published

    @property
    def price_per_gpu_hour(self) -> Decimal | None:
        """USD per GPU-hour, or ``None`` for a CPU-only offer."""
        if self.gpu_count <= 0:
            return None
        return self.price_per_hour / Decimal(str(self.gpu_count))

    @property
    def key(self) -> str:
        """A stable identity of the shape (not the price): provider/region/zone/instance/spot."""
        zone = self.availability_zone or "-"
        kind = "spot" if self.spot else "ondemand"
        return f"{self.provider}/{self.region}/{zone}/{self.instance_type}/{kind}"
