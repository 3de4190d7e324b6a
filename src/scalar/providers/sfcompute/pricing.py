"""SFCompute's units, exactly: tickers, whole-order cents, node-hours and the CLI's time rounding.

SFCompute sells whole nodes of 8 GPUs. Its public orderbook quotes dollars per *node*-hour as decimal
strings; its orders carry ``price`` as the **total for the whole order in integer cents** (all nodes, the
whole duration), not a rate. Scalar works in dollars per GPU-hour, so::

    $/GPU-hour  = total_cents / 100 / 8 / nodes / hours
    total_cents = ceil($/GPU-hour * 100 * 8 * nodes * hours)      (the CLI rounds up, as here)

A 16-node, 24-hour order at $2.00/GPU-hour is 16 * 8 * 24 * 200 = 614,400 cents (the CLI once overstated
such totals 8x by multiplying by the GPU count twice).

Scalar's instance types are ``8xH100`` and ``8xH200``; SFCompute's tickers are below (``TICKERS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, Decimal

GPUS_PER_NODE = 8
SECONDS_PER_HOUR = 3600
MIN_DURATION_S = SECONDS_PER_HOUR  # SFCompute sells at least one hour


@dataclass(frozen=True, slots=True)
class Shape:
    """A Scalar instance type sold on SFCompute: whole 8-GPU nodes of one accelerator.

    ``tickers`` are SFCompute's names for it, the default (used to buy) first. CPU and RAM are not in
    SFCompute's orders API; the values are an HGX board's usual host, as the built-in market uses.
    """

    instance_type: str
    gpu_model: str
    accelerator: str  # the orderbook's ``requirements=accelerator:<this>``
    tickers: tuple[str, ...]
    vram_per_gpu_gb: float
    cpu_per_node: float = 192.0
    ram_per_node_gb: float = 2048.0
    region: str = "us"


SHAPES: dict[str, Shape] = {
    "8xH100": Shape("8xH100", "H100", "H100", ("h100i", "h100v"), vram_per_gpu_gb=80.0),
    "8xH200": Shape("8xH200", "H200", "H200", ("h200ki",), vram_per_gpu_gb=141.0),
}

#: SFCompute ticker -> Scalar instance type (h100i: H100 on Kubernetes, h100v: H100 VMs, h200ki: H200).
TICKERS: dict[str, str] = {ticker: s.instance_type for s in SHAPES.values() for ticker in s.tickers}


def order_total_cents(price_per_gpu_hour: Decimal, node_count: int, duration_s: int | Decimal) -> int:
    """The whole order's price in integer cents, rounded up to the cent (as SFCompute's CLI does)."""
    if node_count < 1:
        raise ValueError(f"node_count must be at least 1, got {node_count}")
    if duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    cents = price_per_gpu_hour * 100 * GPUS_PER_NODE * node_count * Decimal(duration_s)
    return int((cents / SECONDS_PER_HOUR).to_integral_value(rounding=ROUND_CEILING))


def price_per_gpu_hour_from_cents(total_cents: int, node_count: int, duration_s: int | Decimal) -> Decimal:
    """Dollars per GPU-hour of an order whose whole price is ``total_cents``: cents / 100 / 8 / nodes / hours."""
    if node_count < 1:
        raise ValueError(f"node_count must be at least 1, got {node_count}")
    if duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    return (Decimal(total_cents) * SECONDS_PER_HOUR) / (
        Decimal(100) * GPUS_PER_NODE * node_count * Decimal(duration_s)
    )


def node_hour_to_gpu_hour(dollars_per_node_hour: Decimal) -> Decimal:
    """The orderbook's $/node-hour as $/GPU-hour (a node is 8 GPUs)."""
    return dollars_per_node_hour / GPUS_PER_NODE


def ceil_to_hour(when: datetime) -> datetime:
    """Round up to the whole hour (an exact hour stays)."""
    floor = when.replace(minute=0, second=0, microsecond=0)
    return floor if floor == when else floor + timedelta(hours=1)


def ceil_to_minute(when: datetime) -> datetime:
    """Round up to the whole minute: the CLI's reading of a ``"NOW"`` start."""
    floor = when.replace(second=0, microsecond=0)
    return floor if floor == when else floor + timedelta(minutes=1)


def order_window(now: datetime, duration_s: int) -> tuple[datetime, datetime]:
    """The (effective start, end) of an order starting ``NOW`` for ``duration_s``, as the CLI places it.

    The start is ``NOW``, priced from the next whole minute; the end is rounded up to the hour; at least
    one hour is bought.
    """
    start = ceil_to_minute(now)
    end = ceil_to_hour(now + timedelta(seconds=max(duration_s, MIN_DURATION_S)))
    if end - start < timedelta(seconds=MIN_DURATION_S):
        end += timedelta(hours=1)
    return start, end


def iso_z(when: datetime) -> str:
    """``2025-07-02T00:00:00Z``: SFCompute's timestamp form."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
