"""``GET /autoscaler/status``, ``GET /costs`` and the numbers behind ``GET /metrics`` (docs/api.md).

Like runtime/views.py these read the store, so any process answers; the last routing decision and the
autoscaler's own unmet-demand list are in the leader's memory only and are added when this process leads.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from scalar.domain.consolidation import ConsolidationDecision
from scalar.domain.market import NodeState
from scalar.domain.money import micros_text
from scalar.domain.timefmt import exact_seconds, parse_iso
from scalar.engine import Controller
from scalar.engine.cost_band import SpotRisk
from scalar.engine.costs import (
    BlockAccount,
    CostLine,
    CostReport,
    TenantCost,
    cost_report,
    extrapolate,
)
from scalar.engine.lifecycle import JobState, OrderStatus
from scalar.engine.queries import SliceCounts
from scalar.runtime.step_metrics import HistogramSnapshot
from scalar.runtime.views import (
    FOLLOWER_NOTE,
    HOUR,
    IN_FLIGHT_ORDERS,
    BlockCost,
    ClusterViews,
    block_cost,
    iso,
    rows,
)
from scalar.wire.jobs import HealthDetailsOut
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
        "consolidation": _consolidation(c),
        "spot_risk": None if status.spot_risk is None else _spot_risk(status.spot_risk),
    }


def _spot_risk(risk: SpotRisk) -> dict[str, Any]:
    """How the leader prices spot: the published interruption rates times what it has seen of them, and the
    boot times it expects per seller (engine/cost_band.py)."""
    return {
        "preemptions_seen": risk.seen,
        "preemptions_expected": round(risk.expected, 3),
        "spot_node_hours": round(risk.node_hours, 3),
        "calibration": round(risk.factor, 4),
        "boots": [
            {"provider": provider, "seen": n, "expected_s": round(mean_s, 1)}
            for provider, n, mean_s in risk.boots
        ],
    }


def _consolidation(c: Controller) -> dict[str, Any]:
    """Consolidation's decisions: the latest moves (newest first) and the contracts the last pass kept."""

    def one(d: ConsolidationDecision, at: datetime | None) -> dict[str, Any]:
        return {
            "at": iso(at),
            "block_id": d.block_id,
            "code": d.reason.code,
            "reason": d.reason.message,
            "saving": micros_text(d.saving),
            "restart_cost": micros_text(d.restart_cost),
            "moves": [
                {
                    "job_id": m.job_id,
                    "from_node": m.from_node,
                    "to_node": m.to_node,
                    "gpu_indices": list(m.gpu_indices),
                    "lost_s": round(m.lost_s, 3),
                }
                for m in d.moves
            ],
        }

    state = c.state
    return {
        "enabled": c.config.consolidation.enabled,
        "recent_moves": [one(d, at) for at, d in reversed(state.consolidations)],
        "kept": [one(d, state.now) for d in state.consolidation_kept],
    }


def autoscaler_status(views: ClusterViews, all_groups: bool = False) -> dict[str, Any]:
    """Groups with no slice, no purchase in flight, no backoff and no pending slice are left out unless
    ``all_groups`` (there is one per offer on the market: hundreds)."""
    now = views.clock()
    with views.store.read() as tx:
        groups = rows(tx, "scale_groups")
        orders = [o for s in IN_FLIGHT_ORDERS for o in rows(tx, "orders", s)]
        pending = tx.list_projection_fields("jobs", {"reason_code": "text", "reason": "text"}, "PENDING")
        total = sum(tx.count_actions().values())
        actions = tx.list_actions(limit=RECENT_ACTIONS, offset=max(0, total - RECENT_ACTIONS))
    known = views.with_controller(_leader_autoscaler)
    notes = []
    unmet: list[dict[str, Any]]
    if known is None:
        notes.append(FOLLOWER_NOTE.format(what="the last routing decision"))
        # one entry per reason (as the leader's are per group), not one per pending job: thousands
        grouped: dict[tuple[str, Any], list[str]] = {}
        for r in pending:
            grouped.setdefault((r.data.get("reason_code") or "pending", r.data.get("reason")), []).append(
                r.id
            )
        unmet = [
            {"job_ids": ids, "code": code, "message": message} for (code, message), ids in grouped.items()
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
        "consolidation": None if known is None else known["consolidation"],
        "spot_risk": None if known is None else known["spot_risk"],
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


def block_account(row: Any, now: datetime) -> BlockAccount:
    """A block projection's accounting (engine/costs.py) carried forward to ``now``: the projection is
    rewritten whenever a job starts or stops on the block, so until then its GPUs stay as they were."""
    data = row.data
    account = BlockAccount(
        block_id=row.id,
        provider=str(data.get("provider")),
        status=str(row.state),
        paid_gpu_s=Decimal(data.get("paid_gpu_s") or 0),
        busy_gpu_s_by_tenant={t: Decimal(v) for t, v in (data.get("busy_gpu_s_by_tenant") or {}).items()},
        accrued=Decimal(data.get("accrued") or 0),
        committed=Decimal(data.get("committed") or 0),
        sold_back_gpu_s=Decimal(data.get("sold_back_gpu_s") or 0),
        sold_back_revenue=Decimal(data.get("sold_back_revenue") or 0),
        sold_back_cost=Decimal(data.get("sold_back_cost") or 0),
        buyers=tuple(str(t) for t in data.get("buyers") or ()),
    )
    since = parse_iso(data.get("accounted_at"))
    end = parse_iso(data.get("end_time"))
    if row.state != "open" or since is None or end is None:
        return account
    start = parse_iso(data.get("start_time")) or since
    since = max(since, start)
    until = min(now, end)
    if until <= since:
        return account
    paid = data.get("paid_gpus")  # the nodes still paid for (older projections: every node)
    gpus = (
        int(paid) if paid is not None else int(data.get("gpus_per_node", 0)) * len(data.get("node_ids", []))
    )
    busy_now = {t: Decimal(v) for t, v in (data.get("busy_gpus_by_tenant") or {}).items()}
    price = Decimal(data.get("price_per_gpu_hour") or 0)
    return extrapolate(account, busy_now, gpus, price, exact_seconds(until - since))


def _line(line: CostLine) -> dict[str, Any]:
    per = line.cost_per_delivered_gpu_hour
    return {
        "blocks": line.blocks,
        "committed": micros_text(line.committed),
        "accrued": micros_text(line.accrued),
        "paid_gpu_hours": micros_text(line.paid_gpu_hours),
        "delivered_gpu_hours": micros_text(line.delivered_gpu_hours),
        "idle_gpu_hours": micros_text(line.idle_gpu_hours),
        "idle_cost": micros_text(line.idle_cost),
        "sold_back_gpu_hours": micros_text(line.sold_back_gpu_hours),
        "sold_back_revenue": micros_text(line.sold_back_revenue),
        "net_cost": micros_text(line.net_cost),
        "cost_per_delivered_gpu_hour": None if per is None else micros_text(per),
        "utilization": round(float(line.delivered_gpu_hours / line.paid_gpu_hours), 6)
        if line.paid_gpu_hours
        else None,
    }


def _tenants(rows: tuple[TenantCost, ...]) -> list[dict[str, Any]]:
    return [
        {
            "tenant": t.tenant,
            "gpu_hours": micros_text(t.gpu_hours),
            "cost": micros_text(t.cost),
            "sold_back_gpu_hours": micros_text(t.sold_back_gpu_hours),
            "sold_back_revenue": micros_text(t.sold_back_revenue),
        }
        for t in rows
    ]


def cost_answer(report: CostReport) -> dict[str, Any]:
    """The report as ``GET /costs`` answers it (without ``at`` and ``series``)."""
    return {
        "currency": "USD",
        **_line(report.total),
        "by_provider": [{"provider": p.provider, **_line(p.line)} for p in report.by_provider],
        "by_block": [
            {
                "block_id": b.block_id,
                "provider": b.provider,
                "status": b.status,
                **_line(b.line),
                "by_tenant": _tenants(b.by_tenant),
            }
            for b in report.by_block
        ],
        "by_tenant": _tenants(report.by_tenant),
    }


def costs(views: ClusterViews, points: int = 24) -> dict[str, Any]:
    """The engine's per-block accounting, read from the block projections (any process answers)."""
    now = views.clock()
    with views.store.read() as tx:
        block_rows = rows(tx, "blocks")
    accounts = [block_account(r, now) for r in block_rows]
    # The spend series draws each block's spend over its held time, to the same accrued as the report.
    spent = [
        replace(block_cost(r, now), accrued=a.accrued) for r, a in zip(block_rows, accounts, strict=True)
    ]
    return {
        "at": iso(now),
        **cost_answer(cost_report(accounts)),
        "series": spend_series(spent, now, points),
    }


def spend_at(costs: list[BlockCost], at: datetime) -> dict[str, Decimal]:
    """Spend per provider up to ``at``: each block accrues at its rate from its start for its held time."""
    out: dict[str, Decimal] = {}
    for c in costs:
        held = min(c.held_s, exact_seconds(at - c.start)) if at > c.start else Decimal(0)
        out[c.provider] = out.get(c.provider, Decimal(0)) + c.rate_per_hour * max(held, Decimal(0)) / HOUR
    return out


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
                "spend": micros_text(total),
                "spend_in_interval": micros_text(total - previous),
                "by_provider": {p: micros_text(v) for p, v in sorted(per.items())},
            }
        )
        previous = total
    return out


# ---- GET /metrics --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """The counts behind GET /metrics (``api/routes_metrics.py`` reads them at scrape time), with every
    known label value present (0 when none). Money is exact (``Decimal`` dollars)."""

    jobs_by_state: dict[str, int]
    nodes_by_state: dict[str, int]
    orders_by_status: dict[str, int]
    actions_by_status: dict[str, int]
    gpus_total: int
    gpus_allocated: int
    gpus_idle: int
    spend_by_provider: dict[str, Decimal]
    open_price_per_hour: Decimal
    committed: Decimal
    inbox_pending: int
    is_leader: bool
    step_latency: HistogramSnapshot
    steps: int
    """steps in the log: the leader's count (stepped or replayed), else the log's latest batch (a
    replica's or a standby's answer is then the same as the leader's)"""


def metrics_snapshot(views: ClusterViews) -> MetricsSnapshot:
    """The counts behind GET /metrics, with every known label value present (0 when none)."""
    now = views.clock()
    with views.store.read() as tx:
        jobs = tx.count_by_state("jobs")
        nodes = rows(tx, "nodes")
        orders = tx.count_by_state("orders")
        block_rows = rows(tx, "blocks")
        actions = tx.count_actions()
        inbox = tx.count_unconsumed_inbox()
        last = tx.last_batch()
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
    return MetricsSnapshot(
        jobs_by_state={s: int(jobs.get(s, 0)) for s in JOB_STATES},
        nodes_by_state=node_states,
        orders_by_status={s: int(orders.get(s, 0)) for s in ORDER_STATUSES},
        actions_by_status=dict(actions),
        gpus_total=gpus_total,
        gpus_allocated=gpus_total - gpus_free,
        gpus_idle=gpus_free,
        spend_by_provider=spend,
        open_price_per_hour=open_rate,
        committed=sum((c.committed for c in block_costs), Decimal(0)),
        inbox_pending=inbox,
        is_leader=views.with_controller(lambda c: True) is True,
        step_latency=views.leader.step_latency.snapshot(),
        steps=views.leader.steps or (0 if last is None else last[0]),
    )


# The keys of ``/status``'s ``health`` in the order it has always sent them.
_STATUS_HEALTH_KEYS = (
    "status",
    "problem",
    "error",
    "role",
    "database",
    "backend",
    "holder",
    "epoch",
    "last_step_at",
    "lease_holder",
    "lease_expires_at",
)


def status_health(health: HealthDetailsOut) -> dict[str, Any]:
    """``/status``'s ``health`` as it has always been sent: the fields the runtime set, in that order,
    times as ``isoformat()`` (``+00:00``, where ``/healthz`` renders ``Z``)."""
    out: dict[str, Any] = {}
    for key in _STATUS_HEALTH_KEYS:
        if key in health.model_fields_set:
            value = getattr(health, key)
            out[key] = value.isoformat() if isinstance(value, datetime) else value
    return out


def status_summary(views: ClusterViews, health: HealthDetailsOut) -> dict[str, Any]:
    """One answer for ``scalar status``: health, counts, GPUs, spend, slices and step latency."""
    snap = metrics_snapshot(views)
    with views.store.read() as tx:
        groups = rows(tx, "scale_groups")
    slices = dict.fromkeys(SLICE_STATES, 0)
    for g in groups:
        for s in SLICE_STATES:
            slices[s] += int((g.data.get("slices") or {}).get(s, 0))
    spend = snap.spend_by_provider
    latency = snap.step_latency
    total = snap.gpus_total
    return {
        "at": iso(views.clock()),
        "health": status_health(health),
        "jobs_by_state": snap.jobs_by_state,
        "jobs_total": sum(snap.jobs_by_state.values()),
        "nodes_by_state": snap.nodes_by_state,
        "gpus": {
            "total": total,
            "allocated": snap.gpus_allocated,
            "idle": snap.gpus_idle,
            "utilization": round(snap.gpus_allocated / total, 4) if total else 0.0,
        },
        "spend": {
            "currency": "USD",
            "accrued": micros_text(sum(spend.values(), Decimal(0))),
            "by_provider": {p: micros_text(v) for p, v in sorted(spend.items())},
            "committed": micros_text(snap.committed),
            "open_price_per_hour": micros_text(snap.open_price_per_hour),
        },
        "slices": slices,
        "orders_by_status": snap.orders_by_status,
        "actions_by_status": snap.actions_by_status,
        "inbox_pending": snap.inbox_pending,
        "steps": snap.steps,
        "step_latency": {
            "count": latency.count,
            "mean_s": round(latency.sum_s / latency.count, 6) if latency.count else None,
            "max_s": round(latency.max_s, 6) if latency.count else None,
        },
    }
