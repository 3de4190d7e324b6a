"""Selling back SFCompute capacity the forecast will not use, and accounting for what sold.

A block seller (SFCompute) is paid for the whole contract when it is bought, so an idle block's remaining
time is worth only what it sells for. ``resale_step`` (pure: reads the state, returns values) decides, for
each open block of a block seller that has no sale in flight (nor an offer in the last ``RESALE_RETRY_S``)
and none of whose live nodes still boots:

- the nodes it may offer: its READY nodes that hold no work, have been idle for ``MIN_HOLD_S`` (work that
  arrives in the same minute goes first) and whose time was not sold already; a node holding work is never
  offered, but it no longer keeps the block's other nodes from being offered (SFCompute sells per node);
- never while a pending job would fit those nodes (the packer's own filters, ``evaluate_node``, on the
  nodes as they are: tier, GPU model, CUDA, time left, CPU, RAM, GPUs; a gang on as many of them as it
  needs): the capacity may be what it waits for. Pending work that cannot use them blocks nothing; the
  hold is told once in the block's story, with the numbers (``resale_held_for_pending``);
- the forecast its group's demand would put on them (``contract_sizing.forecast_for``: the steady arrivals
  of the last hours of its tier, expected to go on, in GPU-hours of its model), spread over the offered
  GPUs only (the busy nodes' GPUs are not counted: they keep more hours back, never fewer):
  ``kept = forecast / GPUs offered`` hours, at most the time left;
- the tail it will not use, in whole hours: ``floor(remaining - kept)``, offered from
  ``cut = end - hours`` (the nodes stay usable until the cut);
- never a block of a group that keeps ``min_slices``;
- the price: the orderbook algorithm's mirror for asks (``domain.orderbook.optimal_ask``) over the bids of
  the block's instance type (``state.books``); no bids, no offer.

While a sell order is in flight (offered, not yet answered), the packer treats each node it names as ending
at the cut (``offered_cuts``/``until_cut``, applied by engine/scheduler.py): it places there only work that
ends, with its safety margin, before the cut, so whatever fills never cuts short a job the packer placed.
The node keeps its whole time again for what does not sell.

Releasing a block paid whole gains nothing but what its time sells for, so where the idle release
(engine/housekeeping.py) would let one go, ``sell_instead_of_release`` sells it back instead: every whole
hour left on its unsold idle nodes is offered at the same mirrored ask (the forecast is not consulted: the
release already judged nothing will come for it), the block is kept while the answer is out, and what did
not sell is offered again ``RESALE_RETRY_S`` after the last offer (the block stays, idle and paid). The block
is released as before only when there is nothing left to sell: under a market hour left on its unsold
nodes, no bids to sell into, or a seller that refused the block's last sell order (the simulator declines
every one).

``record_sale`` applies what the market filled (``domain.market.SaleFill``, whole nodes): each sold node's
usable end moves to the cut (the packer never places past a node's end, and accrual stops there), the block
counts the sold GPU-seconds, what they cost under the contract, and the proceeds, credited to the block's
buyer. For a block held to its end, ``committed GPU-hours = paid + sold back`` and
``paid = delivered + idle`` (engine/costs.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal

from scalar.domain.market import NodeState, SaleFill
from scalar.domain.money import usd
from scalar.domain.orderbook import AskPrice, optimal_ask
from scalar.domain.packing import evaluate_node, need_text
from scalar.domain.packing_model import Job, Node
from scalar.domain.reasons import Reason
from scalar.domain.release import BLOCK_SELLERS, MIN_HOLD_S
from scalar.engine.actions import SellCapacity
from scalar.engine.config import ControllerConfig
from scalar.engine.contract_sizing import forecast_for
from scalar.engine.events import SaleUpdated
from scalar.engine.groups import gang_parts
from scalar.engine.state import BlockRecord, ClusterState, NodeRecord

_HOUR = Decimal(3600)
_ZERO = Decimal(0)
RESALE_RETRY_S = 3600.0  # a block whose offer did not (wholly) fill is offered again an hour later
HELD_FOR_PENDING = "resale_held_for_pending"
SELL_INSTEAD_OF_RELEASE = "sell_instead_of_release"
KEPT_FOR_RESALE = "kept_for_resale"
REFUSED = frozenset({"sale_not_placed", "sale_mismatch"})  # the seller's answers that sold nothing for good


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


@dataclass(frozen=True, slots=True)
class ResaleHeld:
    """A block with idle nodes not offered, and why (the numbers are in ``reason``)."""

    block_id: str
    reason: Reason


def node_end(state: ClusterState, block: BlockRecord, node_id: str) -> datetime:
    """Where a node of ``block`` stops being usable and paid: the block's end, or the cut of a sale."""
    node = state.nodes.get(node_id)
    end = block.block.end_time
    if node is not None:
        end = min(end, node.node.block.end_time)
    return end


def offered_cuts(state: ClusterState) -> dict[str, datetime]:
    """Node id -> the earliest cut of a sell order in flight that names it (an offer not yet answered)."""
    cuts: dict[str, datetime] = {}
    for sale in state.sales.values():
        for node_id in sale.node_ids:
            if node_id not in cuts or sale.cut < cuts[node_id]:
                cuts[node_id] = sale.cut
    return cuts


def until_cut(node: Node, cuts: Mapping[str, datetime]) -> Node:
    """``node`` as the packer sees it while a sale of its time is in flight: ending at the sale's cut, so the
    expiry filter keeps off it any job that would run past the cut (``expires_too_soon``, with the numbers
    in ``explain``). A node with no sale in flight is returned as is."""
    cut = cuts.get(node.id)
    if cut is None or cut >= node.block.end_time:
        return node
    return replace(node, block=replace(node.block, end_time=cut))


def _offerable(state: ClusterState, block: BlockRecord, now: datetime) -> tuple[list[NodeRecord], int] | None:
    """The block's nodes it may offer (READY, no work, idle for ``MIN_HOLD_S``, time not sold already) and
    how many of its live nodes hold work; ``None`` while one still boots for the work it was bought for."""
    idle: list[NodeRecord] = []
    busy = 0
    for node_id in block.node_ids:
        node = state.nodes.get(node_id)
        if node is None or not node.live or node_end(state, block, node_id) < block.block.end_time:
            continue
        if node.state is not NodeState.READY:
            return None
        if node.jobs:
            busy += 1
        elif not node.draining and node.idle_since is not None:
            if (now - node.idle_since).total_seconds() >= MIN_HOLD_S:
                idle.append(node)
    return idle, busy


def _fits(job: Job, on_agent: bool, nodes: list[NodeRecord], now: datetime, margin_s: float) -> bool:
    """Whether the packer could place ``job`` on ``nodes`` (all empty, of one block) as they are: on one of
    them, or as a gang of whole nodes when it needs more GPUs than one has."""
    node = nodes[0]
    if node.agent != on_agent:
        return False
    gpus = node.node.block.gpus_per_node
    if job.gpu_count > gpus:
        parts = math.ceil(job.gpu_count / gpus)
        if parts > len(nodes):
            return False
        job = replace(job, gpu_count=gang_parts(job.gpu_count, parts)[0])
    return evaluate_node(job, node.node, now, safety_margin_sec=margin_s).reason is None


def _waiting(
    state: ClusterState, config: ControllerConfig, tier: object, nodes: list[NodeRecord], now: datetime
) -> tuple[int, Job | None]:
    """The pending jobs of ``tier`` and the first (in the queue's order of arrival) that fits ``nodes``."""
    count = 0
    verdicts: dict[tuple[object, ...], bool] = {}
    for job_id in state.pending_ids:
        rec = state.jobs.get(job_id)
        job = rec.job if rec is not None else None
        if rec is None or job is None or job.tier is not tier:
            continue
        count += 1
        on_agent = bool(rec.spec.command)
        key = (job.gpu_count, job.vram_per_gpu_gb, job.cpu_cores, job.ram_gb, job.gpu_models,
               job.cuda_versions, job.share_gpu, job.expected_duration_sec, on_agent)  # fmt: skip
        ok = verdicts.get(key)
        if ok is None:
            ok = verdicts[key] = _fits(job, on_agent, nodes, now, config.safety_margin_s)
        if ok:
            return count, job
    return count, None


def _ask(state: ClusterState, block: BlockRecord, gpus: int) -> AskPrice | None:
    book = state.books.get(block.grant.instance_type)
    if book is None or not book.bids:
        return None
    ask = optimal_ask(book.bids, gpus)
    return ask if ask.price_per_gpu_hour is not None else None


def _decide(
    state: ClusterState, block: BlockRecord, now: datetime, config: ControllerConfig
) -> SellBack | ResaleHeld | None:
    grant = block.grant
    group = state.groups.get(block.group)
    book = state.books.get(grant.instance_type)
    if group is None or book is None or not book.bids or group.min_slices > 0:
        return None  # no bids to sell into; a group that keeps a floor of capacity is never sold down
    scale = config.time_scale(grant.provider)
    remaining_h = (block.block.end_time - now).total_seconds() * scale / 3600.0
    found = _offerable(state, block, now)
    if found is None or not found[0] or remaining_h < 1:
        return None
    nodes, busy = found
    gpus = grant.gpus_per_node * len(nodes)
    live = len(nodes) + busy
    pending, fits = _waiting(state, config, group.tier, nodes, now)
    if fits is not None:
        why = (
            f"block {grant.block_id}: {len(nodes)} idle of its {live} node(s) with time to sell ({gpus} GPUs, "
            f"{remaining_h:.2f} h left) are not offered: pending {fits.tier.value} job {fits.id} "
            f"({need_text(fits)}) fits them ({pending} {fits.tier.value} job(s) pending)"
        )
        return ResaleHeld(grant.block_id, Reason(HELD_FOR_PENDING, why, "jobs", 0, pending))
    forecast = forecast_for(state, config, group, [], now).total()
    kept = min(remaining_h, forecast / gpus)
    hours = math.floor(remaining_h - kept)
    ask = _ask(state, block, gpus) if hours >= 1 else None
    if ask is None or ask.price_per_gpu_hour is None:
        return None
    price = ask.price_per_gpu_hour
    busy_text = f", {busy} busy node(s) not offered" if busy else ""
    waiting = f"{pending} {group.tier.value} job(s) pending, none fits these nodes; " if pending else ""
    why = (
        f"block {grant.block_id}: {len(nodes)} idle of its {live} node(s) with time to sell{busy_text}, "
        f"{remaining_h:.2f} h "
        f"left; {waiting}forecast {forecast:.1f} GPU-h keeps {kept:.2f} h of the {gpus} idle GPUs: offering "
        f"the last {hours} h ({gpus * hours} GPU-h) at {usd(price)}/GPU-h, expected proceeds "
        f"{usd(price * gpus * hours)} ({ask.reason.message})"
    )
    reason = Reason("sell_unused_capacity", why, "gpu_hours", round(forecast, 3), gpus * hours)
    return _sell_back(block, nodes, hours, scale, price, forecast, kept, reason)


def _sell_back(
    block: BlockRecord,
    nodes: list[NodeRecord],
    hours: int,
    scale: float,
    price: Decimal,
    forecast: float,
    kept: float,
    reason: Reason,
) -> SellBack:
    grant = block.grant
    cut = block.block.end_time - timedelta(hours=hours / scale)
    ids = tuple(n.id for n in nodes)
    return SellBack(
        grant.block_id,
        grant.provider,
        grant.instance_type,
        ids,
        grant.gpus_per_node,
        hours,
        cut,
        price,
        forecast,
        kept,
        reason,
    )


def _candidates(state: ClusterState, in_flight: frozenset[str]) -> list[BlockRecord]:
    out = []
    for block_id in sorted(state.blocks):
        block = state.blocks[block_id]
        if not block.open or block.fixed or block.grant.provider not in BLOCK_SELLERS:
            continue
        if block_id not in in_flight:
            out.append(block)
    return out


def resale_plan(
    state: ClusterState,
    now: datetime,
    in_flight: frozenset[str] = frozenset(),
    config: ControllerConfig | None = None,
) -> tuple[tuple[SellBack, ...], tuple[ResaleHeld, ...]]:
    """The sales to offer now and the blocks whose idle nodes pending work holds back (see the module
    docstring); ``in_flight``: blocks not to offer (a sale not yet answered, or offered lately)."""
    config = config or ControllerConfig()
    sales: list[SellBack] = []
    held: list[ResaleHeld] = []
    for block in _candidates(state, in_flight):
        decision = _decide(state, block, now, config)
        if isinstance(decision, SellBack):
            sales.append(decision)
        elif isinstance(decision, ResaleHeld):
            held.append(decision)
    return tuple(sales), tuple(held)


def resale_step(
    state: ClusterState,
    now: datetime,
    in_flight: frozenset[str] = frozenset(),
    config: ControllerConfig | None = None,
) -> tuple[SellBack, ...]:
    """The sales to offer now (see the module docstring); ``in_flight``: blocks with a sale not yet filled.
    Hours are the market's (``config.time_scale``: market seconds per engine second)."""
    return resale_plan(state, now, in_flight, config)[0]


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


def _emit(state: ClusterState, sale: SellBack, now: datetime) -> SellCapacity:
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
    return action


def _recent(state: ClusterState, now: datetime) -> frozenset[str]:
    """The blocks not to offer now: a sale not yet answered, or offered in the last ``RESALE_RETRY_S``."""
    recent = {b for b, t in state.resale_offered_at.items() if (now - t).total_seconds() < RESALE_RETRY_S}
    return frozenset(recent | {s.block_id for s in state.sales.values()})


def _note_once(state: ClusterState, block_id: str, reason: Reason) -> None:
    """Tell a block's story of a hold once, not every step (again only after something else happened)."""
    entries = state.story_index.get(block_id, [])
    if entries and state.story[entries[-1]].reason.code == reason.code:
        return
    state.note("block", block_id, reason)


def offer_resales(state: ClusterState, now: datetime, config: ControllerConfig | None = None) -> None:
    """The autoscaler's resale step applied: each ``SellBack`` becomes a ``SellCapacity`` action (its
    reason, with the numbers, is in ``/autoscaler/status``'s recent actions and the block's story); a block
    held back for pending work says so once in its story."""
    sales, held = resale_plan(state, now, _recent(state, now), config)
    for sale in sales:
        _emit(state, sale, now)
    for hold in held:
        _note_once(state, hold.block_id, hold.reason)


def _refused(state: ClusterState, block_id: str) -> bool:
    """Whether the seller's answer to the block's last sell order sold nothing for good (not placed)."""
    for index in reversed(state.story_index.get(block_id, [])):
        entry = state.story[index]
        if entry.kind == "sale":
            return entry.reason.code in REFUSED
    return False


def sell_instead_of_release(
    state: ClusterState, config: ControllerConfig, block: BlockRecord, now: datetime, release: Reason
) -> bool:
    """Where the idle release would let ``block`` go (``release``: why): for a block paid whole, sell every
    whole hour left on its unsold idle nodes instead (a ``SellCapacity``, credited like any sale) and keep
    the block. ``True``: kept (offered now, an offer out, or offered lately and offered again after
    ``RESALE_RETRY_S``); ``False``: release it, there being nothing to sell (under a market hour left on its
    unsold nodes, no bids) or a seller that refused the block's last sell order."""
    grant = block.grant
    if grant.provider not in BLOCK_SELLERS or block.fixed:
        return False
    if any(s.block_id == grant.block_id for s in state.sales.values()):
        return True  # the answer decides: what sells is credited, what does not is offered again
    if _refused(state, grant.block_id):
        return False
    found = _offerable(state, block, now)
    nodes = found[0] if found is not None else []
    scale = config.time_scale(grant.provider)
    hours = math.floor((block.block.end_time - now).total_seconds() * scale / 3600.0)
    ask = _ask(state, block, grant.gpus_per_node * len(nodes)) if nodes else None
    if not nodes or hours < 1 or ask is None or ask.price_per_gpu_hour is None:
        return False
    gpus = grant.gpus_per_node * len(nodes)
    last = state.resale_offered_at.get(grant.block_id)
    if last is not None and (now - last).total_seconds() < RESALE_RETRY_S:
        again = last + timedelta(seconds=RESALE_RETRY_S)
        why = (
            f"block {grant.block_id} is idle past its hold, but it is paid whole: releasing it would drop the "
            f"{hours} h left on {len(nodes)} unsold node(s) ({gpus * hours} GPU-h) for nothing; its last sell "
            f"order ({last.isoformat()}) did not take them, so they are offered again from {again.isoformat()} "
            f"(released only when under an hour is left to sell, or the seller refuses sell orders)"
        )
        _note_once(state, grant.block_id, Reason(KEPT_FOR_RESALE, why, "gpu_hours", 0, gpus * hours))
        return True
    price = ask.price_per_gpu_hour
    why = (
        f"{release.message}. It is paid whole, so a release gains only what its time sells for: offering "
        f"the {hours} h left on {len(nodes)} unsold node(s) ({gpus * hours} GPU-h) at {usd(price)}/GPU-h, "
        f"expected proceeds {usd(price * gpus * hours)} ({ask.reason.message}); the block is kept and what "
        f"does not sell is offered again in {RESALE_RETRY_S / 3600:g} h"
    )
    reason = Reason(SELL_INSTEAD_OF_RELEASE, why, "gpu_hours", 0, gpus * hours)
    remaining_h = (block.block.end_time - now).total_seconds() * scale / 3600.0
    _emit(state, _sell_back(block, nodes, hours, scale, price, 0.0, remaining_h - hours, reason), now)
    return True


def on_sale_updated(state: ClusterState, event: SaleUpdated) -> None:
    """The seller's answer to a ``SellCapacity``: what filled is recorded (``record_sale``), only within
    what the engine offered (that block, those nodes, that cut); an answer to no offer is noted and ignored.
    The offered nodes that did not sell have their whole time again: the next pass may place on them."""
    offer = state.sales.pop(event.action_id, None)
    if offer is None:
        state.note(
            "sale", event.action_id, Reason("unknown_sale", f"no sell order {event.action_id} to update")
        )
        return
    state.schedule_dirty = True  # the cut no longer bounds the unsold nodes
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
