"""What each dashboard page shows, worked out from the JSON API's answers (pure: dicts in, dicts out;
the typed answers read as their models: provider states, ``wire/providers.py``; the jobs, ``wire/jobs.py``;
the status, the costs, the nodes, the blocks, explanations and the autoscaler's status,
``wire/views.py``).

The templates only lay these out; the numbers (cumulative depth, bar widths, wait times, totals) are
computed here so they can be tested without a browser.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from pydantic import ValidationError

from scalar.domain.timefmt import parse_time
from scalar.web.charts import depth_chart, line_chart
from scalar.web.formatting import number, seconds_between
from scalar.wire.jobs import JobOut
from scalar.wire.providers import ProvidersOut, ProviderStatusOut
from scalar.wire.views import AutoscalerOut, BlocksOut, CostsOut, ExplanationOut, NodesOut, StatusOut

JOB_STATES = ("PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "PREEMPTED", "REJECTED")
SLICE_STATES = ("requesting", "booting", "initializing", "ready", "failed")
SLICE_LEGEND = {
    "requesting": "bought or asked for; the provider has not handed it over yet",
    "booting": "the machine is starting",
    "initializing": "up; the agent is setting it up",
    "ready": "takes jobs",
    "failed": "did not come up; its capacity is released",
}
PRICE_ROWS = 200


def list_url(path: str, params: dict[str, str], cursor: str | None = None) -> str:
    """A paged list's URL with its filters (empty ones left out) and, given, the cursor ``after``."""
    kept = {k: v for k, v in params.items() if v}
    if cursor:
        kept["after"] = cursor
    return f"{path}?{urlencode(kept)}" if kept else path


def page_url(path: str, params: dict[str, str], cursor: Any) -> str | None:
    """The link to another page of a paged list (``cursor``: the API's ``next`` or ``prev``), keeping the
    page's filters; ``None`` when there is no such page."""
    return list_url(path, params, cursor) if isinstance(cursor, str) and cursor else None


def ordered_counts(by_state: Any) -> list[tuple[str, int]]:
    """Job counts by state (``GET /status``'s ``jobs_by_state``) in the lifecycle's order, zeros left out."""
    if not isinstance(by_state, dict):
        return []
    known = [(s, int(by_state.get(s) or 0)) for s in JOB_STATES]
    return [(s, n) for s, n in known if n]


def _levels(rows: Any) -> list[dict[str, Any]]:
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def orderbook_view(book: dict[str, Any]) -> dict[str, Any]:
    asks = _levels(book.get("asks"))
    bids = _levels(book.get("bids"))
    optimal_index = book.get("optimal_index")
    ask_total = sum(number(a.get("quantity_gpus")) or 0 for a in asks)
    bid_total = sum(number(b.get("quantity_gpus")) or 0 for b in bids)
    ask_rows = []
    cumulative = 0.0
    for index, ask in enumerate(asks):
        cumulative += number(ask.get("quantity_gpus")) or 0
        ask_rows.append(
            {
                **ask,
                "index": index,
                "cumulative": number(ask.get("cumulative_quantity")) or cumulative,
                "bar_pct": round(100 * cumulative / ask_total, 1) if ask_total else 0,
                "optimal": index == optimal_index,
            }
        )
    bid_rows = []
    cumulative = 0.0
    for index, bid in enumerate(bids):
        cumulative += number(bid.get("quantity_gpus")) or 0
        bid_rows.append(
            {
                **bid,
                "index": index,
                "cumulative": cumulative,
                "bar_pct": round(100 * cumulative / bid_total, 1) if bid_total else 0,
            }
        )
    raw_metadata = book.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    chart = depth_chart(
        [(number(a.get("price")) or 0, number(a.get("quantity_gpus")) or 0) for a in asks],
        [(number(b.get("price")) or 0, number(b.get("quantity_gpus")) or 0) for b in bids],
        optimal_price=number(book.get("optimal_price")),
        required_gpus=number(metadata.get("required_gpus")),
    )
    return {
        "reason": _sentence(book.get("reason")),
        "warnings": [_sentence(w) for w in book.get("warnings") or [] if _sentence(w)],
        "asks": ask_rows,
        "bids": bid_rows,
        "chart": chart,
        "metadata": metadata,
        "fill": book.get("fill") if isinstance(book.get("fill"), dict) else {},
        "optimal_row": ask_rows[optimal_index]
        if isinstance(optimal_index, int) and 0 <= optimal_index < len(ask_rows)
        else None,
    }


def _sentence(value: Any) -> str:
    """A reason as text: its ``message`` when it is a structured reason."""
    if isinstance(value, dict):
        return str(value.get("message") or "")
    return "" if value is None else str(value)


def read_jobs(jobs: Any) -> list[JobOut]:
    """``GET /jobs``'s jobs (or ``GET /jobs/{id}``'s job in a list), read as their model (``wire/jobs.py``'s
    ``JobOut``); what is not a job is left out."""
    out = []
    for job in jobs if isinstance(jobs, list) else []:
        try:
            out.append(JobOut.model_validate(job))
        except ValidationError:
            continue
    return out


def job_rows(jobs: Any, now: datetime) -> list[dict[str, Any]]:
    """Each job (``read_jobs``) as the JSON it was sent as, with how long it waited to start (or has so far)."""
    rows = []
    for job in read_jobs(jobs):
        end = job.started_at or job.finished_at or now
        rows.append(
            {**job.model_dump(mode="json", by_alias=True), "wait_s": seconds_between(job.submitted_at, end)}
        )
    return rows


def state_counts(jobs: Any) -> list[tuple[str, int]]:
    counts = Counter(job.state for job in read_jobs(jobs))
    return [(state, counts[state]) for state in JOB_STATES if counts[state]]


def seconds_until(value: Any, now: datetime) -> float | None:
    when = parse_time(value)
    return None if when is None else (when - now).total_seconds()


def price_rows(offers: list[dict[str, Any]], limit: int = PRICE_ROWS) -> list[dict[str, Any]]:
    return [o for o in offers if isinstance(o, dict)][:limit]


def slice_badges(counts: Any) -> list[tuple[str, int]]:
    """``{"requesting": 1, ...}`` as (state, count) in lifecycle order, the known states first."""
    if not isinstance(counts, dict):
        return []
    known = [(s, int(number(counts.get(s)) or 0)) for s in SLICE_STATES]
    extra = [(str(k), int(number(v) or 0)) for k, v in counts.items() if k not in SLICE_STATES]
    return known + [e for e in extra if e[1]]


def provider_states(body: dict[str, Any]) -> list[ProviderStatusOut]:
    """``GET /providers``'s answer as its model (``wire/providers.py``); none when there is no answer or it
    is not one (an older server: the page then shows its empty state)."""
    if not body:
        return []
    try:
        return ProvidersOut.model_validate(body).providers
    except ValidationError:
        return []


def jobs_by_state(body: dict[str, Any]) -> dict[str, int]:
    """``GET /status``'s jobs per state, read as its model (``wire/views.py``'s ``StatusOut``); none when there
    is no answer or it is not one."""
    try:
        return StatusOut.model_validate(body).jobs_by_state if body else {}
    except ValidationError:
        return {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def cluster_view(body: dict[str, Any], now: datetime) -> dict[str, Any] | None:
    """``GET /nodes``, read as its model (``wire/views.py``'s ``NodesOut``): each node's GPU cells colored
    by job (one of 12 hues) and shaded by VRAM in use; ``None`` when the answer is not one."""
    try:
        page = NodesOut.model_validate(body)
    except ValidationError:
        return None
    colors: dict[str, int] = {}
    nodes = []
    dumped = page.model_dump(mode="json")  # once: a thousand nodes' slots dumped one by one cost most of it
    for node, node_json in zip(page.nodes, dumped["nodes"], strict=True):
        cells = []
        for slot, slot_json in zip(node.gpus, node_json["gpus"], strict=True):
            for job_id in slot.job_ids:
                colors.setdefault(job_id, len(colors) % 12)
            total, used = slot.vram_total_gb, slot.vram_used_gb
            cells.append(
                {
                    **slot_json,
                    "color": colors[slot.job_ids[0]] if slot.job_ids else None,
                    "vram_pct": min(100, round(100 * used / total)) if total else 0,
                }
            )
        expires_in_s = node.expires_in_s
        if expires_in_s is None:
            expires_in_s = seconds_until(node.expires_at, now)
        nodes.append({**node_json, "cells": cells, "expires_in_s": expires_in_s})
    return {"nodes": nodes, "totals": dumped["totals"], "job_colors": colors}


def explain_view(body: dict[str, Any]) -> dict[str, Any] | None:
    """``GET /jobs/{id}/explain``, read as its model (``wire/views.py``'s ``ExplanationOut``): the sentences,
    the rejections, routing, purchase and the story; ``None`` when the answer is not one."""
    try:
        answer = ExplanationOut.model_validate(body)
    except ValidationError:
        return None
    placement = answer.placement
    return {
        **answer.model_dump(mode="json", by_alias=True),
        "rejections": [] if placement is None else [r.model_dump(mode="json") for r in placement.rejections],
    }


def autoscaler_view(body: dict[str, Any]) -> dict[str, Any] | None:
    """``GET /autoscaler/status``, read as its model (``wire/views.py``'s ``AutoscalerOut``): groups with
    slice badges, unmet demand by reason, recent actions; ``None`` when the answer is not one."""
    try:
        status = AutoscalerOut.model_validate(body)
    except ValidationError:
        return None
    groups = [
        {**g.model_dump(mode="json"), "badges": slice_badges(g.slices.model_dump())} for g in status.groups
    ]
    # Groups with slices first, then by name: the busy ones are what a visitor looks for.
    groups.sort(key=lambda g: (-sum(n for _, n in g["badges"]), str(g["name"])))
    consolidation = status.consolidation
    return {
        "groups": groups,
        "active_groups": [g for g in groups if any(n for _, n in g["badges"])],
        "totals": slice_badges(status.slice_totals.model_dump()),
        "unmet_by_reason": [u.model_dump(mode="json") for u in status.unmet_by_reason],
        "routed_at": status.routed_at,
        "routing_lines": list(status.routing_lines),
        "pending_groups": _dicts(status.pending_groups),
        "open_orders": [o.model_dump(mode="json") for o in status.open_orders],
        "actions": [a.model_dump(mode="json") for a in status.recent_actions[:100]],
        "notes": list(status.notes),
        # consolidation's moves and kept contracts (None: a follower answered, it does not know them)
        "consolidation": None if consolidation is None else consolidation.model_dump(mode="json"),
        # how spot risk and boots are priced from what was observed (None: a follower answered)
        "spot_risk": None if status.spot_risk is None else status.spot_risk.model_dump(mode="json"),
    }


def costs_view(body: dict[str, Any]) -> dict[str, Any] | None:
    """``GET /costs``, read as its model (``wire/views.py``'s ``CostsOut``): the spend-over-time chart and
    the spend of each provider as a share bar; ``None`` when the answer is not one."""
    try:
        costs = CostsOut.model_validate(body)
    except ValidationError:
        return None
    points = []
    for point in costs.series:
        when = parse_time(point.at)
        spend = number(point.spend)
        if when is not None and spend is not None:
            points.append((when.timestamp(), spend))
    labels = []
    if points:
        for at in (points[0][0], points[len(points) // 2][0], points[-1][0]):
            labels.append((at, datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S")))
    top = max((number(p.accrued) or 0 for p in costs.by_provider), default=0)
    return {
        **costs.model_dump(mode="json", by_alias=True),
        "chart": line_chart(points, labels) if len(points) >= 2 else None,
        "providers": [
            {
                **p.model_dump(mode="json", by_alias=True),
                "bar_pct": round(100 * (number(p.accrued) or 0) / top, 1) if top else 0,
            }
            for p in costs.by_provider
        ],
        # each contract's accounting (delivered, idle, resold GPU-hours), shown beside it in the contracts table
        "accounts": {b.block_id: b.model_dump(mode="json", by_alias=True) for b in costs.by_block},
    }


def block_rows(body: dict[str, Any], now: datetime) -> list[dict[str, Any]]:
    """``GET /blocks``'s contracts, read as its model (``wire/views.py``'s ``BlocksOut``), each with the
    seconds until it expires; none when the answer is not one."""
    try:
        page = BlocksOut.model_validate(body)
    except ValidationError:
        return []
    rows = []
    for block in page.blocks:
        expires_in_s = block.expires_in_s
        if expires_in_s is None:
            expires_in_s = seconds_until(block.end_time, now)
        rows.append({**block.model_dump(mode="json"), "expires_in_s": expires_in_s})
    return rows


PRICE_SORT_KEYS = ("provider", "gpu_model", "price_per_gpu_hour", "price_per_hour", "age_s")


def sort_urls(filters: dict[str, str]) -> dict[str, str]:
    """The link of each sortable column: sort by it, or flip the order when it is already the sort."""
    urls = {}
    for key in PRICE_SORT_KEYS:
        flip = filters.get("sort") == key and not filters.get("descending")
        query = {**filters, "sort": key, "descending": "true" if flip else ""}
        urls[key] = "?" + urlencode({k: v for k, v in query.items() if v})
    return urls
