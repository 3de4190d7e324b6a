"""Selling back SFCompute capacity the forecast will not use, and accounting for what sold.

A block seller (SFCompute) is paid for the whole contract when it is bought, so an idle block's remaining
time is worth only what it sells for. ``resale_step`` (pure: reads the state, returns values) decides, for
each open block of a block seller whose live nodes are all idle and that has no sale in flight:

- the forecast its group's demand would put on it (``contract_sizing.forecast_for``: the group's queued
  jobs plus the steady arrivals of its tier, in GPU-hours of its model), spread over the block's GPUs:
  ``kept = forecast / GPUs`` hours, at most the time left;
- the tail it will not use, in whole hours: ``floor(remaining - kept)``, offered from
  ``cut = end - hours`` (the nodes stay usable until the cut);
- the price: the orderbook algorithm's mirror for asks (``domain.orderbook.optimal_ask``) over the bids of
  the block's instance type (``state.books``); no bids, no offer.

``record_sale`` applies what the market filled (``domain.market.SaleFill``, whole nodes): each sold node's
usable end moves to the cut (the packer never places past a node's end, and accrual stops there), the block
counts the sold GPU-seconds, what they cost under the contract, and the proceeds, credited to the block's
buyer. For a block held to its end, ``committed GPU-hours = paid + sold back`` and
``paid = delivered + idle`` (engine/costs.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal

from scalar.domain.market import SaleFill
from scalar.domain.orderbook import format_usd, optimal_ask
from scalar.domain.reasons import Reason
from scalar.domain.release import BLOCK_SELLERS
from scalar.engine.contract_sizing import forecast_for
from scalar.engine.state import BlockRecord, ClusterState, JobState

_HOUR = Decimal(3600)


@dataclass(frozen=True, slots=True)
class SellBack:
    """Offer ``hours`` whole hours of ``node_ids`` (from ``cut`` to the block's end) at ``price``."""

    block_id: str
    provider: str
    instance_type: str
    node_ids: tuple[str, ...]
    gpus_per_node: int
    hours: int
    cut: datetime
    price_per_gpu_hour: Decimal
    forecast_gpu_hours: float
    kept_hours: float
    reason: Reason

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * len(self.node_ids)

    @property
    def expected_proceeds(self) -> Decimal:
        return self.price_per_gpu_hour * self.gpus * self.hours


def node_end(state: ClusterState, block: BlockRecord, node_id: str) -> datetime:
    """Where a node of ``block`` stops being usable and paid: the block's end, or the cut of a sale."""
    node = state.nodes.get(node_id)
    end = block.block.end_time
    if node is not None:
        end = min(end, node.node.block.end_time)
    return end


def _idle(state: ClusterState, block: BlockRecord) -> tuple[str, ...] | None:
    """The block's live nodes still ending with the block, when every one of them is idle."""
    nodes = []
    for node_id in block.node_ids:
        node = state.nodes.get(node_id)
        if node is None or not node.live or node_end(state, block, node_id) < block.block.end_time:
            continue
        if node.jobs:
            return None
        nodes.append(node_id)
    return tuple(nodes) or None


def resale_step(
    state: ClusterState, now: datetime, in_flight: frozenset[str] = frozenset()
) -> tuple[SellBack, ...]:
    """The sales to offer now (see the module docstring); ``in_flight``: blocks with a sale not yet filled."""
    out: list[SellBack] = []
    for block_id in sorted(state.blocks):
        block = state.blocks[block_id]
        grant = block.grant
        if not block.open or block.fixed or grant.provider not in BLOCK_SELLERS or block_id in in_flight:
            continue
        nodes = _idle(state, block)
        group = state.groups.get(block.group)
        book = state.books.get(grant.instance_type)
        if nodes is None or group is None or book is None:
            continue
        remaining_h = (block.block.end_time - now).total_seconds() / 3600.0
        gpus = grant.gpus_per_node * len(nodes)
        queued = [
            r
            for r in state.jobs.values()
            if r.state is JobState.PENDING and r.job is not None and r.job.tier is group.tier
        ]
        forecast = forecast_for(state, group, queued, now).total()
        kept = min(remaining_h, forecast / gpus)
        hours = math.floor(remaining_h - kept)
        if hours < 1:
            continue
        ask = optimal_ask(book.bids, gpus) if book.bids else None
        if ask is None or ask.price_per_gpu_hour is None:
            continue
        price = ask.price_per_gpu_hour
        cut = block.block.end_time - timedelta(hours=hours)
        proceeds = price * gpus * hours
        why = (
            f"block {block_id} idle with {remaining_h:.2f} h left; forecast {forecast:.1f} GPU-h keeps "
            f"{kept:.2f} h of its {gpus} GPUs: offering the last {hours} h ({gpus * hours} GPU-h) at "
            f"{format_usd(price)}/GPU-h, expected proceeds {format_usd(proceeds)} ({ask.reason.message})"
        )
        reason = Reason("sell_unused_capacity", why, "gpu_hours", round(forecast, 3), gpus * hours)
        out.append(
            SellBack(
                block_id, grant.provider, grant.instance_type, nodes, grant.gpus_per_node, hours, cut, price,
                forecast, kept, reason,
            )
        )
    return tuple(out)


def record_sale(state: ClusterState, fill: SaleFill) -> Decimal:
    """Apply a filled sale: the sold nodes end at ``fill.cut``; the block counts the sold GPU-seconds, their
    contract cost and the proceeds (credited to the block's buyer). Returns the proceeds credited.

    Refused (``ValueError``) for a block the state does not hold, another provider's block, or a node not
    in the block: the market's word never moves capacity the engine did not offer."""
    block = state.blocks.get(fill.block_id)
    if block is None or block.grant.provider != fill.provider:
        raise ValueError(f"no block {fill.block_id!r} of {fill.provider} to record a sale on")
    unknown = [n for n in fill.node_ids_sold if n not in block.node_ids]
    if unknown:
        raise ValueError(f"nodes {unknown} are not in block {fill.block_id}")
    sold_s = _ZERO
    for node_id in fill.node_ids_sold:
        end = node_end(state, block, node_id)
        if fill.cut >= end:
            continue  # already sold or ended: never counted twice
        node = state.nodes.get(node_id)
        if node is not None:
            node.node = replace(node.node, block=replace(node.node.block, end_time=fill.cut))
        sold_s += Decimal(block.grant.gpus_per_node) * Decimal(str((end - fill.cut).total_seconds()))
    if not sold_s:
        return _ZERO
    proceeds = fill.price_per_gpu_hour * sold_s / _HOUR
    block.sold_back_gpu_s += sold_s
    block.sold_back_cost += block.grant.price_per_gpu_hour * sold_s / _HOUR
    block.sold_back_revenue += proceeds
    return proceeds


_ZERO = Decimal(0)
