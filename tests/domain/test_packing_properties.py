"""Invariants of seed 001's packing, on random clusters and jobs.

A placement never over-commits GPUs, VRAM, CPU or RAM and never uses a node that expires too soon; every
node not chosen has a reason; the choice does not depend on the order of the nodes; the GPUs picked are the
least fragmented set; applying a sequence of decisions never books a GPU twice (for jobs that do not share)
or above its VRAM.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import timedelta
from decimal import Decimal
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.packing import BIN_PACK_SAFETY_MARGIN_SEC, LOWER_SCORE, schedule_job
from scalar.domain.packing_apply import PlacementConflictError, apply_placement
from scalar.domain.packing_model import Block, GpuSlot, Job, Node, order_pending
from scalar.domain.packing_score import fragmentation
from scalar.domain.tier import Tier
from tests.domain.test_packing import NOW

TIERS = st.sampled_from([Tier.FAST, Tier.FAST, Tier.FAST, Tier.FLEX])
MODELS = ["H100", "A100"]


def amounts(top: float) -> st.SearchStrategy[float]:
    """Quarter steps (exact sums) mixed with arbitrary floats (rounding at the edges)."""
    quarters = st.integers(0, int(top * 4)).map(lambda q: q / 4)
    return st.one_of(quarters, st.floats(0, top, allow_nan=False, allow_infinity=False))


@st.composite
def gpu_slot(draw: st.DrawFn, index: int, vram_gb: float) -> GpuSlot:
    state = draw(st.sampled_from(["free", "free", "free", "held", "shared", "shared", "unowned"]))
    if state == "free":
        return GpuSlot(index, vram_gb)
    used = draw(amounts(vram_gb))
    if state == "held":
        return GpuSlot(index, vram_gb, used, job_id=f"old-{index}")
    if state == "shared":
        count = draw(st.integers(1, 3))
        return GpuSlot(index, vram_gb, used, job_ids=tuple(f"old-{index}-{k}" for k in range(count)))
    return GpuSlot(index, vram_gb, used)


@st.composite
def a_node(draw: st.DrawFn, node_id: str) -> Node:
    gpus = draw(st.integers(0, 8))
    vram_gb = draw(st.sampled_from([24.0, 40.0, 80.0]))
    cpu = draw(st.sampled_from([16.0, 64.0]))
    ram = draw(st.sampled_from([128.0, 512.0]))
    tier = draw(TIERS)
    blk = Block(
        id=f"blk-{node_id}",
        provider=draw(st.sampled_from(["prime", "sfcompute", "runpod"])),
        instance_type="x",
        gpus_per_node=gpus,
        vram_per_gpu_gb=vram_gb,
        cpu_per_node=cpu,
        ram_per_node_gb=ram,
        start_time=NOW - timedelta(hours=1),
        end_time=NOW + timedelta(seconds=draw(st.one_of(st.integers(-3600, 30 * 3600), st.just(48 * 3600)))),
        cost_per_hour=Decimal("10"),
        tier=tier,
        gpu_model=draw(st.sampled_from([*MODELS, None])),
    )
    slots = tuple(draw(gpu_slot(i, vram_gb)) for i in range(gpus) if draw(st.integers(0, 9)) > 0)
    return Node(
        id=node_id,
        block=blk,
        tier=draw(st.sampled_from([tier, tier, tier, Tier.FAST, Tier.FLEX])),
        gpu_slots=slots,
        cpu_used=draw(amounts(cpu / 2)),
        ram_used_gb=draw(amounts(ram / 2)),
    )


@st.composite
def cluster(draw: st.DrawFn, max_nodes: int = 6) -> list[Node]:
    count = draw(st.integers(0, max_nodes))
    return [draw(a_node(f"n{i}")) for i in range(count)]


@st.composite
def a_job(draw: st.DrawFn, job_id: str = "j") -> Job:
    return Job(
        id=job_id,
        tier=draw(TIERS),
        gpu_count=draw(st.one_of(st.integers(0, 3), st.integers(0, 9))),
        vram_per_gpu_gb=draw(st.one_of(amounts(24), amounts(90))),
        cpu_cores=draw(st.one_of(amounts(8), amounts(40))),
        ram_gb=draw(st.one_of(amounts(32), amounts(300))),
        expected_duration_sec=draw(st.integers(0, 12 * 3600)),
        priority=draw(st.integers(0, 3)),
        gpu_models=draw(st.sampled_from([None, None, None, ("H100",), ("H100", "A100")])),
        share_gpu=draw(st.booleans()),
    )


def assert_within_capacity(nodes: tuple[Node, ...] | list[Node]) -> None:
    for node in nodes:
        assert node.cpu_used <= node.block.cpu_per_node
        assert node.ram_used_gb <= node.block.ram_per_node_gb
        for slot in node.gpu_slots:
            assert 0 <= slot.vram_used_gb <= slot.vram_total_gb
            assert slot.job_id is None or not slot.job_ids


@given(nodes=cluster(), job=a_job())
def test_a_placement_never_overcommits_nor_uses_a_node_that_expires_too_soon(
    nodes: list[Node], job: Job
) -> None:
    decision = schedule_job(job, nodes, NOW)

    chosen = [n for n in nodes if n.id == decision.node_id]
    rejected = [r.node_id for r in decision.rejections]
    assert sorted(rejected + [n.id for n in chosen]) == sorted(n.id for n in nodes)
    if not decision.placed:
        assert chosen == []
        return
    (node,) = chosen
    assert node.tier == job.tier
    assert job.allows_model(node.gpu_model)
    assert node.time_to_expiry(NOW) >= job.expected_duration_sec + BIN_PACK_SAFETY_MARGIN_SEC
    assert node.cpu_used + job.cpu_cores <= node.block.cpu_per_node
    assert node.ram_used_gb + job.ram_gb <= node.block.ram_per_node_gb
    assert len(set(decision.gpu_indices)) == len(decision.gpu_indices) == job.gpu_count
    for index in decision.gpu_indices:
        slot = node.slot(index)
        assert slot is not None
        assert slot.job_id is None
        assert not slot.job_ids or (job.share_gpu and job.vram_per_gpu_gb < slot.vram_total_gb)
        assert slot.vram_used_gb + job.vram_per_gpu_gb <= slot.vram_total_gb
    assert decision.score is not None
    for rejection in decision.rejections:
        if rejection.reason.code == LOWER_SCORE:
            assert rejection.score is not None
            assert round(rejection.score, 9) <= round(decision.score.score, 9)
    assert_within_capacity(apply_placement(nodes, decision, job))


def can_take(job: Job, slot: GpuSlot) -> bool:
    """The oracle: ``job`` may go on ``slot`` now. A GPU held alone takes nothing more, a shared GPU only a
    job that shares on it, a free GPU any job; and the VRAM must fit (booking's own expression)."""
    if slot.job_id is not None or (slot.job_ids and not job.shares_on(slot)):
        return False
    return slot.vram_used_gb + job.vram_per_gpu_gb <= slot.vram_total_gb


@given(nodes=cluster(max_nodes=3), job=a_job())
def test_the_gpus_picked_are_the_least_fragmented_set(nodes: list[Node], job: Job) -> None:
    decision = schedule_job(job, nodes, NOW)
    if not decision.placed or job.gpu_count < 2:
        return
    (node,) = [n for n in nodes if n.id == decision.node_id]
    usable = [s.index for s in node.gpu_slots if can_take(job, s)]
    best = min(fragmentation(c) for c in combinations(usable, job.gpu_count))

    assert fragmentation(decision.gpu_indices) == best


@given(nodes=cluster(), job=a_job(), data=st.data())
def test_the_choice_does_not_depend_on_node_order(nodes: list[Node], job: Job, data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(nodes))

    first, second = schedule_job(job, nodes, NOW), schedule_job(job, shuffled, NOW)

    assert (first.kind, first.node_id, first.gpu_indices) == (second.kind, second.node_id, second.gpu_indices)


@settings(max_examples=100)
@given(nodes=cluster(), count=st.integers(1, 12), data=st.data())
def test_a_sequence_of_placements_never_double_books_a_gpu_nor_its_vram(
    nodes: list[Node], count: int, data: st.DataObject
) -> None:
    pending = [data.draw(a_job(f"new-{i}")) for i in range(count)]
    initial = {(n.id, s.index): s.vram_used_gb for n in nodes for s in n.gpu_slots}
    state = tuple(nodes)
    booked: dict[str, tuple[str, tuple[int, ...]]] = {}
    by_id = {j.id: j for j in pending}

    for job in order_pending(pending):
        decision = schedule_job(job, state, NOW)
        state = apply_placement(state, decision, job)
        if decision.placed:
            assert decision.node_id is not None
            booked[job.id] = (decision.node_id, decision.gpu_indices)
            if job.gpu_count:
                with pytest.raises(PlacementConflictError):
                    apply_placement(state, decision, job)

    assert_within_capacity(state)
    added: dict[tuple[str, int], float] = defaultdict(float)
    for node in state:
        for slot in node.gpu_slots:
            holders = [slot.job_id] if slot.job_id else list(slot.job_ids)
            new = [by_id[h] for h in holders if h in by_id]
            if slot.job_id in by_id:
                assert not by_id[slot.job_id].shares_on(slot)  # held alone: a non-sharing job
            if slot.job_ids and new:
                assert all(j.shares_on(slot) for j in new)  # shared only by jobs that share
            for j in new:
                assert booked[j.id] == (node.id, booked[j.id][1])
                assert slot.index in booked[j.id][1]
                added[(node.id, slot.index)] += j.vram_per_gpu_gb
            before = initial[(node.id, slot.index)]
            assert slot.vram_used_gb == pytest.approx(before + added[(node.id, slot.index)], abs=1e-6)
    for job_id, (node_id, indices) in booked.items():
        (node,) = [n for n in state if n.id == node_id]
        assert sorted(s.index for s in node.gpu_slots if s.holds(job_id)) == sorted(indices)


@settings(max_examples=100, deadline=None)
@given(cores=st.lists(st.sampled_from([0.1, 0.2, 0.3, 1.1, 3.152, 2.7]), min_size=1, max_size=20))
def test_fractional_requests_that_add_up_to_a_whole_leave_exactly_the_rest_free(cores: list[float]) -> None:
    """Booked and released in any order, fractional CPU requests leave the node's usage on the 1e-9 grid: a
    node whose jobs use exactly 31 of its 32 cores still takes a 1-core job (a float sum read 31.00000000000001)."""
    from scalar.domain.packing_apply import book_job, release_job
    from tests.domain.test_packing import block, job, node

    total = round(sum(cores), 9)
    cap = math.ceil(total) + 1
    n = node("n", block(cpu=cap, gpus=len(cores) + 1, ram_gb=10_000))
    jobs = [job(1, 1.0, cpu=c, ram_gb=1.0, id=f"j{i}") for i, c in enumerate(cores)]
    for i, j in enumerate(jobs):
        n = book_job(n, j, (i,))
    assert n.cpu_used == total
    last = job(1, 1.0, cpu=cap - total, ram_gb=1.0, id="last")
    full = book_job(n, last, (len(cores),))  # the rest, to the core: never refused for float noise
    assert full.cpu_used == cap
    for j in reversed(jobs):
        full = release_job(full, j)
    assert full.cpu_used == round(cap - total, 9)
