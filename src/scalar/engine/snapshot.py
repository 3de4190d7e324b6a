"""The controller's decision state as a plain JSON value, and back: what another process needs to run the
controller's own decision code on the cluster as the leader last saw it.

``snapshot(state)`` keeps what a step decides with: the live jobs (pending, scheduled, running), the open
blocks and their nodes, the live slices, the purchases still open or holding capacity, every scale group
with its offer, the market's offers and books, the arrival forecast and the id counters. The story, the
finished jobs and the routing history are left out (a step only appends to them). The scale groups, offers and
books are a separate value (``market_snapshot``), large and changed only by the market (``market_key``
says when), so a writer need not rewrite them every step. ``restore(data, market)`` rebuilds a
``ClusterState`` from both; a ``Controller`` given that state steps exactly as the leader's would
from the same point (``runtime/preview.py``: the cost preview submits the job to such a copy and reads the
actions). Encoding is ``engine.codec``'s, so the value round-trips exactly (``Decimal`` as strings).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from scalar.domain.offers import Offer
from scalar.domain.packing_model import Job
from scalar.domain.packing_scalar import Prior, Shape, ShapeWindow
from scalar.domain.tier import Tier
from scalar.engine.budget import BudgetLimit
from scalar.engine.codec import CodecError, decode, encode
from scalar.engine.events import MarketBook
from scalar.engine.lifecycle import OPEN_ORDER_STATES, JobState
from scalar.engine.state import (
    BlockRecord,
    ClusterState,
    GroupRecord,
    JobRecord,
    NodeRecord,
    OrderRecord,
    SliceRecord,
)

SNAPSHOT_VERSION = 1
LIVE_JOB_STATES = frozenset({JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING})


def market_key(state: ClusterState) -> tuple[object, ...]:
    """Changes whenever ``market_snapshot`` would: the offers seen, and each group's backoff."""
    return (
        state.offers_version,
        len(state.groups),
        tuple((g.backoff_until, g.failures) for g in state.groups.values()),
    )


def market_snapshot(state: ClusterState) -> dict[str, Any]:
    """The scale groups (without their ranks: a restored state ranks them again from the same offers and
    the same demand), the offers and the books: the large part, which changes only with the market."""
    groups = [
        [k, encode(replace(g, priority=None, rank_reasons=(), excluded=None))]
        for k, g in state.groups.items()
    ]
    return {
        "version": SNAPSHOT_VERSION,
        "offers_version": state.offers_version,
        "groups": groups,
        "offers": _pairs(state.offers),
        "books": _pairs(state.books),
    }


def snapshot(state: ClusterState, budgets: tuple[BudgetLimit, ...] = ()) -> dict[str, Any]:
    """The decision state but the market's part (``market_snapshot``) as JSON-ready values, with the spend
    limits in force (``ControllerConfig.budgets``: the log's ``BudgetsChanged`` replaces the configured ones,
    and a purchase step holds back what they forbid)."""
    blocks = {k: b for k, b in state.blocks.items() if b.open}
    slices = {k: state.slices[k] for k in state.live_slice_ids}
    node_ids = {n for b in blocks.values() for n in b.node_ids} | {
        n for s in slices.values() for n in s.node_ids
    }
    nodes = {k: n for k, n in state.nodes.items() if k in node_ids}
    for n in nodes.values():
        if n.slice_id in state.slices:
            slices.setdefault(n.slice_id, state.slices[n.slice_id])
    order_keys = {s.order_key for s in slices.values() if s.order_key} | {
        b.order_key for b in blocks.values() if b.order_key
    }
    orders = {k: o for k, o in state.orders.items() if k in order_keys or o.status in OPEN_ORDER_STATES}
    jobs = {k: _published(state, j) for k, j in state.jobs.items() if j.state in LIVE_JOB_STATES}
    return {
        "version": SNAPSHOT_VERSION,
        "now": encode(state.now),
        "steps": state.steps,
        "counters": dict(state.counters),
        "offers_version": state.offers_version,
        "arrivals": {t.value: [encode(a) for a in seen] for t, seen in state.arrivals.items()},
        "jobs": _pairs(jobs),
        "pending_ids": list(state.pending_ids),
        "nodes": _pairs(nodes),
        "blocks": _pairs(blocks),
        "slices": _pairs(slices),
        "live_slice_ids": list(state.live_slice_ids),
        "orders": _pairs(orders),
        "next_schedule_at": encode(state.next_schedule_at),
        "budgets": encode(budgets),
        # the packer's online prior and the contract sizing's arrival forecast: both decide
        "shapes": _window(state.shapes),
        "arrived_jobs": [[encode(at), encode(job)] for at, job in state.arrived_jobs],
    }


def _published(state: ClusterState, rec: JobRecord) -> JobRecord:
    """The job as published: with the placement summary the last scheduling pass gave it even when the pass
    passed over it without visiting it (``ClusterState.placement_of``)."""
    placement = state.placement_of(rec)
    return rec if placement is rec.placement else replace(rec, placement=placement)


def _window(w: ShapeWindow) -> dict[str, Any]:
    return {
        "seen": [[encode(k), v] for k, v in w.seen.items()],
        "arrived": w.arrived,
        "base": w.base,
        "next_learn": w.next_learn,
        "prior": [[encode(k), v] for k, v in w.prior.weights.items()],
        "learnt": w.learnt,
    }


def _unwindow(raw: Any) -> ShapeWindow:
    if raw is None:
        return ShapeWindow()
    if not isinstance(raw, dict):
        raise CodecError("shapes", f"expected an object, got {type(raw).__name__}")

    def weights(key: str) -> dict[Shape, float]:
        pairs = raw.get(key, [])
        if not isinstance(pairs, list):
            raise CodecError(f"shapes.{key}", "expected a list of [shape, weight] pairs")
        return {
            decode(Shape, p[0], f"shapes.{key}[{i}]"): decode(float, p[1], f"shapes.{key}[{i}]")
            for i, p in enumerate(pairs)
        }

    return ShapeWindow(
        seen=weights("seen"),
        arrived=decode(int, raw.get("arrived", 0), "shapes.arrived"),
        base=decode(int, raw.get("base", 0), "shapes.base"),
        next_learn=decode(int, raw.get("next_learn", 1), "shapes.next_learn"),
        prior=Prior(weights("prior")),
        learnt=decode(int, raw.get("learnt", 0), "shapes.learnt"),
    )


def _pairs(records: Mapping[str, Any]) -> list[list[Any]]:
    """``[[key, value], ...]`` in the dict's own order (iteration order is part of what a step decides)."""
    return [[k, encode(v)] for k, v in records.items()]


def _unpair(tp: Any, raw: Any, path: str) -> dict[str, Any]:
    if not isinstance(raw, list):
        raise CodecError(path, f"expected a list of [key, value] pairs, got {type(raw).__name__}")
    out: dict[str, Any] = {}
    for i, pair in enumerate(raw):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise CodecError(f"{path}[{i}]", "expected a [key, value] pair")
        out[pair[0]] = decode(tp, pair[1], f"{path}.{pair[0]}")
    return out


def budgets_of(data: Mapping[str, Any]) -> tuple[BudgetLimit, ...]:
    """The spend limits a snapshot was taken under."""
    return tuple(decode(tuple[BudgetLimit, ...], data.get("budgets", []), "budgets"))


def restore(data: Mapping[str, Any], market: Mapping[str, Any]) -> ClusterState:
    """A ``ClusterState`` from ``snapshot``'s and ``market_snapshot``'s values; ``CodecError`` names what
    does not decode."""
    for name, part in (("snapshot", data), ("market", market)):
        if part.get("version") != SNAPSHOT_VERSION:
            raise CodecError(
                f"{name}.version", f"expected version {SNAPSHOT_VERSION}, got {part.get('version')!r}"
            )
    s = ClusterState()
    s.now = decode(datetime | None, data.get("now"), "now")
    s.steps = decode(int, data.get("steps", 0), "steps")
    s.counters = decode(dict[str, int], data.get("counters", {}), "counters")
    s.offers_version = decode(int, data.get("offers_version", 0), "offers_version")
    arrivals = decode(dict[str, list[datetime]], data.get("arrivals", {}), "arrivals")
    s.arrivals = {Tier(k): deque(v) for k, v in arrivals.items()}
    s.jobs = _unpair(JobRecord, data.get("jobs", []), "jobs")
    s.pending_ids = dict.fromkeys(
        j for j in decode(list[str], data.get("pending_ids", []), "pending_ids") if j in s.jobs
    )
    s.nodes = _unpair(NodeRecord, data.get("nodes", []), "nodes")
    s.blocks = _unpair(BlockRecord, data.get("blocks", []), "blocks")
    s.slices = _unpair(SliceRecord, data.get("slices", []), "slices")
    live = decode(list[str], data.get("live_slice_ids", []), "live_slice_ids")
    s.live_slice_ids = dict.fromkeys(k for k in live if k in s.slices)
    s.orders = _unpair(OrderRecord, data.get("orders", []), "orders")
    s.groups = _unpair(GroupRecord, market.get("groups", []), "groups")
    s.offers = _unpair(tuple[Offer, ...], market.get("offers", []), "offers")
    s.books = _unpair(MarketBook, market.get("books", []), "books")
    s.next_schedule_at = decode(datetime | None, data.get("next_schedule_at"), "next_schedule_at")
    s.restartable_held = {
        k: None for k, j in s.jobs.items() if j.job is not None and j.job.restartable and j.parts
    }
    s.shapes = _unwindow(data.get("shapes"))
    s.rebuild_pending_index()
    arrived = data.get("arrived_jobs", [])
    if not isinstance(arrived, list):
        raise CodecError("arrived_jobs", "expected a list of [time, job] pairs")
    s.arrived_jobs = deque(
        (decode(datetime, p[0], f"arrived_jobs[{i}]"), decode(Job, p[1], f"arrived_jobs[{i}]"))
        for i, p in enumerate(arrived)
    )
    s.schedule_dirty = True
    s.priorities_key = None  # ranked again at the next step, from the same offers: the same ranks
    return s
