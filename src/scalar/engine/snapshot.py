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

The live jobs are most of the value (100,000 pending jobs: tens of MB) and few change in a step, so the
value is made of two kinds of part that a writer can store apart (``runtime/snapshot_writer.py``):
``header(state)``, everything but the jobs (small: the cluster, counters, the last scheduling pass's
placement summaries for the jobs it skipped), and one ``job_part(state, rec)`` per live job (its record with
its own placement summary, and its key in the queue), which changes only when the record does
(``JobRecord.changed``). ``snapshot(state)`` is the header with every job's part, in ``state.jobs`` order;
``restore`` takes that value, whichever way it was assembled. A skipped job's summary is resolved on read
from the published skip log and queue keys (``ClusterState.placement_of``), exactly as on the leader.
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
from scalar.engine.pending_index import OrderKey, PendingIndex, shape_of
from scalar.engine.state import (
    BlockRecord,
    ClusterState,
    GroupRecord,
    JobRecord,
    NodeRecord,
    OrderRecord,
    PlacementSummary,
    SkipLog,
    SliceRecord,
)

SNAPSHOT_VERSION = 2
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
    and a purchase step holds back what they forbid): ``header`` with every live job's ``job_part``."""
    jobs = [[k, job_part(state, j)] for k, j in state.jobs.items() if j.state in LIVE_JOB_STATES]
    arrived = [arrived_part(a) for a in state.arrived_jobs]
    nodes = _pairs(published_nodes(state))
    return {**header(state, budgets), "jobs": jobs, "nodes": nodes, "arrived_jobs": arrived}


def published_nodes(state: ClusterState) -> dict[str, NodeRecord]:
    """The nodes a snapshot holds: those of the open blocks and of the live slices, in ``state.nodes``
    order (each published as ``encode(record)``)."""
    node_ids = {n for b in state.blocks.values() if b.open for n in b.node_ids} | {
        n for k in state.live_slice_ids for n in state.slices[k].node_ids
    }
    return {k: n for k, n in state.nodes.items() if k in node_ids}


def job_part(state: ClusterState, rec: JobRecord) -> dict[str, Any]:
    """One live job as published: its record (with its own placement summary) and, while it is queued, its
    order key (``engine/pending_index.py``), by which a skipped job's summary is resolved and the queue's
    order restored."""
    entry = state.pending_index.entries.get(rec.spec.job_id)
    return {"record": encode(rec), "key": None if entry is None else encode(entry[0])}


def arrived_part(arrived: tuple[datetime, Job]) -> list[Any]:
    """One job of the demand forecast (``ClusterState.arrived_jobs``: appended as jobs arrive, forgotten
    from the front after ``contract_sizing.FORECAST_HOURS``) as published: ``[time, job]``."""
    return [encode(arrived[0]), encode(arrived[1])]


def header(
    state: ClusterState,
    budgets: tuple[BudgetLimit, ...] = (),
    nodes: Mapping[str, NodeRecord] | None = None,
) -> dict[str, Any]:
    """Everything ``snapshot`` holds but the live jobs, the nodes (``nodes``: ``published_nodes``, if the
    caller has them) and the demand forecast's jobs: small (the blocks, slices and orders of the cluster, the
    counters, the arrival counts, the last scheduling pass's skip log)."""
    blocks = {k: b for k, b in state.blocks.items() if b.open}
    slices = {k: state.slices[k] for k in state.live_slice_ids}
    if nodes is None:
        nodes = published_nodes(state)
    for n in nodes.values():
        if n.slice_id in state.slices:
            slices.setdefault(n.slice_id, state.slices[n.slice_id])
    order_keys = {s.order_key for s in slices.values() if s.order_key} | {
        b.order_key for b in blocks.values() if b.order_key
    }
    orders = {k: o for k, o in state.orders.items() if k in order_keys or o.status in OPEN_ORDER_STATES}
    indexed = state.pending_index.entries
    unindexed = len(indexed) != len(state.pending_ids)  # a pending job without a key: the order in full
    return {
        "version": SNAPSHOT_VERSION,
        "now": encode(state.now),
        "observed_since": encode(state.observed_since),
        "steps": state.steps,
        "counters": dict(state.counters),
        "offers_version": state.offers_version,
        "arrivals": {t.value: _runs(seen) for t, seen in state.arrivals.items()},
        "pending_ids": list(state.pending_ids) if unindexed else None,
        "pending_seq": state.pending_index.seq,
        "skipped": _skip_log(state),
        "blocks": _pairs(blocks),
        "slices": _pairs(slices),
        "live_slice_ids": list(state.live_slice_ids),
        "orders": _pairs(orders),
        "next_schedule_at": encode(state.next_schedule_at),
        "budgets": encode(budgets),
        # the preemptions seen per spot group (the cost band's learned hazards)
        "spot_seen": {g: [n, held_s] for g, (n, held_s) in state.spot_seen.items()},
        "boot_seen": {p: [n, total_s] for p, (n, total_s) in state.boot_seen.items()},
        # the packer's online prior and the contract sizing's arrival forecast: both decide
        "shapes": _window(state.shapes),
    }


def _runs(times: deque[datetime]) -> list[list[Any]]:
    """Arrival times as ``[time, how many in a row]`` (a step's arrivals share its time)."""
    runs: list[list[Any]] = []
    last: datetime | None = None
    for t in times:
        if runs and t == last:
            runs[-1][1] += 1
        else:
            runs.append([t, 1])
            last = t
    return [[encode(t), n] for t, n in runs]


def _unruns(raw: Any, path: str) -> deque[datetime]:
    runs = decode(list[tuple[datetime, int]], raw, path)
    return deque(t for t, n in runs for _ in range(n))


def _skip_log(state: ClusterState) -> dict[str, Any] | None:
    """The last pass's ``SkipLog`` with each shape named by a queued job of it (the reader takes the shape
    from that job); failures of shapes no longer queued are left out (no queued job resolves to them)."""
    log = state.skipped
    if log is None:
        return None
    failures = []
    for shape, (keys, summaries) in log.failures.items():
        queue = state.pending_index.queues.get(shape)
        if not queue:
            continue
        failures.append([queue.ids[0][0], [encode(k) for k in keys], [encode(x) for x in summaries]])
    return {
        "upto": log.upto,
        "visited": sorted(log.visited),
        "failures": failures,
        "clears": [encode(k) for k in log.clears],
    }


def _unskip(raw: Any, state: ClusterState) -> SkipLog | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise CodecError("skipped", f"expected an object, got {type(raw).__name__}")
    log = SkipLog(
        upto=decode(int, raw.get("upto", 0), "skipped.upto"),
        visited=set(decode(list[str], raw.get("visited", []), "skipped.visited")),
        clears=decode(list[OrderKey], raw.get("clears", []), "skipped.clears"),
    )
    for i, item in enumerate(raw.get("failures", [])):
        path = f"skipped.failures[{i}]"
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
            raise CodecError(path, "expected [job id, keys, summaries]")
        rec = state.jobs.get(item[0])
        if rec is None or rec.job is None:
            raise CodecError(path, f"names job {item[0]!r}, which is not a queued job of the snapshot")
        shape = shape_of(rec.job, bool(rec.spec.command))
        keys = decode(list[OrderKey], item[1], f"{path}.keys")
        summaries = decode(list[PlacementSummary], item[2], f"{path}.summaries")
        log.failures[shape] = (keys, summaries)
    return log


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
    s.observed_since = decode(datetime | None, data.get("observed_since"), "observed_since")
    s.steps = decode(int, data.get("steps", 0), "steps")
    s.counters = decode(dict[str, int], data.get("counters", {}), "counters")
    s.spot_seen = decode(dict[str, tuple[int, float]], data.get("spot_seen", {}), "spot_seen")
    s.boot_seen = decode(dict[str, tuple[int, float]], data.get("boot_seen", {}), "boot_seen")
    s.offers_version = decode(int, data.get("offers_version", 0), "offers_version")
    arrivals = data.get("arrivals", {})
    if not isinstance(arrivals, dict):
        raise CodecError("arrivals", "expected an object of tiers")
    s.arrivals = {Tier(k): _unruns(v, f"arrivals.{k}") for k, v in arrivals.items()}
    keys = _restore_jobs(s, data.get("jobs", []))
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
    _restore_queue(s, keys, data.get("pending_ids"), decode(int, data.get("pending_seq", 0), "pending_seq"))
    s.skipped = _unskip(data.get("skipped"), s)
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


def _restore_jobs(s: ClusterState, raw: Any) -> dict[str, OrderKey]:
    """The jobs of ``snapshot``'s ``jobs`` pairs into ``s.jobs``; returns the queued ones' order keys."""
    if not isinstance(raw, list):
        raise CodecError("jobs", f"expected a list of [id, part] pairs, got {type(raw).__name__}")
    keys: dict[str, OrderKey] = {}
    for i, pair in enumerate(raw):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise CodecError(f"jobs[{i}]", "expected a [job id, part] pair")
        job_id, part = pair
        if not isinstance(part, dict):
            raise CodecError(f"jobs.{job_id}", "expected an object with record and key")
        s.jobs[job_id] = decode(JobRecord, part.get("record"), f"jobs.{job_id}.record")
        if part.get("key") is not None:
            keys[job_id] = decode(OrderKey, part["key"], f"jobs.{job_id}.key")
    return keys


def _restore_queue(s: ClusterState, keys: dict[str, OrderKey], pending: Any, seq: int) -> None:
    """``pending_ids`` and the pending index as the leader had them: each queued job under its own key, in
    the order they became PENDING (their keys' sequence numbers), unless the order came in full."""
    if pending is None:
        order = sorted((k[3], j) for j, k in keys.items() if s.jobs[j].state is JobState.PENDING)
        s.pending_ids = dict.fromkeys(j for _, j in order)
    else:
        s.pending_ids = dict.fromkeys(j for j in decode(list[str], pending, "pending_ids") if j in s.jobs)
    s.pending_index = PendingIndex()
    for job_id in s.pending_ids:
        rec = s.jobs[job_id]
        if rec.job is not None:
            s.pending_index.add(job_id, rec.job, bool(rec.spec.command), keys.get(job_id))
    s.pending_index.seq = max(seq, s.pending_index.seq)
