"""Consolidation's plan: restartable FLEX jobs leave an underused, expensive contract only when that pays;
a non-restartable or FAST job never moves, and no GPU is ever booked twice after the moves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.consolidation import (
    MOVE,
    ConsolidationPolicy,
    Contract,
    HeldJob,
    plan_moves,
)
from scalar.domain.contracts import work_rate
from scalar.domain.packing_apply import book_job, release_job
from scalar.domain.packing_model import Block, GpuSlot, Job, Node
from scalar.domain.tier import Tier

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _node(node_id: str, block_id: str, gpus: int, price: Decimal, tier: Tier = Tier.FLEX) -> Node:
    block = Block(
        id=block_id,
        provider="p",
        instance_type=f"{gpus}xH100",
        gpus_per_node=gpus,
        vram_per_gpu_gb=80,
        cpu_per_node=64,
        ram_per_node_gb=512,
        start_time=NOW - timedelta(hours=1),
        end_time=NOW + timedelta(days=2),
        cost_per_hour=price * gpus,
        tier=tier,
        gpu_model="H100",
    )
    return Node(node_id, block, tier, tuple(GpuSlot(i, 80) for i in range(gpus)))


def _job(
    job_id: str, gpus: int, *, tier: Tier = Tier.FLEX, restartable: bool = True, hours: float = 10
) -> Job:
    return Job(job_id, tier, gpus, 40, 4, 16, hours * 3600, restartable=restartable)


def _contract(block_id: str, node: Node, price: Decimal, *, sunk: bool) -> Contract:
    return Contract(
        block_id, (node.id,), price, node.block.end_time, Decimal(0) if sunk else Decimal(1), sunk
    )


Cluster = tuple[list[Contract], dict[str, Node], list[HeldJob]]


def _scene(restartable: bool = True, tier: Tier = Tier.FLEX, running_s: float = 600) -> Cluster:
    """A paid-whole 8-GPU block half used, and a $4/GPU-h 2-GPU node holding one 1-GPU job."""
    big = book_job(_node("big", "b-big", 8, Decimal("2")), _job("a", 4, restartable=False), (0, 1, 2, 3))
    small_node = _node("small", "b-small", 2, Decimal("4"), tier)
    job = _job("x", 1, tier=tier, restartable=restartable)
    small = book_job(small_node, job, (0,))
    contracts = [
        _contract("b-big", big, Decimal("2"), sunk=True),
        _contract("b-small", small, Decimal("4"), sunk=False),
    ]
    held = [HeldJob(_job("a", 4, restartable=False), ("big",), 600), HeldJob(job, ("small",), running_s)]
    return contracts, {"big": big, "small": small}, held


def test_a_restartable_flex_job_leaves_an_expensive_underused_node_for_paid_idle_gpus() -> None:
    contracts, nodes, held = _scene()
    [decision] = plan_moves(contracts, nodes, held, NOW)
    assert decision.block_id == "b-small" and decision.reason.code == MOVE
    [move] = decision.moves
    assert (move.job_id, move.from_node, move.to_node) == ("x", "small", "big")
    assert set(move.gpu_indices) <= {4, 5, 6, 7}
    # 2 GPUs x $4 for the job's remaining run vs (600 + 120) s x 1 GPU x $4. Its 10 h are A100 work: on
    # the H100 it runs 10 h / the H100's relative throughput, less the 600 s it has run.
    left = 36000 / work_rate("H100", Tier.FLEX) - 600
    assert work_rate("H100", Tier.FLEX) > 1
    assert decision.saving == Decimal("4") * 2 * Decimal(str(left)) / 3600
    assert decision.restart_cost == Decimal("4") * 720 / 3600
    assert "saves $" in decision.reason.message and "costs $" in decision.reason.message


def test_never_a_job_without_restartable_nor_a_fast_job() -> None:
    for restartable, tier in ((False, Tier.FLEX), (True, Tier.FAST)):
        contracts, nodes, held = _scene(restartable, tier)
        decisions = plan_moves(contracts, nodes, held, NOW)
        assert all(not d.moves for d in decisions)
        if tier is Tier.FLEX:  # the FAST node has no FAST target at all; the FLEX one says why it stays
            [d] = decisions
            assert "not restartable" in d.reason.message


def test_no_move_when_the_restart_costs_more_than_it_saves() -> None:
    # the job has run 9.9 of its 10 hours: 0.1 h saved on 2 GPUs, 9.9 h of progress lost on one
    contracts, nodes, held = _scene(running_s=9.9 * 3600)
    [d] = plan_moves(contracts, nodes, held, NOW)
    assert not d.moves and d.saving < d.restart_cost and "stays" in d.reason.message


def test_off_means_nothing_moves() -> None:
    contracts, nodes, held = _scene()
    assert plan_moves(contracts, nodes, held, NOW, ConsolidationPolicy(enabled=False)) == ()


@st.composite
def _clusters(draw: st.DrawFn) -> Cluster:
    contracts: list[Contract] = []
    nodes: dict[str, Node] = {}
    held: list[HeldJob] = []
    for b in range(draw(st.integers(2, 6))):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        price = Decimal(draw(st.sampled_from(["1", "2", "3", "4", "6"])))
        tier = draw(st.sampled_from([Tier.FLEX, Tier.FLEX, Tier.FAST]))
        node = _node(f"n{b}", f"b{b}", gpus, price, tier)
        free = list(range(gpus))
        for j in range(draw(st.integers(0, 3))):
            size = draw(st.integers(1, 4))
            if size > len(free):
                break
            job = _job(
                f"j{b}-{j}",
                size,
                tier=tier,
                restartable=draw(st.booleans()),
                hours=draw(st.sampled_from([0.5, 2, 10])),
            )
            indices = tuple(free[:size])
            free = free[size:]
            node = book_job(node, job, indices)
            held.append(HeldJob(job, (node.id,), draw(st.sampled_from([0.0, 60.0, 1800.0]))))
        nodes[node.id] = node
        contracts.append(_contract(f"b{b}", node, price, sunk=draw(st.booleans())))
    return contracts, nodes, held


@settings(max_examples=150, deadline=None)
@given(_clusters())
def test_moves_never_touch_a_fixed_job_and_never_double_book_a_gpu(cluster: Cluster) -> None:
    contracts, nodes, held = cluster
    by_id = {h.job.id: h for h in held}
    decisions = plan_moves(contracts, nodes, held, NOW)
    after = dict(nodes)
    moved: set[str] = set()
    for d in decisions:
        for m in d.moves:
            job = by_id[m.job_id].job
            assert job.restartable and job.tier is Tier.FLEX
            assert m.job_id not in moved
            moved.add(m.job_id)
            after[m.from_node] = release_job(after[m.from_node], job)
        if d.moves:  # an emptied contract: every job it held moved, and it saved more than it cost
            assert d.saving > d.restart_cost
            contract = next(c for c in contracts if c.block_id == d.block_id)
            assert all(after[n].free_gpu_count() == after[n].gpu_count for n in contract.node_ids)
    for d in decisions:
        for m in d.moves:
            job = by_id[m.job_id].job
            free = {s.index for s in after[m.to_node].gpu_slots if s.job_id is None and not s.job_ids}
            assert set(m.gpu_indices) <= free  # the GPUs were free: nothing double-booked
            after[m.to_node] = book_job(after[m.to_node], job, m.gpu_indices)  # raises on any conflict
