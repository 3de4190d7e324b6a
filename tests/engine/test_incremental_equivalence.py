"""The incremental step decides exactly what the full one does.

The scheduler walks the pending index (engine/pending_index.py: per-shape queues merged by order key, a
failed shape's longer jobs never visited) and the autoscaler reads the first ``max_demand_entries`` of it
and routes them with the routing memo (``domain.routing``: a plan that refused a unit shape refuses it
again until it changes). The reference (``ControllerConfig(pending_index=False, routing_memo=False)``)
sorts every pending job and visits each one, every pass. Random workloads (seeded: ``derandomize``) run
through both must give the same actions, and the same state, reasons, routing and placement summary on
every job, including the jobs the indexed walk passed over without visiting, and the same published
state (``engine/snapshot.py``); and so must both runs restored from their snapshots halfway.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.market import BlockGrant, CapacityRequest, NodeEvent, NodeState, Order, OrderState
from scalar.domain.tier import Tier
from scalar.engine import (
    BuyCapacity,
    Controller,
    ControllerConfig,
    JobCancelRequested,
    JobSpec,
    JobSubmitted,
    NodeReported,
    OrderUpdated,
    StartWork,
    Tick,
    action_to_dict,
)
from scalar.engine.codec import encode
from scalar.engine.snapshot import market_snapshot, restore, snapshot
from tests.engine.builders import at, market, prime_offer, sf_offer
from tests.engine.builders import filled as fill

job = st.tuples(
    st.sampled_from([1, 1, 2, 4, 8, 16]),  # GPUs
    st.sampled_from(["FAST", "FAST", "FLEX", "BATCH"]),
    st.sampled_from([40.0, 80.0]),  # VRAM per GPU
    st.sampled_from([600.0, 1800.0, 3600.0, 5400.0, 9000.0]),  # duration: the block ends in 2 h
    st.integers(0, 2),  # priority
    st.sampled_from([None, 0, 30, 60]),  # submitted_at offset (None: not given)
    st.booleans(),  # runs a command (needs an agent node: none here)
)

step = st.tuples(
    st.lists(job, max_size=12),  # submitted this step
    st.integers(0, 4),  # running jobs that finish
    st.integers(0, 3),  # pending jobs cancelled
    st.booleans(),  # a node fails (its jobs are requeued)
)


def _spec(i: int, args: tuple[Any, ...], base: int) -> JobSpec:
    gpus, tier, vram, duration, priority, offset, command = args
    return JobSpec(
        job_id=f"j{i:04d}",
        tier=tier,
        gpu_count=gpus,
        vram_per_gpu_gb=vram,
        cpu_cores=4,
        ram_gb=32,
        expected_duration_sec=duration,
        priority=priority,
        submitted_at=None if offset is None else at(base + offset),
        command=("python", "train.py") if command and i % 3 == 0 else None,
    )


def _run(
    first: list[tuple[Any, ...]], steps: list[tuple[Any, ...]], *, incremental: bool, restore: bool = False
) -> list[Any]:
    """Both fast paths (``incremental``) or both references: the pending index and the routing memo."""
    config = ControllerConfig(pending_index=incremental, routing_memo=incremental, max_demand_entries=25)
    c = Controller(config)
    seq = iter(range(1, 10**6))
    out: list[Any] = []

    def sid(prefix: str) -> str:
        return f"{prefix}-{next(seq)}"

    out += c.step(at(0), [market(sf_offer("2.00"), prime_offer("2.50", gpus=2), prime_offer("2.20", gpus=8))])
    # A block of three 8-GPU nodes ending in two hours: long jobs do not fit (durations matter).
    nodes = ("a0", "a1", "a2")
    request = CapacityRequest("sfcompute", "8xH100", 3, 7200, None, Tier.FAST, "H100", 8)
    block = BlockGrant(
        "blk-a", "sfcompute", "8xH100", "H100", 8, 80, 96, 1024, at(1), at(7201), Decimal(2), nodes
    )
    order = Order("o-a", "adopted", OrderState.FILLED, request, block)
    out += c.step(at(1), [OrderUpdated(sid("fill"), "adopted", order)])
    out += c.step(
        at(1), [NodeReported(sid("r"), NodeEvent(n, "blk-a", at(1), NodeState.READY)) for n in nodes]
    )
    count = 0
    specs = [_spec(count + i, a, 2) for i, a in enumerate(first)]
    count += len(specs)
    actions = c.step(at(2), [JobSubmitted(sid("s"), s) for s in specs])
    out += actions
    running: dict[str, tuple[str, str]] = {}  # job -> (node, block)
    blocks = {"a0": "blk-a", "a1": "blk-a", "a2": "blk-a"}
    filled = 0
    t = 3
    for k, (new, done, cancels, fail) in enumerate(steps):
        if restore and k == 1:  # restored from its published state: the index is rebuilt from it
            c = _restored(c)
        for a in actions:
            if isinstance(a, StartWork):
                running[a.job_id] = (a.placements[0].node_id, blocks[a.placements[0].node_id])
        events: list[Any] = []
        for buy in [a for a in actions if isinstance(a, BuyCapacity)][:2]:
            # The first two purchases of a step fill: their nodes are held for the jobs they serve.
            filled += 1
            update = fill(buy, at(t), block_id=f"blk-b{filled}")
            events.append(update)
            grant = update.order.block
            assert grant is not None
            for n in grant.node_ids:
                blocks[n] = grant.block_id
                events.append(NodeReported(sid("r"), NodeEvent(n, grant.block_id, at(t), NodeState.READY)))
        for job_id in sorted(running)[:done]:
            node, blk = running.pop(job_id)
            events.append(
                NodeReported(sid("d"), NodeEvent(node, blk, at(t), job_id=job_id, job_succeeded=True))
            )
        pending = [j for j in c.state.pending_ids][:cancels]
        events += [JobCancelRequested(sid("c"), j) for j in pending]
        if fail and running:
            node, blk = running[sorted(running)[-1]]
            events.append(
                NodeReported(sid("f"), NodeEvent(node, blk, at(t), NodeState.FAILED, reason="gone"))
            )
            running = {j: v for j, v in running.items() if v[0] != node}
        specs = [_spec(count + i, a, t) for i, a in enumerate(new)]
        count += len(specs)
        events += [JobSubmitted(sid("s"), s) for s in specs]
        events.append(Tick(sid("t")))
        actions = c.step(at(t) + timedelta(seconds=31), events)  # past the autoscaler gate's full pass
        out += actions
        t += 40
    out = [action_to_dict(a) for a in out]
    live = {k for k, _ in snapshot(c.state)["jobs"]}  # a restored state holds only the live jobs
    for job_id, rec in sorted(c.state.jobs.items()):
        if restore and job_id not in live:
            continue
        out.append((job_id, rec.state, rec.reason, rec.routing, rec.routing_group, c.state.placement_of(rec)))
        explained = c.explain(job_id)
        out.append(explained.lines if explained is not None else None)
    out.append(c.state.unmet)
    out.append(c.state.last_routing)
    out.append(_published(c))  # the published state, placement summaries included
    return out


def _published(c: Controller) -> str:
    """The published state as a reader sees it: restored, each live job with its placement summary resolved
    (the header's skip log and the jobs' own summaries are how it is stored, not what it says)."""
    data = json.loads(json.dumps(snapshot(c.state)))
    copy = restore(data, json.loads(json.dumps(market_snapshot(c.state))))
    jobs = [[k, encode(replace(r, placement=copy.placement_of(r)))] for k, r in copy.jobs.items()]
    rest = {k: v for k, v in data.items() if k not in ("jobs", "skipped")}
    return json.dumps([rest, jobs])


def _restored(c: Controller) -> Controller:
    copy = Controller(c.config)
    data = json.loads(json.dumps(snapshot(c.state)))
    copy.state = restore(data, json.loads(json.dumps(market_snapshot(c.state))))
    return copy


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(job, min_size=1, max_size=40), st.lists(step, min_size=1, max_size=6))
def test_incremental_steps_match_the_full_passes(
    first: list[tuple[Any, ...]], steps: list[tuple[Any, ...]]
) -> None:
    assert _run(first, steps, incremental=True) == _run(first, steps, incremental=False)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.lists(job, min_size=1, max_size=40), st.lists(step, min_size=2, max_size=4))
def test_a_restored_incremental_controller_matches_the_full_passes(
    first: list[tuple[Any, ...]], steps: list[tuple[Any, ...]]
) -> None:
    """Both restored from their snapshots after the first step (the pending index rebuilt from
    ``pending_ids``, the skipped jobs' summaries published with them), they still decide alike."""
    fast = _run(first, steps, incremental=True, restore=True)
    assert fast == _run(first, steps, incremental=False, restore=True)


def test_many_jobs_of_few_shapes_match() -> None:
    """A queue much longer than what fits (most jobs passed over), several shapes and durations."""
    shapes = [(g, "FAST", 80.0, d, p, 0, False) for g in (1, 2, 8) for d in (600.0, 9000.0) for p in (0, 1)]
    first = [shapes[i % len(shapes)] for i in range(150)]
    steps = [([shapes[i] for i in range(0, 12, 3)], 3, 1, k == 2) for k in range(5)]
    assert _run(first, steps, incremental=True) == _run(first, steps, incremental=False)


def test_the_reference_really_differs_in_what_it_visits() -> None:
    """Guard: the indexed walk does visit fewer jobs than the reference (else the test above is void)."""
    from scalar.engine import scheduler

    visits: list[int] = []
    real = scheduler._Pass.try_job

    def counting(self: Any, rec: Any, job: Any) -> None:
        visits.append(1)
        real(self, rec, job)

    shapes = [(g, "FAST", 80.0, 600.0, 0, 0, False) for g in (1, 2, 8)]
    first = [shapes[i % 3] for i in range(120)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scheduler._Pass, "try_job", counting)
        _run(first, [], incremental=True)
        indexed = len(visits)
        visits.clear()
        _run(first, [], incremental=False)
        full = len(visits)
    assert indexed < full
