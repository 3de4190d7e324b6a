"""What a job would cost before it is submitted (``POST /jobs/preview``, ``scalar submit`` asks with it).

Two answers, from the store and the offers the control plane judges submissions on:

- it fits on a READY node now (same tier, enough whole free GPUs with the VRAM, CPU and RAM): no purchase;
  its cost is its share of that node's contract (already paid for);
- else it needs a purchase: the cheapest offer of a scale group of its tier that fits it (GPU model, VRAM,
  CPU, RAM, the tier's price cap), ``ceil(gpus / GPUs per node)`` nodes, and what the contract commits.

The controller decides for real at its next step (it may also use capacity already on the way); this
is the estimate a person confirms before money is spent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from scalar.domain.gpus import canonical_gpu_model
from scalar.domain.offers import Offer
from scalar.domain.reasons import Reason
from scalar.domain.tier import Tier
from scalar.engine.events import JobSpec
from scalar.engine.validation import validate_job_spec
from scalar.runtime.jobs import spec_from_fields
from scalar.runtime.settings import Settings
from scalar.runtime.views import HOUR, money, rows
from scalar.store import Store

PREVIEW_ID = "job-preview"


def checked_spec(
    fields: Mapping[str, Any], settings: Settings, offers: Sequence[Offer], now: datetime
) -> tuple[JobSpec | None, list[Reason]]:
    """The spec and every reason it would be refused, exactly as a submission is judged."""
    spec, problems = spec_from_fields(fields, PREVIEW_ID, now)
    if spec is not None:
        problems = validate_job_spec(spec, settings.controller, offers)
    return spec, problems


def _allows(spec: JobSpec, model: str | None) -> bool:
    if spec.gpu_models is None:
        return True
    if model is None:
        return False
    wanted = canonical_gpu_model(model)
    return any(canonical_gpu_model(m) == wanted for m in spec.gpu_models)


def _fits_node(spec: JobSpec, data: dict[str, Any]) -> bool:
    if str(data.get("tier", "")).upper() != str(spec.tier).upper() or not _allows(
        spec, data.get("gpu_model")
    ):
        return False
    cpu_free = float(data.get("cpu_total") or 0) - float(data.get("cpu_used") or 0)
    ram_free = float(data.get("ram_total_gb") or 0) - float(data.get("ram_used_gb") or 0)
    return (
        int(data.get("gpus_free") or 0) >= spec.gpu_count
        and float(data.get("vram_per_gpu_gb") or 0) >= spec.vram_per_gpu_gb
        and cpu_free >= spec.cpu_cores
        and ram_free >= spec.ram_gb
    )


def _offer_fits(spec: JobSpec, offer: Offer, settings: Settings, tier: Tier) -> bool:
    cfg = settings.controller
    group = next(
        (
            g
            for g in cfg.scale_groups
            if g.matches(offer.provider, offer.instance_type, offer.gpu_model, offer.region, offer.spot)
        ),
        None,
    )
    price = offer.price_per_gpu_hour
    cap = cfg.cap_for(tier)
    return (
        group is not None
        and tier in group.tiers
        and price is not None
        and offer.gpu_count >= 1
        and offer.gpu_count == int(offer.gpu_count)
        and _allows(spec, offer.gpu_model)
        and offer.gpu_memory_gb >= spec.vram_per_gpu_gb
        and not (0 < offer.vcpu < spec.cpu_cores)
        and not (0 < offer.memory_gb < spec.ram_gb)
        and (cap is None or price <= cap)
    )


def preview(store: Store, settings: Settings, spec: JobSpec, offers: Sequence[Offer]) -> dict[str, Any]:
    hours = Decimal(str(spec.expected_duration_sec)) / HOUR
    with store.read() as tx:
        nodes = rows(tx, "nodes", "ready")
        blocks = {r.id: r.data for r in rows(tx, "blocks", "open")}
    out: dict[str, Any] = {
        "job": {
            "tier": str(spec.tier).upper(),
            "gpu_count": spec.gpu_count,
            "vram_per_gpu_gb": spec.vram_per_gpu_gb,
            "cpu_cores": spec.cpu_cores,
            "ram_gb": spec.ram_gb,
            "expected_duration_sec": spec.expected_duration_sec,
            "name": spec.name,
        },
        "currency": "USD",
        "needs_purchase": False,
        "node": None,
        "purchase": None,
        "job_cost": None,
        "new_commitment": "0.000000",
        "reason": "",
    }
    fitting = [n for n in nodes if _fits_node(spec, n.data)]
    if fitting and spec.gpu_count > 0:

        def price_of(n: Any) -> Decimal:
            block = blocks.get(str(n.data.get("block_id")))
            return Decimal(block["price_per_gpu_hour"]) if block else Decimal(0)

        node = min(fitting, key=lambda n: (price_of(n), n.id))
        price = price_of(node)
        cost = price * spec.gpu_count * hours
        out.update(
            node={
                "node_id": node.id,
                "provider": node.data.get("provider"),
                "instance_type": node.data.get("instance_type"),
                "gpus_free": node.data.get("gpus_free"),
                "price_per_gpu_hour": money(price),
            },
            job_cost=money(cost),
            reason=(
                f"fits on READY node {node.id} ({node.data.get('gpus_free')} GPUs free) now: no purchase; "
                f"its share of that contract is ${money(cost)} "
                f"({spec.gpu_count} GPUs x ${money(price)}/GPU-h x {hours:.3f} h), already paid for"
            ),
        )
        return out
    tier = Tier(str(spec.tier).upper())
    candidates = [o for o in offers if _offer_fits(spec, o, settings, tier)]
    if not candidates:
        out.update(needs_purchase=True, reason="no offer of a scale group of this tier fits the job now")
        return out
    # as the controller routes (engine/groups.eligibility): one node big enough if any offer has one,
    # else a gang of the fewest nodes
    largest = max(int(o.gpu_count) for o in candidates)
    if spec.gpu_count <= largest:
        candidates = [o for o in candidates if o.gpu_count >= spec.gpu_count]
    else:
        fewest = math.ceil(spec.gpu_count / largest)
        candidates = [o for o in candidates if math.ceil(spec.gpu_count / int(o.gpu_count)) == fewest]
    offer = min(candidates, key=lambda o: (o.price_per_gpu_hour, o.provider, o.instance_type))
    offered = offer.price_per_gpu_hour
    assert offered is not None
    price = offered
    per_node = int(offer.gpu_count)
    node_count = max(1, math.ceil(spec.gpu_count / per_node))
    contract_s = max(
        Decimal(settings.controller.contract_length_s) / Decimal(str(settings.time_scale)),
        Decimal(str(spec.expected_duration_sec)),
    )
    rate = price * per_node * node_count
    committed = rate * contract_s / HOUR
    cost = price * spec.gpu_count * hours
    out.update(
        needs_purchase=True,
        purchase={
            "provider": offer.provider,
            "instance_type": offer.instance_type,
            "region": offer.region,
            "gpu_model": offer.gpu_model,
            "gpus_per_node": per_node,
            "node_count": node_count,
            "price_per_gpu_hour": money(price),
            "price_per_hour": money(rate),
            "contract_s": float(contract_s),
            "committed": money(committed),
            "offers_that_fit": len(candidates),
        },
        job_cost=money(cost),
        new_commitment=money(committed),
        reason=(
            f"no READY node fits it: buys {node_count}x {offer.instance_type} on {offer.provider} at "
            f"${money(price)}/GPU-h (cheapest of {len(candidates)} offers that fit); the job's GPUs cost "
            f"${money(cost)} over {hours:.3f} h, the contract commits ${money(committed)} "
            f"(${money(rate)}/h for {float(contract_s):.0f} s)"
        ),
    )
    return out
