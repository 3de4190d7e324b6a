"""General rules that judge each published row before it becomes offers.

Rules come first and apply to every provider alike; explicit corrections (``corrections.py``) only
where a hardware fact is known. Each finding is a ``CatalogAnomaly`` saying what the loader did:

- ``no_price`` (dropped): neither an on-demand nor a spot price is published.
- ``no_on_demand_price`` (dropped, on-demand): spot-only row (AWS p5e); Prime's ``__SPOT`` listings are
  spot-only by name and are not flagged.
- ``non_positive_price`` (dropped): a price of 0 or less is not a price.
- ``spot_not_discounted`` (dropped, spot): spot == on-demand (after rounding on-demand to the spot
  price's decimals), so the spot price is not a spot discount (Azure H100 v5, some AWS zones); the
  on-demand offer stays.
- ``spot_above_on_demand`` (dropped, spot) with ``on_demand_doubtful`` (untrusted, on-demand): spot
  above on-demand means one of the two prices is wrong (RunPod L40S); the spot offer is dropped and
  the on-demand one kept but left out of cheapest lookups and reference prices.
- ``gpu_count_unusual`` (kept): a GPU count other than 1/8, 1/4, 1/2, 1, 2, 4, 8 or 16 (e.g. 10 or 12);
  ``gpu_count_corrected`` when the known-corrections table holds the true count (Azure ND96isr_H100_v5
  has 8 GPUs, not 12; Azure NVv4 sizes hold 1/8, 1/4 or 1/2 of an MI25, not 1).
- ``gpu_count_name_mismatch`` (untrusted): the instance type's name states another GPU count than the
  row; ``spec_name_mismatch`` (kept): the name states other vCPU/RAM/VRAM than the row.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from scalar.providers.catalog.corrections import gpu_count_correction
from scalar.providers.catalog.names import named_shape
from scalar.providers.catalog.records import CORRECTED, DROPPED, UNTRUSTED, CatalogAnomaly, PriceRow

USUAL_GPU_COUNTS = frozenset({0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0})
# Relative tolerance when comparing a name's stated quantities with the row's columns.
NAME_TOLERANCE = 0.02


@dataclass(slots=True)
class RowVerdict:
    """What to make of one row: the (possibly corrected) row, which offers to make, and the flags."""

    row: PriceRow
    on_demand: bool = True
    spot: bool = True
    on_demand_trusted: bool = True
    spot_trusted: bool = True
    anomalies: list[CatalogAnomaly] = field(default_factory=list)


def is_usual_gpu_count(count: float) -> bool:
    return count in USUAL_GPU_COUNTS


def _gpu_count_rule(verdict: RowVerdict) -> None:
    row = verdict.row
    unusual = not is_usual_gpu_count(row.gpu_count)
    correction = gpu_count_correction(row.provider, row.instance_type)
    if correction is not None and correction.gpu_count != row.gpu_count:
        finding = (
            f"published GPU count {row.gpu_count:g} is not a usual count (1, 2, 4, 8, 16)"
            if unusual
            else f"published GPU count {row.gpu_count:g}"
        )
        verdict.anomalies.append(
            row.flag(
                "gpu_count_corrected",
                f"{finding}; corrected to {correction.gpu_count:g} from the known-corrections table: {correction.fact}",
                action=CORRECTED,
            )
        )
        memory = row.gpu_memory_gb if correction.gpu_memory_gb is None else correction.gpu_memory_gb
        verdict.row = dataclasses.replace(row, gpu_count=float(correction.gpu_count), gpu_memory_gb=memory)
        return
    if unusual:
        verdict.anomalies.append(
            row.flag(
                "gpu_count_unusual",
                f"GPU count {row.gpu_count:g} is not a usual count (1, 2, 4, 8, 16) and no correction is known; "
                "kept as published",
            )
        )


def _differs(stated: float | None, actual: float) -> bool:
    if stated is None:
        return False
    return abs(stated - actual) > NAME_TOLERANCE * max(abs(stated), abs(actual), 1.0)


def _name_rule(verdict: RowVerdict) -> None:
    row = verdict.row
    shape = named_shape(row.provider, row.instance_type)
    if shape is None:
        return
    if _differs(shape.gpu_count, row.gpu_count):
        verdict.anomalies.append(
            row.flag(
                "gpu_count_name_mismatch",
                f"the name {row.instance_type} says {shape.gpu_count:g} GPUs, the row {row.gpu_count:g}; "
                "offered, but left out of cheapest lookups and reference prices",
                action=UNTRUSTED,
            )
        )
        verdict.on_demand_trusted = verdict.spot_trusted = False
    stated = (
        ("vCPUs", shape.vcpu, row.vcpu),
        ("RAM GB", shape.memory_gb, row.memory_gb),
        ("VRAM GB per GPU", shape.gpu_memory_gb, row.gpu_memory_gb),
    )
    for label, named, actual in stated:
        if _differs(named, actual):
            verdict.anomalies.append(
                row.flag(
                    "spec_name_mismatch",
                    f"the name {row.instance_type} says {named:g} {label}, the row {actual:g}; the row's value is kept",
                )
            )


def _same_price(spot: Decimal, price: Decimal) -> bool:
    """Equal, or equal once the on-demand price is rounded to the spot price's published precision
    (AWS lists spot to 4 decimals: spot 27.433 against on-demand 27.43298 is the same price)."""
    if spot == price:
        return True
    spot_exponent, price_exponent = spot.as_tuple().exponent, price.as_tuple().exponent
    if isinstance(spot_exponent, int) and isinstance(price_exponent, int) and spot_exponent > price_exponent:
        return price.quantize(spot, rounding=ROUND_HALF_UP) == spot
    return False


def _price_rules(verdict: RowVerdict) -> None:
    row = verdict.row
    price, spot = row.price, row.spot_price
    if price is None and spot is None:
        verdict.on_demand = verdict.spot = False
        verdict.anomalies.append(
            row.flag("no_price", "no on-demand and no spot price published", action=DROPPED)
        )
        return
    if price is not None and price <= 0:
        verdict.on_demand = False
        verdict.anomalies.append(
            row.flag(
                "non_positive_price", f"on-demand price {price}/h is not positive", action=DROPPED, spot=False
            )
        )
    if spot is not None and spot <= 0:
        verdict.spot = False
        verdict.anomalies.append(
            row.flag("non_positive_price", f"spot price {spot}/h is not positive", action=DROPPED, spot=True)
        )
    if spot is None:
        verdict.spot = False
    if price is None:
        verdict.on_demand = False
        if not row.spot_listing and verdict.spot:
            verdict.anomalies.append(
                row.flag(
                    "no_on_demand_price",
                    f"no on-demand price published, spot {spot}/h only: offered as spot only",
                    action=DROPPED,
                    spot=False,
                )
            )
    if not (verdict.on_demand and verdict.spot):
        return
    assert price is not None and spot is not None
    if _same_price(spot, price):
        verdict.spot = False
        verdict.anomalies.append(
            row.flag(
                "spot_not_discounted",
                f"spot price {spot}/h equals on-demand {price}/h (at the spot price's precision): not a spot "
                "discount; only the on-demand offer is made",
                action=DROPPED,
                spot=True,
            )
        )
    elif spot > price:
        verdict.spot = False
        verdict.on_demand_trusted = False
        verdict.anomalies.append(
            row.flag(
                "spot_above_on_demand",
                f"spot price {spot}/h is above on-demand {price}/h ({spot / price:.2f}x): the spot offer is dropped",
                action=DROPPED,
                spot=True,
            )
        )
        verdict.anomalies.append(
            row.flag(
                "on_demand_doubtful",
                f"on-demand {price}/h is below this row's spot price {spot}/h, so one of them is wrong: offered, "
                "but left out of cheapest lookups and reference prices",
                action=UNTRUSTED,
                spot=False,
            )
        )


def judge_row(row: PriceRow) -> RowVerdict:
    """Apply every row rule to ``row``; the verdict says which offers to make and how far to trust them."""
    verdict = RowVerdict(row=row)
    if not row.host_included:
        verdict.on_demand_trusted = verdict.spot_trusted = False
    _gpu_count_rule(verdict)
    _name_rule(verdict)
    _price_rules(verdict)
    return verdict
