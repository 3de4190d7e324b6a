"""The built-in market's settings and the fixed facts it is built on (shapes, boot delays, hazards).

Everything here is data: the numbers the market draws from, each documented in
``docs/decisions/builtin-market.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalar.domain.errors import DomainError
from scalar.domain.offers import AWS, AZURE, GCP, KNOWN_PROVIDERS, PRIME, RUNPOD, SFCOMPUTE

HOURS_PER_MONTH = 730.0  # 365 * 24 / 12: the month the Spot Advisor's "per month" rates refer to
MAX_CONTRACT_S = 720 * 3600  # SFCompute-style contracts run from 1 hour to 1 month (30 days)
MIN_CONTRACT_S = 3600
# Every node the built-in market sells runs this driver, and so supports this CUDA version (the newest of
# seed 004's versions; driver 570.86 is NVIDIA's first with CUDA 12.8). Offers publish it and grants carry
# it, so a job or endpoint that lists cudaVersions is placed on them only when 12.8 is among its versions.
BUILTIN_CUDA_VERSION = "12.8"
BUILTIN_DRIVER_VERSION = "570.86"


class MarketConfigError(DomainError, ValueError):
    """The built-in market was configured with a value it cannot run with."""


@dataclass(frozen=True, slots=True)
class MarketConfig:
    """How the built-in market behaves.

    ``seed``: every random draw derives from it (with the thing drawn for: a node id, a book's hour).
    ``None`` means the seed stored in the market's database, or 0 for a new market.
    ``time_scale``: N > 1 runs the market N times faster: boot delays, contract lengths, preemption times
    and the book's hourly replenishment are divided by N (job timers are the caller's own numbers).
    ``boot_failure_rate``: the probability that a node fails its boot (FAILED instead of READY).
    ``unpublished_interruption_rate``: the monthly interruption probability of spot capacity whose
    provider publishes none (only the AWS Spot Advisor publishes rates).
    ``spot_price_drift``: spot prices move up to this fraction either way each market hour.
    ``shape_capacity_nodes``: how many live nodes one fixed-price shape (provider, instance type, region,
    spot) can have at once; ``None`` means unlimited.
    ``interruption_period_hours``: the period an interruption rate is the probability of at least one
    interruption in. The AWS Spot Advisor publishes its bands per month (730 h, the default); read that way a
    node lives a mean of 7,000 hours at 10% and a replay of days sees no interruption at all. Protocol B's
    simulator reads the same bands per hour (``1``), a modelling choice (docs/simulator-dynamic.md,
    "Preemptions").
    ``preemption_scale``: multiplies every spot node's hazard (0 turns interruptions off).
    """

    seed: int | None = None
    time_scale: float = 1.0
    boot_failure_rate: float = 0.0
    unpublished_interruption_rate: float = 0.10
    spot_price_drift: float = 0.05
    shape_capacity_nodes: int | None = 64
    interruption_period_hours: float = HOURS_PER_MONTH
    preemption_scale: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.time_scale, int | float) and math.isfinite(self.time_scale)) or (
            self.time_scale <= 0
        ):
            raise MarketConfigError(
                f"time_scale must be a positive number, got {self.time_scale!r}",
                "use 1 for real time, or N > 1 to run the market N times faster",
            )
        if not 0.0 <= self.boot_failure_rate <= 1.0:
            raise MarketConfigError(
                f"boot_failure_rate must be between 0 and 1, got {self.boot_failure_rate!r}",
                "give a probability, e.g. 0.05 for one boot in twenty failing",
            )
        if not 0.0 <= self.unpublished_interruption_rate < 1.0:
            raise MarketConfigError(
                f"unpublished_interruption_rate must be in [0, 1), got {self.unpublished_interruption_rate!r}",
                "give a monthly probability, e.g. 0.10",
            )
        if not 0.0 <= self.spot_price_drift < 1.0:
            raise MarketConfigError(
                f"spot_price_drift must be in [0, 1), got {self.spot_price_drift!r}",
                "give a fraction, e.g. 0.05 for +/-5%",
            )
        if not (math.isfinite(self.interruption_period_hours) and self.interruption_period_hours > 0):
            raise MarketConfigError(
                f"interruption_period_hours must be a positive number, got {self.interruption_period_hours!r}",
                "give the hours an interruption rate refers to: 730 for a monthly rate, 1 for an hourly one",
            )
        if not (math.isfinite(self.preemption_scale) and self.preemption_scale >= 0):
            raise MarketConfigError(
                f"preemption_scale must be a number >= 0, got {self.preemption_scale!r}",
                "use 1 for the published hazards, 0 to turn interruptions off, 3 for three times as many",
            )
        if self.shape_capacity_nodes is not None and self.shape_capacity_nodes < 1:
            raise MarketConfigError(
                f"shape_capacity_nodes must be at least 1 (or None), got {self.shape_capacity_nodes!r}",
                "leave it unset for unlimited capacity",
            )


@dataclass(frozen=True, slots=True)
class BookShape:
    """An SFCompute-style instance type: whole 8-GPU nodes sold on an orderbook.

    ``ticker`` is SFCompute's own name for the closest instance type; CPU and RAM are an HGX board's usual
    host (as AWS p5/p5e.48xlarge: 192 vCPUs, 2 TiB).
    """

    instance_type: str
    gpu_model: str
    ticker: str
    gpus_per_node: int = 8
    vram_per_gpu_gb: float = 80.0
    cpu_per_node: float = 192.0
    ram_per_node_gb: float = 2048.0
    region: str = "us"


BOOK_SHAPES: dict[str, BookShape] = {
    "8xH100": BookShape("8xH100", "H100", "h100i", vram_per_gpu_gb=80.0),
    "8xH200": BookShape("8xH200", "H200", "h200ki", vram_per_gpu_gb=141.0),
}

# Boot stage durations in seconds, (low, high) uniform per stage: REQUESTING -> BOOTING (allocation),
# BOOTING -> INITIALIZING (machine boot), INITIALIZING -> READY (drivers, image, health check).
BootProfile = tuple[tuple[float, float], tuple[float, float], tuple[float, float]]
VM_BOOT: BootProfile = ((30.0, 120.0), (60.0, 180.0), (60.0, 300.0))
BARE_METAL_BOOT: BootProfile = ((60.0, 180.0), (120.0, 300.0), (60.0, 240.0))
POD_BOOT: BootProfile = ((5.0, 30.0), (10.0, 60.0), (10.0, 90.0))
BOOT_PROFILES: dict[str, BootProfile] = {
    SFCOMPUTE: BARE_METAL_BOOT,
    AWS: VM_BOOT,
    AZURE: VM_BOOT,
    GCP: VM_BOOT,
    PRIME: POD_BOOT,
    RUNPOD: POD_BOOT,
}

MARKET_PROVIDERS: tuple[str, ...] = KNOWN_PROVIDERS


def boot_profile(provider: str) -> BootProfile:
    return BOOT_PROFILES.get(provider, VM_BOOT)


def hazard_per_hour(rate: float, period_hours: float = HOURS_PER_MONTH, scale: float = 1.0) -> float:
    """The constant per-hour hazard whose probability of at least one interruption in ``period_hours`` is
    the rate (a month by default), times ``scale``.

    ``1 - exp(-h * T) = p``, so ``h = -ln(1 - p) / T``.
    """
    if rate <= 0.0 or scale <= 0.0:
        return 0.0
    return scale * -math.log1p(-rate) / period_hours
