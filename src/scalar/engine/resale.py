"""Selling back SFCompute capacity the forecast will not use, and accounting for what sold.

A block seller (SFCompute) is paid for the whole contract when it is bought, so an idle block's remaining
time is worth only what it sells for. ``resale_step`` (pure: reads the state, returns values) decides, for
each open block of a block seller whose live nodes are all READY and idle (for ``MIN_HOLD_S``), that has no sale in flight, while
no job of its group's tier is pending (waiting work may be waiting for exactly this capacity):

- the forecast its group's demand would put on it (``contract_sizing.forecast_for``: the steady arrivals of
  the last hours of its tier, expected to go on, in GPU-hours of its model), spread over the block's GPUs:
  ``kept = forecast / GPUs`` hours, at most the time left;
- the tail it will not use, in whole hours: ``floor(remaining - kept)``, offered from
  ``cut = end - hours`` (the nodes stay usable until the cut);
- never a block of a group that keeps ``min_slices``;
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

from scalar.domain.market import NodeState, SaleFill
from scalar.domain.money import usd
from scalar.domain.orderbook import optimal_ask
from scalar.domain.reasons import Reason
from scalar.domain.release import BLOCK_SELLERS, MIN_HOLD_S
from scalar.engine.actions import SellCapacity
from scalar.engine.config import ControllerConfig
from scalar.engine.contract_sizing import forecast_for
from scalar.engine.events import SaleUpdated
from scalar.engine.state import BlockRecord, ClusterState

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


def _idle(state: ClusterState, block: BlockRecord, now: datetime) -> tuple[str, ...] | None:
    """The block's live nodes still ending with the block, when every one of them is READY and has been
    idle for ``MIN_HOLD_S`` (work that arrives in the same minute goes first)."""
    nodes = []
    for node_id in block.node_ids:
        node = state.nodes.get(node_id)
        if node is None or not node.live or node_end(state, block, node_id) < block.block.end_time:
            continue
        if node.jobs or node.state is not NodeState.READY:
            return None  # busy, or still booting for the work it was bought for
        if node.idle_since is None or (now - node.idle_since).total_seconds() < MIN_HOLD_S:
            return None
        nodes.append(node_id)
    return tuple(nodes) or None


def resale_step(
    state: ClusterState,
    now: datetime,
    in_flight: frozenset[str] = frozenset(),
    config: ControllerConfig | None = None,
) -> tuple[SellBack, ...]:
    """The sales to offer now (see the module docstring); ``in_flight``: blocks with a sale not yet filled.
    Hours are the market's (``config.time_scale``: market seconds per engine second)."""
    config = config or ControllerConfig()
    out: list[SellBack] = []
    for block_id in sorted(state.blocks):
        block = state.blocks[block_id]
        grant = block.grant
        if not block.open or block.fixed or grant.provider not in BLOCK_SELLERS or block_id in in_flight:
            continue
        nodes = _idle(state, block, now)
        group = state.groups.get(block.group)
        book = state.books.get(grant.instance_type)
        if nodes is None or group is None or book is None or group.min_slices > 0:
            continue  # a group that keeps a floor of capacity (min_slices) is never sold down
        scale = config.time_scale(grant.provider)
        remaining_h = (block.block.end_time - now).total_seconds() * scale / 3600.0
        gpus = grant.gpus_per_node * len(nodes)
        if any(
            (r := state.jobs.get(j)) is not None and r.job is not None and r.job.tier is group.tier
            for j in state.pending_ids
        ):
            continue  # work of its tier waits: the capacity may be what it waits for
        forecast = forecast_for(state, config, group, [], now).total()
        kept = min(remaining_h, forecast / gpus)
        hours = math.floor(remaining_h - kept)
        if hours < 1:
            continue
        ask = optimal_ask(book.bids, gpus) if book.bids else None
        if ask is None or ask.price_per_gpu_hour is None:
            continue
        price = ask.price_per_gpu_hour
        cut = block.block.end_time - timedelta(hours=hours / scale)
        proceeds = price * gpus * hours
        why = (
            f"block {block_id} idle with {remaining_h:.2f} h left; forecast {forecast:.1f} GPU-h keeps "
            f"{kept:.2f} h of its {gpus} GPUs: offering the last {hours} h ({gpus * hours} GPU-h) at "
            f"{usd(price)}/GPU-h, expected proceeds {usd(proceeds)} ({ask.reason.message})"
        )
        reason = Reason("sell_unused_capacity", why, "gpu_hours", round(forecast, 3), gpus * hours)
        out.append(
            SellBack(
                block_id,
                grant.provider,
                grant.instance_type,
                nodes,
                grant.gpus_per_node,
                hours,
                cut,
                price,
                forecast,
                kept,
                reason,
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
RESALE_RETRY_S = 3600.0  # a block whose offer did not (wholly) fill is offered again an hour later


def offer_resales(state: ClusterState, now: datetime, config: ControllerConfig | None = None) -> None:
    """The autoscaler's resale step applied: each ``SellBack`` becomes a ``SellCapacity`` action (its
    reason, with the numbers, is in ``/autoscaler/status``'s recent actions and the block's story)."""
    recent = frozenset(
        b for b, t in state.resale_offered_at.items() if (now - t).total_seconds() < RESALE_RETRY_S
    )
    for sale in resale_step(state, now, recent, config):
        action = SellCapacity(
            state.next_id("act"),
            sale.reason,
            sale.block_id,
            sale.provider,
            sale.node_ids,
            sale.cut,
            sale.hours,
            sale.price_per_gpu_hour,
            sale.expected_proceeds,
        )
        state.sales[action.action_id] = action
        state.resale_offered_at[sale.block_id] = now
        state.emit(action, (sale.block_id, state.blocks[sale.block_id].group))


def on_sale_updated(state: ClusterState, event: SaleUpdated) -> None:
    """The seller's answer to a ``SellCapacity``: what filled is recorded (``record_sale``), only within
    what the engine offered (that block, those nodes, that cut); an answer to no offer is noted and ignored."""
    offer = state.sales.pop(event.action_id, None)
    if offer is None:
        state.note(
            "sale", event.action_id, Reason("unknown_sale", f"no sell order {event.action_id} to update")
        )
        return
    fill = event.fill
    if fill is None:
        why = f"sell order {offer.action_id} on block {offer.block_id} was not placed: {event.error or 'unknown'}"
        state.note("sale", offer.block_id, Reason("sale_not_placed", why))
        return
    offered = set(offer.node_ids)
    if (
        fill.block_id != offer.block_id
        or fill.provider != offer.provider
        or fill.cut != offer.cut
        or not set(fill.node_ids_sold) <= offered
    ):
        why = f"the answer to sell order {offer.action_id} names capacity it did not offer: ignored"
        state.note("sale", offer.block_id, Reason("sale_mismatch", why))
        return
    credited = record_sale(state, fill)
    why = (
        f"sell order {offer.action_id}: {len(fill.node_ids_sold)} of {len(offer.node_ids)} node(s) sold from "
        f"{fill.cut.isoformat()} ({fill.gpus_sold} GPUs x {fill.hours} h at "
        f"{usd(fill.price_per_gpu_hour)}/GPU-h): {usd(credited)} credited to the buyer"
    )
    state.note(
        "sale",
        offer.block_id,
        Reason("capacity_sold", why, "gpus", len(offer.node_ids), len(fill.node_ids_sold)),
    )
