"""Invariants the controller keeps after every step, checked on its internal state."""

from __future__ import annotations

from collections.abc import Iterable

from scalar.domain.tier import Tier
from scalar.engine import Action, BuyCapacity, Controller, JobState
from scalar.engine.lifecycle import LIVE_NODE_STATES

EPS = 1e-6


def check_bookings(c: Controller) -> None:
    """No GPU booked twice, no resource over-allocated, every job in exactly one place."""
    state = c.state
    held: dict[tuple[str, int], set[str]] = {}
    for node_id, rec in state.nodes.items():
        node = rec.node
        assert node.cpu_used <= node.block.cpu_per_node + EPS, node_id
        assert node.ram_used_gb <= node.block.ram_per_node_gb + EPS, node_id
        for slot in node.gpu_slots:
            assert slot.vram_used_gb <= slot.vram_total_gb + EPS, (node_id, slot)
            assert not (slot.job_id and slot.job_ids), (node_id, slot)
            holders = {slot.job_id} if slot.job_id else set(slot.job_ids)
            if holders:
                held[(node_id, slot.index)] = holders
        on_slots = {j for (n, _), jobs in held.items() if n == node_id for j in jobs}
        assert on_slots <= set(rec.jobs), (node_id, on_slots, rec.jobs)
        if rec.state not in LIVE_NODE_STATES:
            assert not rec.jobs, f"dead node {node_id} still holds {rec.jobs}"
        cpu = sum(state.jobs[j].parts[node_id].cpu_cores for j in rec.jobs)
        assert abs(cpu - node.cpu_used) < EPS, (node_id, cpu, node.cpu_used)
    for job_id, rec in state.jobs.items():
        placed = rec.state in (JobState.SCHEDULED, JobState.RUNNING)
        assert (job_id in state.pending_ids) == (rec.state is JobState.PENDING), job_id
        if not placed:
            assert not rec.parts and not rec.placements, (job_id, rec.state, rec.placements)
            assert all(job_id not in n.jobs for n in state.nodes.values()), job_id
            continue
        assert rec.job is not None and rec.parts, job_id
        gpus = 0
        for node_id, indices in rec.placements.items():
            node = state.nodes[node_id]
            assert node.state in LIVE_NODE_STATES and job_id in node.jobs, (job_id, node_id)
            for index in indices:
                assert job_id in held.get((node_id, index), set()), (job_id, node_id, index)
                gpus += 1
        assert gpus == rec.job.gpu_count, (job_id, gpus, rec.job.gpu_count)
        if len(rec.parts) > 1:  # a gang lives on nodes of one block
            assert len({state.nodes[n].block_id for n in rec.parts}) == 1, job_id
    exclusive = {}
    for key, jobs in held.items():
        if len(jobs) > 1:  # a shared GPU: every job on it opted in
            assert all(state.jobs[j].job is not None and state.jobs[j].job.share_gpu for j in jobs), key  # type: ignore[union-attr]
        exclusive[key] = jobs
    check_open_blocks(c)


def check_actions(history: Iterable[list[Action]], c: Controller) -> None:
    """Action ids unique; a FLEX purchase never above the FLEX cap."""
    ids: set[str] = set()
    cap = c.config.cap_for(Tier.FLEX)
    for actions in history:
        for action in actions:
            assert action.action_id not in ids, f"action id {action.action_id} used twice"
            ids.add(action.action_id)
            if isinstance(action, BuyCapacity) and action.request.tier is Tier.FLEX and cap is not None:
                assert action.request.limit_price_per_gpu_hour is not None
                assert action.request.limit_price_per_gpu_hour <= cap, action


def check_open_blocks(c: Controller) -> None:
    """The state's open-block index walks exactly the open blocks, in purchase order."""
    state = c.state
    assert [b.grant.block_id for b in state.open_blocks()] == [
        b.grant.block_id for b in state.blocks.values() if b.open
    ]


def check_all(c: Controller, history: Iterable[list[Action]], submitted: Iterable[str]) -> None:
    check_bookings(c)
    check_actions(history, c)
    assert set(c.state.jobs) == set(submitted), "jobs appeared or vanished"
