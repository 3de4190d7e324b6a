"""The cluster as the API shows it: job explanations, the GPU slot map and the contracts (docs/api.md).

Everything here reads the store (the projections the leader writes each step, and the decisions), so a
follower process answers too. What only the leader's in-memory controller knows (node rejections counted
by reason, the last routing decision) is added when this process leads, and each answer says where it
came from (``source``: ``leader`` or ``store``) with a note on what a follower cannot show.

Money is exact: decimal strings (``"2.370000"``) as in the projections. Times are ISO 8601.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

from scalar.domain.money import micros_text
from scalar.domain.timefmt import parse_iso
from scalar.engine import Controller
from scalar.engine.queries import JobExplanation
from scalar.runtime.leader import Leader
from scalar.runtime.settings import Settings
from scalar.store import Store, Tx
from scalar.store.projections import Projection

T = TypeVar("T")
# The longest a read waits for the leader's in-memory state while a step is being computed (then it answers
# from the projections alone, as an API replica does).
LEADER_WAIT_S = 0.05
ALL_ROWS = 1_000_000
HOUR = Decimal(3600)
LIVE_JOB_STATES = ("SCHEDULED", "RUNNING")
GONE_NODE_STATES = ("terminated", "failed")
IN_FLIGHT_ORDERS = ("placed", "acknowledged")
BLOCK_STATUSES = ("open", "released", "ended")
# The few fields a view needs of thousands of job rows (the database extracts them: no whole documents).
ON_GPU_FIELDS = {"placements": "text", "vram_per_gpu_gb": "float"}  # placements: JSON text
QUEUE_FIELDS = {"priority": "int", "submitted_at": "text"}
NODE_TOTAL_FIELDS = {
    "state": "text",
    "gpu_count": "int",
    "gpus_free": "int",
    "vram_per_gpu_gb": "float",
}
FOLLOWER_NOTE = (
    "this process does not lead: {what} is known only to the leader's controller"
    " (ask the leading process, see GET /healthz lease_holder)"
)


def iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def rows(tx: Tx, table: str, state: str | None = None) -> list[Projection]:
    return tx.list_projection(table, state, limit=ALL_ROWS)


@dataclass(frozen=True, slots=True)
class BlockCost:
    """One contract's spend as of ``now``: its accounting carried forward to ``now`` by the rule ``GET /costs``
    uses (``views_market.block_account``), so /blocks, /status and /metrics show the spend /costs does."""

    data: dict[str, Any]
    provider: str
    gpus: int
    price_per_gpu_hour: Decimal
    start: datetime
    end: datetime
    committed: Decimal
    accrued: Decimal

    @property
    def rate_per_hour(self) -> Decimal:
        return self.price_per_gpu_hour * self.gpus

    @property
    def held_s(self) -> Decimal:
        """Seconds paid for so far (accrued / rate), so the spend can be drawn over time."""
        rate = self.rate_per_hour
        return self.accrued * HOUR / rate if rate else Decimal(0)


def block_cost(row: Projection, now: datetime) -> BlockCost:
    """``row``'s contract as of ``now``. ``accrued`` is the engine's accounting carried forward exactly as
    ``GET /costs`` carries it (one function, ``views_market.block_account``): from the step that wrote it
    (``accounted_at``) at the GPUs still paid for (``paid_gpus``: a seller billing running time no longer
    bills a node released alone, preempted or failed). ``gpus`` is the contract's size (every node's
    GPUs), and ``rate_per_hour`` its price for all of them."""
    from scalar.runtime.views_market import block_account  # it builds on this module: import at call

    data = row.data
    gpus = int(data.get("gpus_per_node", 0)) * len(data.get("node_ids", []))
    price = Decimal(data["price_per_gpu_hour"])
    start, end = parse_iso(data["start_time"]), parse_iso(data["end_time"])
    assert start is not None and end is not None
    accrued = block_account(row, now).accrued
    return BlockCost(
        data, str(data["provider"]), gpus, price, start, end, Decimal(data["committed"]), accrued
    )


class ClusterViews:
    """Read-only answers for ``GET /jobs/{id}/explain``, ``/nodes``, ``/blocks`` (and, in views_market.py,
    ``/autoscaler/status``, ``/costs`` and ``/metrics``)."""

    def __init__(self, store: Store, leader: Leader, settings: Settings, clock: Callable[[], datetime]):
        self.store = store
        self.leader = leader
        self.settings = settings
        self.clock = clock

    def with_controller(self, read: Callable[[Controller], T]) -> T | None:
        """``read(controller)`` under the leader's lock when this process leads and is between steps, else
        ``None`` (the answer then comes from the projections alone, as on an API replica): a read waits at
        most ``LEADER_WAIT_S`` for a step in progress."""
        if not self.leader.lock.acquire(timeout=LEADER_WAIT_S):
            return None
        try:
            controller = self.leader.controller
            if controller is None or self.leader.fence is None:
                return None
            return read(controller)
        finally:
            self.leader.lock.release()

    # ---- GET /jobs/{id}/explain ------------------------------------------------------------------------

    def explain(self, job_id: str, story_limit: int = 100) -> dict[str, Any] | None:
        now = self.clock()
        with self.store.read() as tx:
            row = tx.get_projection("jobs", job_id)
            if row is None:
                return None
            story = tx.story(job_id, limit=story_limit)
            pending = tx.list_projection_fields("jobs", QUEUE_FIELDS, "PENDING")
            orders = rows(tx, "orders")
            nodes = tx.list_projection_fields("nodes", {"ready_at": "text"})
        job = row.data
        known: JobExplanation | None = self.with_controller(lambda c: c.explain(job_id))
        notes: list[str] = []
        position, length = queue_position(job_id, pending)
        placement: dict[str, Any] | None = None
        routing: dict[str, Any] | None = None
        validation: list[dict[str, Any]] = []
        if known is not None:
            if known.queue_position is not None or job["state"] == "PENDING":
                position, length = known.queue_position, known.queue_length
            if known.placement is not None:
                p = known.placement
                placement = {
                    "kind": p.kind,
                    "message": p.message,
                    "at": iso(p.at),
                    "node_ids": list(p.node_ids),
                    "nodes_rejected": sum(r.count for r in p.rejections),
                    "rejections": [
                        {"code": r.code, "count": r.count, "example": r.example} for r in p.rejections
                    ],
                }
            if known.routing is not None:
                routing = {"group": known.routing_group, **known.routing.to_dict()}
            validation = [r.to_dict() for r in known.validation]
        elif job["state"] == "PENDING" and self.with_controller(lambda c: True):
            notes.append(
                "the controller has not stepped this job yet (it waits in the inbox); ask again shortly"
            )
        elif job["state"] == "PENDING":
            notes.append(FOLLOWER_NOTE.format(what="which nodes were rejected and its routing decision"))
        purchase = purchase_for(job_id, orders, nodes, now, self.settings)
        lines = explanation_lines(job, position, length, placement, routing, purchase, known)
        return {
            "job_id": job_id,
            "name": job.get("name"),
            "state": job["state"],
            "reason": job.get("reason"),
            "reason_code": job.get("reason_code"),
            "summary": lines[0],
            "source": "leader" if known is not None else "store",
            "queue_position": position,
            "queue_length": length,
            "waiting_s": waiting_s(job, now),
            "placement": placement,
            "routing": routing,
            "purchase": purchase,
            "validation": validation,
            "lines": lines,
            "story": [
                {
                    "at": iso(d.at),
                    "code": d.code,
                    "message": d.message,
                    "kind": (d.data or {}).get("kind"),
                    "from": (d.data or {}).get("from"),
                    "to": (d.data or {}).get("to"),
                }
                for d in story
            ],
            "notes": notes,
            "at": iso(now),
        }

    # ---- GET /nodes ------------------------------------------------------------------------------------

    def nodes(
        self,
        include_gone: bool = False,
        limit: int | None = None,
        after: str | None = None,
        descending: bool = False,
    ) -> dict[str, Any]:
        """The slot map: ``nodes`` in id order (``descending``: the other way), at most ``limit`` of them
        past the node id ``after``; ``totals`` are always the whole fleet's (so every node row is read)."""
        now = self.clock()
        with self.store.read() as tx:
            node_rows = tx.list_projection_fields("nodes", NODE_TOTAL_FIELDS)
            job_rows = [
                r for s in LIVE_JOB_STATES for r in tx.list_projection_fields("jobs", ON_GPU_FIELDS, s)
            ]
            # the placements come as JSON text and are decoded in one call (thousands of small decodes
            # cost most of this view's time)
            texts = [j.data.get("placements") or "[]" for j in job_rows]
            decoded = json.loads("[" + ",".join(texts) + "]")
            on_gpu: dict[tuple[str, int], list[tuple[str, float]]] = {}
            for j, placements in zip(job_rows, decoded, strict=True):
                for p in placements or []:
                    for index in p.get("gpu_indices", []):
                        key = (p["node_id"], int(index))
                        on_gpu.setdefault(key, []).append((j.id, float(j.data.get("vram_per_gpu_gb") or 0)))
            by_state: dict[str, int] = {}
            light = []
            for r in node_rows:
                by_state[r.state or "unknown"] = by_state.get(r.state or "unknown", 0) + 1
                if not include_gone and r.state in GONE_NODE_STATES:
                    continue
                light.append({**r.data, "node_id": r.id})
            totals = fleet_totals(light, on_gpu, by_state)
            shown = keyset_slice(light, "node_id", limit, after, descending)
            # the page's nodes whole (the totals needed only a few fields of each)
            whole = tx.get_projections("nodes", [str(n["node_id"]) for n in shown])
        out = [
            slot_row(w.data, on_gpu, now) for n in shown if (w := whole.get(str(n["node_id"]))) is not None
        ]
        return {"nodes": out, "count": len(out), "totals": totals, "at": iso(now)}

    # ---- GET /blocks -----------------------------------------------------------------------------------

    def blocks(
        self,
        status: str | None = None,
        limit: int | None = None,
        after: str | None = None,
        descending: bool = False,
    ) -> dict[str, Any]:
        """Contracts in id order (``descending``: the other way), at most ``limit`` past the block id
        ``after``; ``totals`` are over every block in ``status``."""
        now = self.clock()
        with self.store.read() as tx:
            block_rows = rows(tx, "blocks", status)
        out = []
        committed = accrued = open_rate = Decimal(0)
        gpus = 0
        for r in block_rows:
            cost = block_cost(r, now)
            d = cost.data
            expires_in = (cost.end - now).total_seconds() if r.state == "open" else None
            out.append(
                {
                    "block_id": r.id,
                    "provider": cost.provider,
                    "instance_type": d.get("instance_type"),
                    "group": d.get("group"),
                    "order_key": d.get("order_key"),
                    "status": r.state,
                    "node_ids": list(d.get("node_ids", [])),
                    "node_count": len(d.get("node_ids", [])),
                    "gpus_per_node": d.get("gpus_per_node"),
                    "gpu_count": cost.gpus,
                    "price_per_gpu_hour": micros_text(cost.price_per_gpu_hour),
                    "price_per_hour": micros_text(cost.rate_per_hour),
                    "start_time": iso(cost.start),
                    "end_time": iso(cost.end),
                    "expires_in_s": None if expires_in is None else round(max(0.0, expires_in), 3),
                    "committed": micros_text(cost.committed),
                    "accrued": micros_text(cost.accrued),
                }
            )
            committed += cost.committed
            accrued += cost.accrued
            if r.state == "open":
                open_rate += cost.rate_per_hour
                gpus += cost.gpus
        totals = {
            "blocks": len(out),
            "open_blocks": sum(1 for b in out if b["status"] == "open"),
            "open_gpus": gpus,
            "open_price_per_hour": micros_text(open_rate),
            "committed": micros_text(committed),
            "accrued": micros_text(accrued),
        }
        shown = keyset_slice(out, "block_id", limit, after, descending)
        return {"blocks": shown, "count": len(shown), "status": status, "totals": totals, "at": iso(now)}


# ---- helpers ---------------------------------------------------------------------------------------------


def keyset_slice(
    items: list[dict[str, Any]], key: str, limit: int | None, after: str | None, descending: bool
) -> list[dict[str, Any]]:
    """``items`` (in ``key`` order) past ``after`` in that order (``descending``: the other way), at most
    ``limit``: a page of a list whose totals needed every row anyway."""
    ordered = list(reversed(items)) if descending else items
    if after is not None:
        ordered = [i for i in ordered if (str(i[key]) < after if descending else str(i[key]) > after)]
    return ordered if limit is None else ordered[:limit]


def _arrival(row: Projection) -> tuple[int, str, str]:
    return (-int(row.data.get("priority") or 0), str(row.data.get("submitted_at") or "~"), row.id)


def queue_position(job_id: str, pending: Iterable[Projection]) -> tuple[int | None, int]:
    """The job's place among the pending jobs in packing order (priority, then arrival), 1-based."""
    ordered = sorted(pending, key=_arrival)
    ids = [r.id for r in ordered]
    return (ids.index(job_id) + 1 if job_id in ids else None), len(ids)


def waiting_s(job: dict[str, Any], now: datetime) -> float | None:
    submitted = parse_iso(job.get("submitted_at"))
    if submitted is None:
        return None
    end = parse_iso(job.get("started_at")) or parse_iso(job.get("finished_at")) or now
    return round(max(0.0, (end - submitted).total_seconds()), 3)


def time_to_ready_s(orders: list[Projection], nodes: list[Projection]) -> list[float]:
    """For each filled purchase whose nodes all came up: seconds from placing it to its last node READY."""
    ready: dict[str, list[datetime]] = {}
    for n in nodes:
        at = parse_iso(n.data.get("ready_at"))
        if at is not None and n.parent_id:
            ready.setdefault(n.parent_id, []).append(at)
    out = []
    for o in orders:
        block, placed = o.data.get("block_id"), parse_iso(o.data.get("placed_at"))
        if o.state == "filled" and block in ready and placed is not None:
            out.append(max(0.0, (max(ready[block]) - placed).total_seconds()))
    return out


def purchase_for(
    job_id: str, orders: list[Projection], nodes: list[Projection], now: datetime, settings: Settings
) -> dict[str, Any] | None:
    """The latest purchase made for the job, with an ETA for its capacity (the median time past purchases
    took from order to READY nodes) and the deadline after which the controller gives up on it."""
    mine = [o for o in orders if job_id in o.data.get("for_jobs", [])]
    if not mine:
        return None
    order = max(mine, key=lambda o: (str(o.data.get("placed_at")), o.id))
    d = order.data
    placed = parse_iso(d.get("placed_at"))
    block = d.get("block_id")
    block_nodes = [n for n in nodes if block is not None and n.parent_id == block]
    node_states = sorted({str(n.state) for n in block_nodes})
    cfg = settings.controller
    deadline = placed + timedelta(seconds=cfg.request_timeout_s + cfg.boot_timeout_s) if placed else None
    history = time_to_ready_s(orders, nodes)
    ready_times = [parse_iso(n.data.get("ready_at")) for n in block_nodes]
    eta: datetime | None = None
    basis: str
    if block_nodes and all(t is not None for t in ready_times):
        eta = max(t for t in ready_times if t is not None)
        basis = "its nodes are READY"
    elif order.state in ("rejected", "cancelled", "expired"):
        basis = f"the purchase ended {order.state}; no capacity is coming from it"
    elif history and placed is not None:
        median = statistics.median(history)
        eta = placed + timedelta(seconds=median)
        basis = f"median {median:.1f} s from order to READY over {len(history)} past purchases"
    else:
        basis = "no past purchase to estimate from; the deadline bounds it"
    in_flight = order.state in IN_FLIGHT_ORDERS or (
        order.state == "filled" and any(s not in ("ready", *GONE_NODE_STATES) for s in node_states)
    )
    return {
        "order_key": order.id,
        "status": order.state,
        "in_flight": in_flight,
        "group": d.get("group"),
        "provider": d.get("provider"),
        "instance_type": d.get("instance_type"),
        "node_count": d.get("node_count"),
        "tier": d.get("tier"),
        "limit_price_per_gpu_hour": d.get("limit_price_per_gpu_hour"),
        "placed_at": iso(placed),
        "block_id": block,
        "node_states": node_states,
        "reason": (d.get("reason") or {}).get("message"),
        "eta_at": iso(eta),
        "eta_s": None if eta is None else round(max(0.0, (eta - now).total_seconds()), 3),
        "overdue_s": round((now - eta).total_seconds(), 3)
        if eta is not None and in_flight and eta < now
        else None,
        "eta_basis": basis,
        "deadline_at": iso(deadline),
        "for_jobs": list(d.get("for_jobs", [])),
    }


def explanation_lines(
    job: dict[str, Any],
    position: int | None,
    length: int,
    placement: dict[str, Any] | None,
    routing: dict[str, Any] | None,
    purchase: dict[str, Any] | None,
    known: JobExplanation | None,
) -> list[str]:
    """The answer as sentences, with the numbers, first line the one-line summary."""
    lines = [f"{job['state']}: {job.get('reason') or 'no reason recorded yet'}"]
    if position is not None:
        lines.append(f"queue position {position} of {length} pending jobs")
    if placement is not None:
        lines.append(f"placement ({placement['kind']}): {placement['message']}")
        if placement["rejections"]:
            lines.append(f"{placement['nodes_rejected']} nodes rejected:")
            lines += [f"  {r['count']} x {r['code']} (e.g. {r['example']})" for r in placement["rejections"]]
    if routing is not None and job["state"] == "PENDING":
        group = f" to {routing['group']}" if routing.get("group") else ""
        lines.append(f"routing{group}: {routing['message']}")
    if purchase is not None:
        p = purchase
        head = f"purchase {p['order_key']} ({p['status']}): {p['node_count']}x {p['instance_type']} on {p['provider']}"
        lines.append(head + (f" - {p['reason']}" if p["reason"] else ""))
        if p["in_flight"]:
            if p["overdue_s"] is not None:
                eta = f"{p['overdue_s']:.0f} s ago and not READY yet ({p['eta_basis']})"
            elif p["eta_s"] is not None:
                eta = f"in {p['eta_s']:.0f} s ({p['eta_basis']})"
            else:
                eta = p["eta_basis"]
            lines.append(f"capacity expected {eta}; given up at {p['deadline_at']}")
    if known is not None:
        lines += [f"invalid: {r.message}" for r in known.validation]
    return lines


def slot_row(
    data: dict[str, Any], on_gpu: dict[tuple[str, int], list[tuple[str, float]]], now: datetime
) -> dict[str, Any]:
    """One node of the slot map: each GPU with the jobs on it and their VRAM."""
    node_id = str(data["node_id"])
    total_vram = float(data.get("vram_per_gpu_gb") or 0)
    gpus = []
    for index in range(int(data.get("gpu_count") or 0)):
        jobs = on_gpu.get((node_id, index), [])
        gpus.append(
            {
                "index": index,
                "job_ids": [j for j, _ in jobs],
                "vram_used_gb": gpu_vram_used(jobs, total_vram),  # a job asking no VRAM holds it whole
                "vram_total_gb": total_vram,
            }
        )
    end = parse_iso(data.get("end_time"))
    gpu_count = int(data.get("gpu_count") or 0)
    free = gpu_count if data.get("gpus_free") is None else int(data["gpus_free"])
    return {
        "node_id": node_id,
        "block_id": data.get("block_id"),
        "group": data.get("group"),
        "provider": data.get("provider"),
        "instance_type": data.get("instance_type"),
        "gpu_model": data.get("gpu_model"),
        "tier": data.get("tier"),
        "state": data.get("state"),
        "gpu_count": gpu_count,
        "gpus_allocated": gpu_count - free,
        "gpus_free": free,
        "vram_per_gpu_gb": total_vram,
        "cpu_used": data.get("cpu_used"),
        "cpu_total": data.get("cpu_total"),
        "ram_used_gb": data.get("ram_used_gb"),
        "ram_total_gb": data.get("ram_total_gb"),
        "jobs": list(data.get("jobs", [])),
        "expires_at": iso(end),
        "expires_in_s": None if end is None else round(max(0.0, (end - now).total_seconds()), 3),
        "ready_at": data.get("ready_at"),
        "idle_since": data.get("idle_since"),
        "gpus": gpus,
        "cuda_version": data.get("cuda_version"),
        "driver_version": data.get("driver_version"),
        "draining": bool(data.get("draining", False)),
    }


def gpu_vram_used(jobs: list[tuple[str, float]], total_vram: float) -> float:
    """VRAM in use on one GPU as the slot map shows it (``slot_row``): its jobs' VRAM, a job that asked for
    none holding it whole, capped at the GPU's VRAM, to the MB."""
    used = sum(v for _, v in jobs) if jobs else 0.0
    if jobs and used == 0:
        used = total_vram
    return round(min(used, total_vram) if total_vram else used, 3)


def fleet_totals(
    nodes: list[dict[str, Any]],
    on_gpu: dict[tuple[str, int], list[tuple[str, float]]],
    by_state: dict[str, int],
) -> dict[str, Any]:
    """``slot_totals`` of these nodes' slot rows, from a few fields of each (``NODE_TOTAL_FIELDS``) without
    building every GPU's row: only the GPUs with jobs on them are visited."""
    rows = []
    busy: dict[str, list[int]] = {}
    for node_id, index in on_gpu:
        busy.setdefault(node_id, []).append(index)
    for data in nodes:
        node_id = str(data["node_id"])
        gpu_count = int(data.get("gpu_count") or 0)
        free = gpu_count if data.get("gpus_free") is None else int(data["gpus_free"])
        total_vram = float(data.get("vram_per_gpu_gb") or 0)
        used = sum(
            gpu_vram_used(on_gpu[(node_id, i)], total_vram)
            for i in busy.get(node_id, ())
            if 0 <= i < gpu_count
        )
        rows.append(
            {
                "state": data.get("state"),
                "gpu_count": gpu_count,
                "gpus_allocated": gpu_count - free,
                "gpus_free": free,
                "gpus": [{"vram_total_gb": total_vram * gpu_count, "vram_used_gb": used}],
            }
        )
    return slot_totals(rows, by_state)


def slot_totals(nodes: list[dict[str, Any]], by_state: dict[str, int]) -> dict[str, Any]:
    """GPUs on READY nodes: allocated, idle, utilization; fragmentation = the share of idle GPUs that sit
    on nodes already partly in use (they cannot take a whole-node job)."""
    ready = [n for n in nodes if n["state"] == "ready"]
    total = sum(n["gpu_count"] for n in ready)
    allocated = sum(n["gpus_allocated"] for n in ready)
    idle = total - allocated
    stranded = sum(n["gpus_free"] for n in ready if n["gpus_allocated"] > 0)
    vram_total = sum(g["vram_total_gb"] for n in ready for g in n["gpus"])
    vram_used = sum(g["vram_used_gb"] for n in ready for g in n["gpus"])
    return {
        "nodes": len(nodes),
        "nodes_by_state": dict(sorted(by_state.items())),
        "ready_nodes": len(ready),
        "gpus_total": total,
        "gpus_allocated": allocated,
        "gpus_idle": idle,
        "gpus_booting": sum(
            n["gpu_count"] for n in nodes if n["state"] in ("requesting", "booting", "initializing")
        ),
        "utilization": round(allocated / total, 4) if total else 0.0,
        "fragmentation": round(stranded / idle, 4) if idle else 0.0,
        "stranded_gpus": stranded,
        "largest_free_node_gpus": max((n["gpus_free"] for n in ready), default=0),
        "vram_total_gb": round(vram_total, 3),
        "vram_used_gb": round(vram_used, 3),
    }
