"""``GET /autoscaler/status``, ``GET /costs`` and the numbers behind ``GET /metrics`` (docs/api.md).

Like runtime/views.py these read the store, so any process answers; the last routing decision and the
autoscaler's own unmet-demand list are in the leader's memory only and are added when this process leads.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime
from decimal import Decimal
from typing import Any

from scalar.domain.market import NodeState
from scalar.engine import Controller
from scalar.engine.lifecycle import JobState, OrderStatus
from scalar.engine.queries import SliceCounts
from scalar.runtime.views import (
    FOLLOWER_NOTE,
    HOUR,
    IN_FLIGHT_ORDERS,
    BlockCost,
    ClusterViews,
    block_cost,
    exact_seconds,
    iso,
    money,
    parse_time,
    rows,
)
from scalar.wire.routing import decision_to_json

RECENT_ACTIONS = 100
NODE_STATES = tuple(s.value for s in NodeState)
SLICE_STATES = tuple(f.name for f in fields(SliceCounts))  # requesting ... failed, terminated
JOB_STATES = tuple(s.value for s in JobState)
ORDER_STATUSES = tuple(s.value for s in OrderStatus)
MAX_POINTS = 500


def _leader_autoscaler(c: Controller) -> dict[str, Any]:
    status = c.autoscaler_status()
    unmet = [{"job_ids": list(u.job_ids), "code": u.code, "message": u.message} for u in status.unmet]
    return {
        "at": iso(status.at),
        "last_routing": None if status.last_routing is None else decision_to_json(status.last_routing),
        "routing_lines": list(status.routing_lines),
        "pending_groups": [
            {
                "name": pg.name,
                "reason": pg.reason,
                "in_flight_slices": pg.in_flight_slices,
                "slices_to_launch": pg.slices_to_launch,
                "remaining_slices": pg.remaining_slices,
                "task_ids": [t for e in pg.assigned_entries for t in e.task_ids],
            }
            for pg in status.pending_groups
        ],
        "unmet": unmet,
    }


def autoscaler_status(views: ClusterViews, all_groups: bool = False) -> dict[str, Any]:
    """Groups with no slice, no purchase in flight, no backoff and no pending slice are left out unless
    ``all_groups`` (there is one per offer on the market: hundreds)."""
    now = views.clock()
    with views.store.read() as tx:
        groups = rows(tx, "scale_groups")
        orders = [o for s in IN_FLIGHT_ORDERS for o in rows(tx, "orders", s)]
        pending = rows(tx, "jobs", "PENDING")
        total = sum(tx.count_actions().values())
        actions = tx.list_actions(limit=RECENT_ACTIONS, offset=max(0, total - RECENT_ACTIONS))
    known = views.with_controller(_leader_autoscaler)
    notes = []
    unmet: list[dict[str, Any]]
    if known is None:
        notes.append(FOLLOWER_NOTE.format(what="the last routing decision"))
        unmet = [
            {
                "job_ids": [r.id],
                "code": r.data.get("reason_code") or "pending",
                "message": r.data.get("reason"),
            }
            for r in pending
        ]
    else:
        unmet = known["unmet"]
    by_reason: dict[str, dict[str, Any]] = {}
    for u in unmet:
        entry = by_reason.setdefault(
            u["code"], {"code": u["code"], "jobs": 0, "example": u["message"], "job_ids": []}
        )
        entry["jobs"] += len(u["job_ids"])
        entry["job_ids"] += u["job_ids"]
    group_out = []
    active = {o.data.get("group") for o in orders}
    active |= {pg["name"] for pg in ([] if known is None else known["pending_groups"])}
    totals = dict.fromkeys(SLICE_STATES, 0)
    for g in groups:
        d = g.data
        slices = {s: int((d.get("slices") or {}).get(s, 0)) for s in SLICE_STATES}
        for s, n in slices.items():
            totals[s] += n
        busy = any(slices.values()) or d.get("backoff_until") or g.id in active
        if not (all_groups or busy):
            continue
        group_out.append(
            {
                "name": g.id,
                "provider": d.get("provider"),
                "instance_type": d.get("instance_type"),
                "tier": d.get("tier"),
                "spot": d.get("spot"),
                "gpu_model": d.get("gpu_model"),
                "gpus_per_node": d.get("gpus_per_node"),
                "price_per_gpu_hour": d.get("price_per_gpu_hour"),
                "priority": d.get("priority"),
                "availability": d.get("availability"),
                "backoff_until": d.get("backoff_until"),
                "backoff_reason": (d.get("backoff_reason") or {}).get("message"),
                "excluded": (d.get("excluded") or {}).get("message"),
                "min_slices": d.get("min_slices"),
                "max_slices": d.get("max_slices"),
                "slices": slices,
            }
        )
    return {
        "source": "store" if known is None else "leader",
        "at": iso(now),
        "routed_at": None if known is None else known["at"],
        "last_routing": None if known is None else known["last_routing"],
        "routing_lines": [] if known is None else known["routing_lines"],
        "pending_groups": [] if known is None else known["pending_groups"],
        "unmet": unmet,
        "unmet_by_reason": sorted(by_reason.values(), key=lambda e: (-e["jobs"], e["code"])),
        "groups": group_out,
        "groups_total": len(groups),
        "slice_totals": totals,
        "open_orders": [
            {
                "order_key": o.id,
                "status": o.state,
                "group": o.data.get("group"),
                "provider": o.data.get("provider"),
                "instance_type": o.data.get("instance_type"),
                "node_count": o.data.get("node_count"),
                "limit_price_per_gpu_hour": o.data.get("limit_price_per_gpu_hour"),
                "placed_at": o.data.get("placed_at"),
                "for_jobs": o.data.get("for_jobs", []),
                "reason": (o.data.get("reason") or {}).get("message"),
            }
            for o in orders
        ],
        "recent_actions": [
            {
                "action_id": a.action_id,
                "kind": a.kind,
                "status": a.status,
                "attempts": a.attempts,
                "subject": _subject(a.payload),
                "reason": ((a.payload.get("action") or {}).get("reason") or {}).get("message"),
                "provider": a.payload.get("provider"),
                "created_at": iso(a.created_at),
                "completed_at": iso(a.completed_at),
                "error": a.error,
            }
            for a in reversed(actions)
        ],
        "notes": notes,
    }


def _subject(payload: dict[str, Any]) -> str | None:
    body = payload.get("action") or {}
    for field in ("job_id", "block_id", "node_id"):
        if isinstance(body.get(field), str):
            return str(body[field])
    request = body.get("request")
    if isinstance(request, dict):
        return f"{request.get('node_count')}x {request.get('instance_type')} on {request.get('provider')}"
    return None


# ---- GET /costs ----------------------------------------------------------------------------------------


def delivered_gpu_s(jobs: list[Any], node_provider: dict[str, str], now: datetime) -> dict[str, Decimal]:
    """GPU-seconds that held a job, per provider (from each job's start to its end, or now)."""
    out: dict[str, Decimal] = {}
    for j in jobs:
        started = parse_time(j.data.get("started_at"))
        if started is None:
            continue
        ended = parse_time(j.data.get("finished_at")) or now
        if ended <= started:
            continue
        seconds = exact_seconds(ended - started)
        for p in j.data.get("placements", []):
            provider = node_provider.get(p.get("node_id"), "unknown")
            out[provider] = out.get(provider, Decimal(0)) + seconds * len(p.get("gpu_indices", []))
    return out


def spend_at(costs: list[BlockCost], at: datetime) -> dict[str, Decimal]:
    """Spend per provider up to ``at``: each block accrues at its rate from its start for its held time."""
    out: dict[str, Decimal] = {}
    for c in costs:
        held = min(c.held_s, exact_seconds(at - c.start)) if at > c.start else Decimal(0)
        out[c.provider] = out.get(c.provider, Decimal(0)) + c.rate_per_hour * max(held, Decimal(0)) / HOUR
    return out


def costs(views: ClusterViews, points: int = 24) -> dict[str, Any]:
    now = views.clock()
    with views.store.read() as tx:
        block_rows = rows(tx, "blocks")
        node_rows = rows(tx, "nodes")
        jobs = [r for r in rows(tx, "jobs") if r.data.get("started_at")]
    block_costs = [block_cost(r, now) for r in block_rows]
    node_provider = {r.id: str(r.data.get("provider")) for r in node_rows}
    delivered = delivered_gpu_s(jobs, node_provider, now)
    providers = sorted({c.provider for c in block_costs} | set(delivered))
    by_provider = []
    sums = dict.fromkeys(("committed", "accrued", "paid", "delivered", "idle_cost"), Decimal(0))
    for name in providers:
        mine = [c for c in block_costs if c.provider == name]
        accrued = sum((c.accrued for c in mine), Decimal(0))
        committed = sum((c.committed for c in mine), Decimal(0))
        paid_s = sum((c.held_s * c.gpus for c in mine), Decimal(0))
        used_s = min(delivered.get(name, Decimal(0)), paid_s) if paid_s else delivered.get(name, Decimal(0))
        idle_cost = accrued * (paid_s - used_s) / paid_s if paid_s else Decimal(0)
        for key, value in (
            ("committed", committed),
            ("accrued", accrued),
            ("paid", paid_s),
            ("delivered", used_s),
            ("idle_cost", idle_cost),
        ):
            sums[key] += value
        by_provider.append(
            {
                "provider": name,
                "blocks": len(mine),
                "committed": money(committed),
                "accrued": money(accrued),
                "paid_gpu_hours": money(paid_s / HOUR),
                "delivered_gpu_hours": money(used_s / HOUR),
                "idle_gpu_hours": money((paid_s - used_s) / HOUR),
                "idle_cost": money(idle_cost),
                "cost_per_delivered_gpu_hour": money(accrued * HOUR / used_s) if used_s else None,
            }
        )
    delivered_total = sums["delivered"]
    return {
        "at": iso(now),
        "currency": "USD",
        "committed": money(sums["committed"]),
        "accrued": money(sums["accrued"]),
        "paid_gpu_hours": money(sums["paid"] / HOUR),
        "delivered_gpu_hours": money(delivered_total / HOUR),
        "idle_gpu_hours": money((sums["paid"] - delivered_total) / HOUR),
        "idle_cost": money(sums["idle_cost"]),
        "cost_per_delivered_gpu_hour": money(sums["accrued"] * HOUR / delivered_total)
        if delivered_total
        else None,
        "by_provider": by_provider,
        "by_tenant": by_tenant(block_rows, block_costs, node_rows, jobs, now),
        "series": spend_series(block_costs, now, points),
    }


def by_tenant(
    block_rows: list[Any], block_costs: list[BlockCost], node_rows: list[Any], jobs: list[Any], now: datetime
) -> list[dict[str, Any]]:
    """Each contract's accrued cost split between tenants by the GPU-seconds their jobs held on its nodes
    (GPU-seconds past what the contract paid for are scaled down, so no dollar is attributed twice); what
    no job held is the contract's idle cost, reported in the totals, not charged to any tenant."""
    block_of_node = {r.id: str(r.data.get("block_id")) for r in node_rows}
    cost_of_block = {r.id: c for r, c in zip(block_rows, block_costs, strict=True)}
    held: dict[str, dict[str, Decimal]] = {}  # block -> tenant -> GPU-seconds
    for j in jobs:
        started = parse_time(j.data.get("started_at"))
        ended = parse_time(j.data.get("finished_at")) or now
        if started is None or ended <= started:
            continue
        seconds = exact_seconds(ended - started)
        tenant = str(j.data.get("tenant") or "default")
        for p in j.data.get("placements", []):
            block = block_of_node.get(p.get("node_id"))
            if block is None or block not in cost_of_block:
                continue
            per = held.setdefault(block, {})
            per[tenant] = per.get(tenant, Decimal(0)) + seconds * len(p.get("gpu_indices", []))
    gpu_s: dict[str, Decimal] = {}
    cost: dict[str, Decimal] = {}
    for block, per in held.items():
        c = cost_of_block[block]
        paid_s = c.held_s * c.gpus
        used_s = sum(per.values(), Decimal(0))
        scale = paid_s / used_s if used_s > paid_s and used_s else Decimal(1)
        for tenant, s in per.items():
            share = s * scale
            gpu_s[tenant] = gpu_s.get(tenant, Decimal(0)) + share
            cost[tenant] = cost.get(tenant, Decimal(0)) + (
                c.accrued * share / paid_s if paid_s else Decimal(0)
            )
    return [{"tenant": t, "gpu_hours": money(gpu_s[t] / HOUR), "cost": money(cost[t])} for t in sorted(gpu_s)]


def spend_series(block_costs: list[BlockCost], now: datetime, points: int) -> list[dict[str, Any]]:
    """``points`` evenly spaced times from the first contract's start to now: cumulative spend at each, per
    provider, and the spend in the interval since the previous point."""
    if not block_costs:
        return []
    first = min(c.start for c in block_costs)
    if first >= now:
        times = [now]
    else:
        step = (now - first) / max(points - 1, 1)
        times = [first + step * i for i in range(points - 1)] + [now]
    out = []
    previous = Decimal(0)
    for at in times:
        per = spend_at(block_costs, at)
        total = sum(per.values(), Decimal(0))
        out.append(
            {
                "at": iso(at),
                "spend": money(total),
                "spend_in_interval": money(total - previous),
                "by_provider": {p: money(v) for p, v in sorted(per.items())},
            }
        )
        previous = total
    return out


# ---- GET /metrics --------------------------------------------------------------------------------------


def metrics_snapshot(views: ClusterViews) -> dict[str, Any]:
    """The counts behind GET /metrics, with every known label value present (0 when none)."""
    now = views.clock()
    with views.store.read() as tx:
        jobs = tx.count_by_state("jobs")
        nodes = rows(tx, "nodes")
        orders = tx.count_by_state("orders")
        block_rows = rows(tx, "blocks")
        actions = tx.count_actions()
        inbox = tx.count_unconsumed_inbox()
    ready = [n for n in nodes if n.state == "ready"]
    gpus_total = sum(int(n.data.get("gpu_count") or 0) for n in ready)
    gpus_free = sum(int(n.data.get("gpus_free") or 0) for n in ready)
    block_costs = [block_cost(r, now) for r in block_rows]
    node_states = dict.fromkeys(NODE_STATES, 0)
    for n in nodes:
        if n.state in node_states:
            node_states[n.state] += 1
    spend: dict[str, Decimal] = {}
    for c in block_costs:
        spend[c.provider] = spend.get(c.provider, Decimal(0)) + c.accrued
    open_rate = sum(
        (c.rate_per_hour for c, r in zip(block_costs, block_rows, strict=True) if r.state == "open"),
        Decimal(0),
    )
    return {
        "jobs_by_state": {s: int(jobs.get(s, 0)) for s in JOB_STATES},
        "nodes_by_state": node_states,
        "orders_by_status": {s: int(orders.get(s, 0)) for s in ORDER_STATUSES},
        "actions_by_status": dict(actions),
        "gpus_total": gpus_total,
        "gpus_allocated": gpus_total - gpus_free,
        "gpus_idle": gpus_free,
        "spend_by_provider": spend,
        "open_price_per_hour": open_rate,
        "committed": sum((c.committed for c in block_costs), Decimal(0)),
        "inbox_pending": inbox,
        "is_leader": views.with_controller(lambda c: True) is True,
        "step_latency": views.leader.step_latency.snapshot(),
        "steps": views.leader.steps,
    }


def status_summary(views: ClusterViews, health: dict[str, Any]) -> dict[str, Any]:
    """One answer for ``scalar status``: health, counts, GPUs, spend, slices and step latency."""
    snap = metrics_snapshot(views)
    with views.store.read() as tx:
        groups = rows(tx, "scale_groups")
    slices = dict.fromkeys(SLICE_STATES, 0)
    for g in groups:
        for s in SLICE_STATES:
            slices[s] += int((g.data.get("slices") or {}).get(s, 0))
    spend = snap["spend_by_provider"]
    latency = snap["step_latency"]
    total = snap["gpus_total"]
    return {
        "at": iso(views.clock()),
        "health": health,
        "jobs_by_state": snap["jobs_by_state"],
        "jobs_total": sum(snap["jobs_by_state"].values()),
        "nodes_by_state": snap["nodes_by_state"],
        "gpus": {
            "total": total,
            "allocated": snap["gpus_allocated"],
            "idle": snap["gpus_idle"],
            "utilization": round(snap["gpus_allocated"] / total, 4) if total else 0.0,
        },
        "spend": {
            "currency": "USD",
            "accrued": money(sum(spend.values(), Decimal(0))),
            "by_provider": {p: money(v) for p, v in sorted(spend.items())},
            "committed": money(snap["committed"]),
            "open_price_per_hour": money(snap["open_price_per_hour"]),
        },
        "slices": slices,
        "orders_by_status": snap["orders_by_status"],
        "actions_by_status": snap["actions_by_status"],
        "inbox_pending": snap["inbox_pending"],
        "steps": snap["steps"],
        "step_latency": {
            "count": latency.count,
            "mean_s": round(latency.sum_s / latency.count, 6) if latency.count else None,
            "max_s": round(latency.max_s, 6) if latency.count else None,
        },
    }
