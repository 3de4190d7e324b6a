"""Files of ``scalar quote``: seed 002's ``SpotPrice`` list and ``WorkloadRequirements`` (camelCase), and
the ``PlacementDecision`` it answers with. See docs/formats/quote.md.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator

from scalar.domain.arbitrage import (
    FilterCount,
    Placement,
    PlacementDecision,
    WorkloadRequirements,
)
from scalar.domain.gpus import canonical_gpu_model
from scalar.domain.money import round_micros, to_decimal, to_json_number
from scalar.domain.offers import Offer
from scalar.domain.timefmt import parse_time
from scalar.wire.market import JsonNumber
from scalar.wire.orderbook import ReasonOut

NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Rate = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1, max_length=200)]

# Finite bounds on a workload's requirements: far above any real machine, small enough that no
# accepted value overflows a column, a Decimal or a comparison. The same as a job's (scalar.wire.jobs).
MAX_REQ_CPU = 100_000.0
MAX_REQ_MEMORY_GB = 1_000_000.0
MAX_REQ_GPUS = 100_000.0
MAX_REQ_PRICE_PER_HOUR = 1_000_000.0
MAX_REQ_BANDWIDTH_GBPS = 100_000.0
MAX_REQ_REGIONS = 64
ShortName = Annotated[str, Field(min_length=1, max_length=64)]

# Milliseconds since the epoch (the seed's ``new Date(...).getTime()``) beyond this are implausible.
_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


def _timestamp(value: int | float | str) -> datetime:
    if isinstance(value, str):
        parsed = parse_time(value)
        if parsed is None:
            raise ValueError("must be milliseconds since the epoch or an ISO 8601 time")
        return parsed
    if not (0 <= value <= _MAX_MS):
        raise ValueError("must be milliseconds since the epoch (0 to year 9999)")
    return datetime.fromtimestamp(value / 1000, tz=UTC)


class SpotPriceIn(BaseModel):
    """One of seed 002's ``SpotPrice`` records. Unknown fields are ignored (price feeds carry extras)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    provider: Name
    region: Name
    availabilityZone: str | None = None
    instanceType: Name
    pricePerHour: NonNegative
    timestamp: int | float | str | None = None
    vcpu: NonNegative
    memoryGB: NonNegative
    gpuCount: NonNegative = 0
    gpuType: str | None = None
    gpuMemoryGB: NonNegative = 0
    interruptionRate: Rate | None = None
    spot: bool = True

    @field_validator("timestamp")
    @classmethod
    def _valid_timestamp(cls, value: int | float | str | None) -> int | float | str | None:
        if value is not None:
            _timestamp(value)
        return value

    def to_offer(self) -> Offer:
        return Offer(
            provider=self.provider.strip().lower(),
            instance_type=self.instanceType,
            region=self.region,
            price_per_hour=to_decimal(self.pricePerHour),
            gpu_model=canonical_gpu_model(self.gpuType) if self.gpuType and self.gpuType.strip() else None,
            gpu_count=self.gpuCount,
            gpu_memory_gb=self.gpuMemoryGB,
            vcpu=self.vcpu,
            memory_gb=self.memoryGB,
            availability_zone=self.availabilityZone or None,
            spot=self.spot,
            interruption_rate=self.interruptionRate,
            observed_at=None if self.timestamp is None else _timestamp(self.timestamp),
        )


class PricesFile(RootModel[list[SpotPriceIn]]):
    """PRICES.json: a list of ``SpotPrice`` records."""

    def to_offers(self) -> list[Offer]:
        return [p.to_offer() for p in self.root]


class RequirementsFile(BaseModel):
    """REQ.json: seed 002's ``WorkloadRequirements``. Unknown fields are errors (a typo must not pass)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    minCPU: float = Field(default=0, ge=0, le=MAX_REQ_CPU, allow_inf_nan=False)
    minMemoryGB: float = Field(default=0, ge=0, le=MAX_REQ_MEMORY_GB, allow_inf_nan=False)
    gpuCount: float | None = Field(default=None, ge=0, le=MAX_REQ_GPUS, allow_inf_nan=False)
    gpuType: ShortName | None = None
    preferredRegions: list[ShortName] | None = Field(default=None, max_length=MAX_REQ_REGIONS)
    maxPricePerHour: float | None = Field(default=None, ge=0, le=MAX_REQ_PRICE_PER_HOUR, allow_inf_nan=False)
    maxInterruptionRate: Rate | None = None
    networkBandwidthGbps: float | None = Field(
        default=None, ge=0, le=MAX_REQ_BANDWIDTH_GBPS, allow_inf_nan=False
    )

    @field_validator("gpuType")
    @classmethod
    def _gpu_type_named(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must name a GPU model; omit gpuType to accept any GPU")
        return value

    def to_requirements(self) -> WorkloadRequirements:
        return WorkloadRequirements(
            min_cpu=self.minCPU,
            min_memory_gb=self.minMemoryGB,
            gpu_count=self.gpuCount,
            gpu_type=self.gpuType,
            preferred_regions=tuple(self.preferredRegions or ()),
            max_price_per_hour=None if self.maxPricePerHour is None else to_decimal(self.maxPricePerHour),
            max_interruption_rate=self.maxInterruptionRate,
            network_bandwidth_gbps=self.networkBandwidthGbps,
        )


def _excluded_when_none(value: Any) -> bool:
    """``pricePerGpuHour`` is left out of the JSON for an offer without GPUs (it has always been)."""
    return value is None


class PlacementOut(BaseModel):
    """An offer placed: the seed's ``PlacementDecision`` fields, plus ``pricePerGpuHour`` where the offer
    has GPUs. Prices are JSON numbers rounded to micro-dollars (an integral price is an int)."""

    provider: str
    region: str
    availabilityZone: str | None
    instanceType: str
    pricePerHour: JsonNumber
    score: JsonNumber = Field(description="rounded to 4 places")
    pricePerGpuHour: JsonNumber | None = Field(
        default=None, exclude_if=_excluded_when_none, description="absent for an offer without GPUs"
    )


class FilterCountOut(BaseModel):
    filter: str = Field(description="the requirement's name")
    rule: str
    removed: int = Field(description="how many offers it removed")


class QuoteOut(PlacementOut):
    """``scalar quote --json``: the pick, its alternatives, the scorer, the filter counts and the reasons."""

    alternatives: list[PlacementOut]
    scorer: str
    considered: int = Field(description="how many offers were considered")
    removedBy: list[FilterCountOut]
    regionFallback: bool
    reasons: list[ReasonOut]


class SourcedPlacementOut(PlacementOut):
    """A placement with where its offer came from: ``builtin`` or ``live``, null for an offer not listed."""

    source: str | None
    stale: bool | None
    ageSeconds: JsonNumber | None


class SourcedQuoteOut(QuoteOut):
    """What ``POST /quote`` answers: ``scalar quote --json``'s decision with ``source``, ``stale`` and
    ``ageSeconds`` on the pick and on each alternative."""

    alternatives: list[SourcedPlacementOut]  # type: ignore[assignment]
    source: str | None
    stale: bool | None
    ageSeconds: JsonNumber | None


def _score(value: float) -> float:
    return round(value, 4)


def placement_out(placement: Placement) -> PlacementOut:
    """An alternative: the decision's fields, plus ``pricePerGpuHour`` where the offer has GPUs."""
    per_gpu = placement.price_per_gpu_hour
    return PlacementOut(
        provider=placement.provider,
        region=placement.region,
        availabilityZone=placement.availability_zone,
        instanceType=placement.instance_type,
        pricePerHour=to_json_number(placement.price_per_hour),
        score=_score(placement.score),
        pricePerGpuHour=None if per_gpu is None else to_json_number(round_micros(per_gpu)),
    )


def _filter_out(f: FilterCount) -> FilterCountOut:
    return FilterCountOut(filter=f.name, rule=f.rule, removed=f.removed)


def decision_out(decision: PlacementDecision) -> QuoteOut:
    """The seed's ``PlacementDecision`` in camelCase, plus scorer, filter counts and reasons."""
    pick = placement_out(Placement(decision.offer, decision.score))
    return QuoteOut(
        **dict(pick),
        alternatives=[placement_out(a) for a in decision.alternatives],
        scorer=decision.scorer,
        considered=decision.considered,
        removedBy=[_filter_out(f) for f in decision.removed_by],
        regionFallback=decision.region_fallback,
        reasons=[ReasonOut.model_validate(r.to_dict()) for r in decision.reasons],
    )
