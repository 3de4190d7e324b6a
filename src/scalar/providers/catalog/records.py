"""The values the catalog is made of: source rows, instance specs and anomaly flags."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from scalar.domain.offers import Offer

# What the loader did about an anomaly.
KEPT = "kept"  # the offer stays and is trusted: the flag is informational
UNTRUSTED = "untrusted"  # the offer stays, but cheapest lookups and reference prices leave it out
CORRECTED = "corrected"  # a value was replaced from the known-corrections table
DROPPED = "dropped"  # no offer was made from this price
ACTIONS = (KEPT, UNTRUSTED, CORRECTED, DROPPED)


@dataclass(frozen=True, slots=True)
class CatalogAnomaly:
    """One flag on the published data: what is odd, where, and what the loader did about it.

    ``spot`` says which price of the row the flag is about (``True`` spot, ``False`` on-demand, ``None``
    the row as a whole); ``source`` names the packaged file and line (``aws_vms.csv:42``).
    """

    provider: str
    instance_type: str
    region: str
    code: str
    message: str
    availability_zone: str | None = None
    spot: bool | None = None
    action: str = KEPT
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "instance_type": self.instance_type,
            "region": self.region,
            "availability_zone": self.availability_zone,
            "spot": self.spot,
            "code": self.code,
            "action": self.action,
            "message": self.message,
            "source": self.source,
        }

    def concerns(self, offer_key: str) -> bool:
        """True if this flag is about the offer with ``offer_key`` (see ``Offer.key``)."""
        return offer_key in self.offer_keys()

    def offer_keys(self) -> tuple[str, ...]:
        zone = self.availability_zone or "-"
        base = f"{self.provider}/{self.region}/{zone}/{self.instance_type}"
        if self.spot is None:
            return (f"{base}/ondemand", f"{base}/spot")
        return (f"{base}/{'spot' if self.spot else 'ondemand'}",)


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    """The hardware of one instance type, as the catalog knows it (VRAM per GPU, RAM in GB)."""

    provider: str
    instance_type: str
    gpu_model: str | None
    gpu_count: float
    gpu_memory_gb: float
    vcpu: float
    memory_gb: float

    def offer(
        self,
        region: str,
        price_per_hour: Decimal,
        now: datetime,
        *,
        spot: bool,
        interruption_rate: float | None,
        availability_zone: str | None = None,
    ) -> Offer:
        """An offer of this instance type at a price a cloud's price API published."""
        return Offer(
            provider=self.provider,
            instance_type=self.instance_type,
            region=region,
            price_per_hour=price_per_hour,
            gpu_model=self.gpu_model,
            gpu_count=self.gpu_count,
            gpu_memory_gb=self.gpu_memory_gb,
            vcpu=self.vcpu,
            memory_gb=self.memory_gb,
            availability_zone=availability_zone,
            spot=spot,
            interruption_rate=interruption_rate,
            observed_at=now,
        )


@dataclass(frozen=True, slots=True)
class PriceRow:
    """One published price row, normalized but not yet judged.

    ``price`` / ``spot_price`` are USD per instance-hour as published (``None``: not published).
    ``spot_listing`` marks rows whose instance type is itself a spot listing (Prime's ``__SPOT``).
    ``host_included`` is False for GCP accelerator-only prices (the host VM is billed on top).
    ``gpu_part_price`` / ``gpu_part_spot_price`` are the GPU SKUs' share of a GCP VM's price (``None``:
    the price is not split); the outlier rule compares GPU prices on that share.
    """

    provider: str
    instance_type: str
    region: str
    availability_zone: str | None
    gpu_model: str
    gpu_count: float
    gpu_memory_gb: float
    vcpu: float
    memory_gb: float
    price: Decimal | None
    spot_price: Decimal | None
    source: str
    upstream_gpu_name: str = ""
    spot_listing: bool = False
    host_included: bool = True
    gpu_part_price: Decimal | None = None
    gpu_part_spot_price: Decimal | None = None

    def flag(
        self, code: str, message: str, *, action: str = KEPT, spot: bool | None = None
    ) -> CatalogAnomaly:
        return CatalogAnomaly(
            provider=self.provider,
            instance_type=self.instance_type,
            region=self.region,
            code=code,
            message=message,
            availability_zone=self.availability_zone,
            spot=spot,
            action=action,
            source=self.source,
        )
