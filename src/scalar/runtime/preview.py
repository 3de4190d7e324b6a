"""What a job would cost before it is submitted (``POST /jobs/preview``, ``scalar submit`` asks with it).

The answer is the controller's own decision, not an estimate beside it: after every step the leader
publishes its decision state (``engine.snapshot``; the market's part only when it changed; the jobs as a
row each, rewritten only for the jobs the step changed: ``runtime/snapshot_store.py``) in the database
(``Leader.commit``, in the step's transaction); the preview reads that value in one read transaction
(one step's state, whole), restores it into a fresh
``Controller`` with the configured policy, submits the job to it and steps it once at the current time
(and, for a FLEX job still batching, once more when its batch would be released). What that copy does
with the job is the preview:

- a ``StartWork``: it runs on that READY node now, no purchase; its cost is its share of that contract
  (already paid for);
- a ``BuyCapacity`` serving it: the scale group, offer and contract bought, its rate and what it commits;
- waiting for a purchase already on its way, or held (no offer fits, budgets...): the reason, nothing new
  committed.

The job's cost (``job_cost``, placed or bought) is its GPUs x the price x its run hours on the GPU model
chosen (``run_hours``): a FAST job's duration is wall time, a FLEX job's is work in reference (A100)
GPU-hours, done at that model's ``domain.contracts.work_rate``, as the engine reads it.

Any process that can read the database can answer (the API need not hold the controller). The leader's
next real step decides for real; it differs only if the cluster changed in between: for a FLEX job that
waits for its batch, what happens until the batch is released (purchases filled, nodes booted, other
jobs) is not known to the preview, which steps the copy to that time with no other event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from scalar.domain.contracts import work_rate
from scalar.domain.money import micros_text
from scalar.domain.offers import Offer
from scalar.domain.reasons import Reason
from scalar.domain.tier import Tier
from scalar.engine import Controller
from scalar.engine.actions import BuyCapacity, StartWork
from scalar.engine.autoscaler import FLEX_WAITING
from scalar.engine.codec import CodecError
from scalar.engine.events import JobSpec, JobSubmitted
from scalar.engine.lifecycle import JobState
from scalar.engine.snapshot import budgets_of, restore
from scalar.engine.state import ClusterState
from scalar.engine.validation import validate_job_spec
from scalar.runtime.jobs import spec_from_fields
from scalar.runtime.settings import Settings
from scalar.runtime.snapshot_store import read_published
from scalar.runtime.views import HOUR
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


def run_hours(spec: JobSpec, gpu_model: str | None) -> Decimal:
    """The hours ``spec`` runs on a GPU of ``gpu_model``: its expected duration over the work units one
    GPU-hour of that model does for its tier (``domain.contracts.work_rate``: 1 for FAST, the model's
    throughput relative to the A100 for FLEX), as the engine expects its run (``domain.packing``
    ``expected_run_s``)."""
    rate = work_rate(gpu_model, Tier.parse(str(spec.tier)))
    return Decimal(str(spec.expected_duration_sec)) / Decimal(repr(rate)) / HOUR


def _base(spec: JobSpec) -> dict[str, Any]:
    return {
        "job": {
            "tier": str(spec.tier).upper(),
            "gpu_count": spec.gpu_count,
            "vram_per_gpu_gb": spec.vram_per_gpu_gb,
            "cpu_cores": spec.cpu_cores,
            "ram_gb": spec.ram_gb,
            "expected_duration_sec": spec.expected_duration_sec,
            "name": spec.name,
            "restartable": spec.restartable,
        },
        "currency": "USD",
        "needs_purchase": False,
        "node": None,
        "purchase": None,
        "waits_for": None,
        "job_cost": None,
        "new_commitment": "0.000000",
        "decided_by": None,
        "reason": "",
    }


def preview(store: Store, settings: Settings, spec: JobSpec, now: datetime) -> dict[str, Any]:
    """What the controller would do with ``spec`` now (module docstring); writes nothing."""
    out = _base(spec)
    try:
        with store.read() as tx:  # the header and the jobs' rows of one step
            published = read_published(tx)
        if published is None:
            out.update(
                needs_purchase=True,
                reason="the controller has not published its state yet (no step so far): try again in a moment",
            )
            return out
        data, market = published
        state = restore(data, market)
        budgets = budgets_of(data)
    except CodecError as err:
        out.update(
            needs_purchase=True,
            reason=f"the controller's published state does not decode ({err.message}): try again after its next step",
        )
        return out
    at = now if state.now is None or now > state.now else state.now
    out["decided_by"] = {
        "snapshot_at": None if state.now is None else state.now.isoformat(),
        "at": at.isoformat(),
    }
    controller = Controller(replace(settings.controller, budgets=budgets))
    controller.state = state
    spec = replace(spec, job_id=PREVIEW_ID, submitted_at=at)
    actions = controller.step(at, [JobSubmitted(f"preview:{at.isoformat()}", spec)])
    rec = state.jobs.get(PREVIEW_ID)
    if (
        rec is not None
        and rec.state is JobState.PENDING
        and rec.routing is not None
        and rec.routing.code == FLEX_WAITING
    ):
        later = at + timedelta(seconds=settings.controller.flex_batch_wait_s)
        actions = controller.step(later, [])
        out["decided_by"]["at"] = later.isoformat()
    for action in actions:
        if isinstance(action, StartWork) and action.job_id == PREVIEW_ID:
            return _placed(out, state, action, spec)
    for action in actions:
        if isinstance(action, BuyCapacity) and PREVIEW_ID in action.for_jobs:
            return _bought(out, state, action, spec)
    rec = state.jobs.get(PREVIEW_ID)
    why = "" if rec is None or rec.reason is None else rec.reason.message
    if rec is not None and rec.order_key is not None:
        order = state.orders.get(rec.order_key)
        out["waits_for"] = {
            "order_key": rec.order_key,
            "group": None if order is None else order.group,
        }
    if rec is not None and rec.state is JobState.REJECTED:
        out.update(needs_purchase=False, reason=f"the controller would reject it: {why}")
        return out
    out.update(needs_purchase=False, reason=f"no purchase now: {why.replace(PREVIEW_ID, 'the job')}")
    return out


def _placed(out: dict[str, Any], state: ClusterState, action: StartWork, spec: JobSpec) -> dict[str, Any]:
    node_id = action.node_id
    node = state.nodes[node_id]
    block = state.blocks.get(node.block_id)
    price = block.grant.price_per_gpu_hour if block is not None else Decimal(0)
    hours = run_hours(spec, node.node.block.gpu_model)
    cost = price * spec.gpu_count * hours
    free = node.node.free_gpu_count() + spec.gpu_count
    out.update(
        node={
            "node_id": node_id,
            "node_ids": list(action.node_ids),
            "provider": node.node.block.provider,
            "instance_type": node.node.block.instance_type,
            "gpus_free": free,
            "gpu_indices": list(action.gpu_indices),
            "price_per_gpu_hour": micros_text(price),
        },
        job_cost=micros_text(cost),
        reason=(
            f"the controller places it on READY node {node_id} ({node.node.block.provider} "
            f"{node.node.block.instance_type}, {free} GPUs free) now: no purchase; its share of that contract "
            f"is ${micros_text(cost)} ({spec.gpu_count} GPUs x ${micros_text(price)}/GPU-h x {hours:.3f} h), already paid "
            f"for. {action.reason.message.replace(PREVIEW_ID, 'the job')}"
        ),
    )
    return out


def _bought(out: dict[str, Any], state: ClusterState, action: BuyCapacity, spec: JobSpec) -> dict[str, Any]:
    req = action.request
    hours = run_hours(spec, req.gpu_model)
    group = state.groups.get(action.group)
    offered = None if group is None or group.offer is None else group.offer.price_per_gpu_hour
    price = offered if offered is not None else (req.limit_price_per_gpu_hour or Decimal(0))
    tier = Tier.parse(str(spec.tier))
    eligible = sum(
        1 for g in state.groups.values() if g.tier is tier and g.offer is not None and g.priority is not None
    )
    rate = price * req.gpus_per_node * req.node_count
    committed = rate * Decimal(req.duration_s) / HOUR
    cost = price * spec.gpu_count * hours
    out.update(
        needs_purchase=True,
        purchase={
            "group": action.group,
            "provider": req.provider,
            "instance_type": req.instance_type,
            "region": req.region,
            "gpu_model": req.gpu_model,
            "spot": req.spot,
            "gpus_per_node": req.gpus_per_node,
            "node_count": req.node_count,
            "price_per_gpu_hour": micros_text(price),
            "limit_price_per_gpu_hour": None
            if req.limit_price_per_gpu_hour is None
            else micros_text(req.limit_price_per_gpu_hour),
            "price_per_hour": micros_text(rate),
            "contract_s": float(req.duration_s),
            "committed": micros_text(committed),
            "for_jobs": len(action.for_jobs),
            "offers_that_fit": eligible,
        },
        job_cost=micros_text(cost),
        new_commitment=micros_text(committed),
        reason=(
            f"the controller buys {req.node_count}x {req.instance_type} on {req.provider} at "
            f"${micros_text(price)}/GPU-h for it (and {len(action.for_jobs) - 1} other waiting jobs); the job's GPUs "
            f"cost ${micros_text(cost)} over {hours:.3f} h, the contract commits ${micros_text(committed)} "
            f"(${micros_text(rate)}/h for {req.duration_s} s). {action.reason.message.replace(PREVIEW_ID, 'the job')}"
        ),
    )
    return out
