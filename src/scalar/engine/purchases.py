"""The seller's answers to purchases: fills become blocks and BOOTING nodes, refusals back groups off.

Every answer is idempotent: a second "filled" for the same order changes nothing (a block is added, and
paid for, once). A fill that arrives after the order timed out is adopted (its nodes are ours and cost
money), never dropped. A fill for an order we never placed (a restart artifact) is adopted into the group
of its shape, so every purchase is accounted for.
"""

from __future__ import annotations

from decimal import Decimal

from scalar.domain.errors import DomainError
from scalar.domain.gpus import canonical_gpu_model
from scalar.domain.market import BlockGrant, NodeState, Order, OrderState
from scalar.domain.money import usd_text
from scalar.domain.packing_model import Block, Node
from scalar.domain.reasons import Reason
from scalar.domain.timefmt import exact_seconds
from scalar.engine.config import ControllerConfig
from scalar.engine.groups import group_name
from scalar.engine.lifecycle import OPEN_ORDER_STATES, OrderStatus
from scalar.engine.state import BlockRecord, ClusterState, GroupRecord, NodeRecord, OrderRecord, SliceRecord
from scalar.engine.transitions import back_off

_HOUR = Decimal(3600)


def on_order_updated(state: ClusterState, config: ControllerConfig, action_id: str, order: Order) -> None:
    rec = state.orders.get(action_id)
    if rec is None:
        if order.state is not OrderState.FILLED or order.block is None:
            state.note(
                "order", action_id, Reason("unknown_order", f"no purchase {action_id} was placed; ignored")
            )
            return
        rec = _adopt_unknown(state, action_id, order)
    if order.state is OrderState.PENDING:
        if rec.status is OrderStatus.PLACED:
            rec.seller_order_id = order.order_id
            state.move_order(
                rec,
                OrderStatus.ACKNOWLEDGED,
                Reason("acknowledged", f"seller order {order.order_id} accepted, not yet matched"),
            )
        return
    if order.state is OrderState.FILLED:
        _fill(state, config, rec, order)
        return
    if rec.status not in OPEN_ORDER_STATES and rec.status is not OrderStatus.EXPIRED:
        state.note(
            "order",
            rec.key,
            Reason("stale_answer", f"seller says {order.state.value}; order is already {rec.status}"),
        )
        return
    target = OrderStatus.REJECTED if order.state is OrderState.REJECTED else OrderStatus.CANCELLED
    why = order.reason or order.state.value
    reason = Reason(
        f"order_{target.value}",
        f"the seller {target.value} order {rec.key} ({rec.request.node_count}x {rec.request.instance_type} at "
        f"{rec.request.provider}): {why}",
        "nodes",
        rec.request.node_count,
        0,
    )
    was_open = rec.status in OPEN_ORDER_STATES
    state.move_order(rec, target, reason)
    for sid in rec.slice_ids:
        sl = state.slices[sid]
        if sl.state is NodeState.REQUESTING:
            state.move_slice(sl, NodeState.FAILED, reason)
    group = state.groups.get(rec.group)
    if group is not None and was_open:
        back_off(state, config, group, reason)


def _adopt_unknown(state: ClusterState, key: str, order: Order) -> OrderRecord:
    request = order.request
    name = group_name(request.provider, request.instance_type, request.spot, request.tier)
    if name not in state.groups:
        state.groups[name] = GroupRecord(
            name, None, request.provider, request.instance_type, request.tier, request.spot
        )
    reason = Reason("adopted", f"a filled order {key} we have no record of; adopted into {name}")
    rec = OrderRecord(key, name, request, state.at, (), reason)
    state.orders[key] = rec
    state.move_order(rec, OrderStatus.PLACED, reason)
    return rec


def _block_of(grant: BlockGrant, rec: OrderRecord) -> Block:
    return Block(
        id=grant.block_id,
        provider=grant.provider,
        instance_type=grant.instance_type,
        gpus_per_node=grant.gpus_per_node,
        vram_per_gpu_gb=grant.vram_per_gpu_gb,
        cpu_per_node=grant.cpu_per_node,
        ram_per_node_gb=grant.ram_per_node_gb,
        start_time=grant.start_time,
        end_time=grant.end_time,
        cost_per_hour=grant.price_per_gpu_hour * grant.gpus_per_node,
        tier=rec.request.tier,
        gpu_model=canonical_gpu_model(grant.gpu_model, grant.vram_per_gpu_gb) if grant.gpu_model else None,
        cuda_version=grant.cuda_version,
        driver_version=grant.driver_version,
    )


def _fill(state: ClusterState, config: ControllerConfig, rec: OrderRecord, order: Order) -> None:
    grant = order.block
    if rec.status is OrderStatus.FILLED:
        state.note(
            "order", rec.key, Reason("duplicate_fill", f"order {rec.key} is already filled; nothing changes")
        )
        return
    if grant is None or grant.block_id in state.blocks or any(n in state.nodes for n in grant.node_ids):
        why = (
            "without a block"
            if grant is None
            else f"with block {grant.block_id}, whose block or nodes are already ours"
        )
        state.note(
            "order", rec.key, Reason("bad_fill", f"seller reported order {rec.key} filled {why}; ignored")
        )
        return
    try:
        block = _block_of(grant, rec)
        nodes = [Node.empty(node_id, block) for node_id in grant.node_ids]
    except DomainError as err:
        state.note(
            "order",
            rec.key,
            Reason("bad_fill", f"the grant for order {rec.key} is invalid: {err.message}; ignored"),
        )
        return
    late = rec.status in (OrderStatus.EXPIRED, OrderStatus.REJECTED, OrderStatus.CANCELLED)
    hours = exact_seconds(grant.end_time - grant.start_time) / _HOUR
    committed = grant.price_per_gpu_hour * grant.gpus_per_node * len(grant.node_ids) * hours
    reason = Reason(
        "filled",
        f"order {rec.key} filled{f' after it was {rec.status} (adopted)' if late else ''}: block {grant.block_id}, "
        f"{len(grant.node_ids)}x {grant.instance_type} at {usd_text(grant.price_per_gpu_hour)}/GPU-h until "
        f"{grant.end_time.isoformat()}",
        "nodes",
        rec.request.node_count,
        len(grant.node_ids),
    )
    rec.block_id = grant.block_id
    rec.seller_order_id = order.order_id
    state.move_order(rec, OrderStatus.FILLED, reason)
    state.blocks[grant.block_id] = BlockRecord(
        grant, block, rec.group, rec.key, tuple(grant.node_ids), state.at, committed
    )
    group = state.groups.get(rec.group)
    if group is not None:
        group.failures = 0
    _assign_nodes(state, rec, nodes, reason)


def _assign_nodes(state: ClusterState, rec: OrderRecord, nodes: list[Node], reason: Reason) -> None:
    """Hand the granted nodes to the order's REQUESTING slices in order; extra nodes form new slices."""
    waiting = [state.slices[s] for s in rec.slice_ids if state.slices[s].state is NodeState.REQUESTING]
    group = state.groups.get(rec.group)
    unit = rec.gang_size or (group.slice_size if group is not None else 1)
    queue = list(nodes)
    for sl in waiting:
        take, queue = queue[: sl.nodes_wanted], queue[sl.nodes_wanted :]
        if not take:
            state.move_slice(
                sl,
                NodeState.FAILED,
                Reason("short_fill", f"the seller granted fewer nodes than order {rec.key} asked for"),
            )
            continue
        _boot(state, rec, sl, take, reason)
        state.move_slice(sl, NodeState.BOOTING, reason)
    while queue:
        take, queue = queue[:unit], queue[unit:]
        sl = SliceRecord(state.next_id("slice"), rec.group, rec.key, len(take), rec.gang_size, state.at)
        rec.slice_ids.append(sl.id)
        _boot(state, rec, sl, take, reason)
        state.add_slice(sl, NodeState.BOOTING, reason)


def _boot(state: ClusterState, rec: OrderRecord, sl: SliceRecord, nodes: list[Node], reason: Reason) -> None:
    for node in nodes:
        sl.node_ids.append(node.id)
        record = NodeRecord(
            node=node,
            state=NodeState.BOOTING,
            group=rec.group,
            slice_id=sl.id,
            block_id=node.block_id,
            created_at=state.at,
            state_at=state.at,
        )
        state.create_node(record, reason)
