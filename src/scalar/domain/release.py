"""How long an idle node is held before it is released: from how its seller bills and the arrival forecast.

A seller of blocks (SFCompute) is paid for the whole contract when it is bought: releasing a block early
saves nothing by itself, so an idle block is held for the configured ``max_hold_s`` (``idle_release_s``)
as before. A seller billing running time (Prime Intellect, RunPod, the clouds) is paid per billing unit
while the node is held, so holding an idle node costs its price every second; releasing it costs the next
job a new purchase: ``restart_s`` seconds until a new node is READY, paid while it boots, and waited by
the job. The hold weighs the two with the arrival forecast (jobs the node could host per hour in the
recent past, expected gap ``3600 / rate``):

- the next job is expected within ``2 x restart_s`` (a second of waiting counted as a second of the
  node's price, plus the boot paid again): the node is held ``2 x restart_s`` (at least the short hold
  below, at most ``max_hold_s``), what a re-purchase would have cost (ski rental: never more than twice the
  cheaper choice in hindsight);
- otherwise it is held ``MIN_HOLD_S`` of the seller's time (a billing minute; jobs placed in the same
  step always go first), rounded up to a whole billing unit, never beyond ``max_hold_s``.

Two clocks: the hold, the restart time and the arrival gap are in the engine's seconds; billing units, the
short hold and the default restart time are the seller's. A market run faster than the engine's clock
(``market_scale`` market seconds per engine second, ``ControllerConfig.time_scale``; the built-in market of
``scalar up --demo`` runs 60x) bills a minute every engine second, so the seller's durations are divided by
it; at 1 (a real seller) nothing changes.

The forecast the caller passes is for the jobs the node could host (its tier, GPU model, memory, CPU and
RAM: ``engine/housekeeping.py``); a node of a shape nobody is asking for goes after the short hold.

Billing units are what sellers publish: RunPod bills compute per second (docs.runpod.io, "Billing
overview"); for others a minute is assumed (AWS and GCP bill per second after a first minute).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from scalar.domain.offers import RUNPOD, SFCOMPUTE
from scalar.domain.reasons import Reason

BLOCK_SELLERS = frozenset({SFCOMPUTE})  # contracts paid whole when bought
BILLING_UNIT_S: Mapping[str, float] = {RUNPOD: 1.0}
DEFAULT_BILLING_UNIT_S = 60.0
MIN_HOLD_S = 60.0
DEFAULT_RESTART_S = (
    600.0  # purchase to READY when the group has not shown it yet (VMs take up to ten minutes)
)


@dataclass(frozen=True, slots=True)
class IdleHold:
    """How long to hold an idle node of ``provider`` before releasing it, and why (with the numbers)."""

    hold_s: float
    reason: Reason


def billing_unit_s(provider: str) -> float | None:
    """Seconds per billed unit of a running node; ``None`` for a block paid whole when bought."""
    if provider in BLOCK_SELLERS:
        return None
    return BILLING_UNIT_S.get(provider, DEFAULT_BILLING_UNIT_S)


def idle_hold(
    provider: str,
    *,
    restart_s: float,
    arrivals_per_hour: float,
    max_hold_s: float,
    market_scale: float = 1.0,
) -> IdleHold:
    """The hold for an idle node (see the module docstring); always within ``[0, max_hold_s]``, in the
    engine's seconds. ``market_scale``: the seller's seconds per engine second (its billing unit and the
    short hold are divided by it)."""
    unit = billing_unit_s(provider)
    if unit is None:
        return IdleHold(
            max_hold_s,
            Reason(
                "block_paid_whole",
                f"{provider} contracts are paid whole when bought: releasing early saves nothing, held "
                f"{max_hold_s:g} s",
                "hold_s",
                have=max_hold_s,
            ),
        )
    scale = market_scale if math.isfinite(market_scale) and market_scale > 0 else 1.0
    restart = max(0.0, restart_s)
    gap = 3600.0 / arrivals_per_hour if arrivals_per_hour > 0 else math.inf
    expected = (
        "no job it could host arrived in the last hour"
        if math.isinf(gap)
        else f"a job it could host every {gap:.0f} s"
    )
    short = min(max_hold_s, math.ceil(MIN_HOLD_S / unit) * unit / scale)
    clock = "" if scale == 1.0 else f" ({scale:g} of its seconds per engine second)"
    if gap <= 2 * restart:
        hold = min(max_hold_s, max(short, 2 * restart))
        why = (
            f"{expected} and a new node takes {restart:.0f} s to be READY: held {hold:g} s, what buying "
            f"one again would cost"
        )
        return IdleHold(hold, Reason("idle_hold_for_arrivals", why, "hold_s", 2 * restart, hold, max_hold_s))
    hold = short
    why = (
        f"{expected}, more than twice the {restart:.0f} s a new node takes: {provider} bills per "
        f"{unit:g} s{clock}, held {hold:g} s"
    )
    return IdleHold(hold, Reason("idle_hold_short", why, "hold_s", MIN_HOLD_S / scale, hold, max_hold_s))
