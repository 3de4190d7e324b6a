"""The scheduling pass scores each class of identical nodes once; its decisions are exactly the packer's.

Random clusters (several blocks, nodes partly filled by exclusive and shared jobs, some held for jobs)
and random jobs: ``NodeClasses.schedule`` must give the very decision ``schedule_job`` gives over the
allowed nodes (kind, node, GPUs, score, reason sentence) and the same rejection counts and examples.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.errors import DomainError
from scalar.domain.packing import schedule_job
from scalar.domain.packing_apply import book_job
from scalar.domain.packing_model import Block, Job, Node
from scalar.domain.tier import Tier
from scalar.engine.packing_classes import NodeClasses
from scalar.engine.scheduler import count_rejections

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def cluster(rng: random.Random) -> list[Node]:
    nodes: list[Node] = []
    for b in range(rng.randint(1, 3)):
        gpus = rng.choice((1, 2, 4, 8))
        block = Block(
            id=f"b{b}",
            provider=rng.choice(("sfcompute", "prime", "aws")),
            instance_type=f"{gpus}xH100",
            gpus_per_node=gpus,
            vram_per_gpu_gb=rng.choice((24.0, 48.0, 80.0)),
            cpu_per_node=rng.choice((16.0, 96.0)),
            ram_per_node_gb=rng.choice((64.0, 1024.0)),
            start_time=NOW - timedelta(hours=1),
            end_time=NOW + timedelta(seconds=rng.choice((900, 4000, 86400))),
            cost_per_hour=Decimal("10"),
            tier=rng.choice((Tier.FAST, Tier.FAST, Tier.FLEX)),
            gpu_model=rng.choice(("H100", "A100", None)),
        )
        for i in range(rng.randint(1, 7)):
            node = Node.empty(f"{block.id}-n{rng.randint(0, 99):02d}{i}", block)
            for k in range(rng.choice((0, 0, 1, 2, 3))):
                share = rng.random() < 0.3
                count = rng.randint(1, gpus)
                free = [s.index for s in node.gpu_slots if s.is_free or (share and s.job_ids)]
                if len(free) < count:
                    continue
                filler = Job(
                    f"f{i}{k}", node.tier, count, rng.choice((4.0, 10.0)), 2, 8, 100, share_gpu=share
                )
                try:
                    node = book_job(node, filler, rng.sample(free, count))
                except DomainError:  # a random booking the node refuses is simply skipped
                    continue
            nodes.append(node)
    nodes.sort(key=lambda n: n.id)
    return nodes


@settings(max_examples=200)
@given(st.integers(0, 2**32))
def test_class_decisions_equal_the_packers_decisions(seed: int) -> None:
    rng = random.Random(seed)
    nodes = cluster(rng)
    job = Job(
        id="job",
        tier=rng.choice((Tier.FAST, Tier.FLEX)),
        gpu_count=rng.choice((0, 1, 1, 2, 4, 8, 9)),
        vram_per_gpu_gb=rng.choice((0.0, 10.0, 30.0, 70.0)),
        cpu_cores=rng.choice((1.0, 8.0, 40.0)),
        ram_gb=rng.choice((4.0, 100.0)),
        expected_duration_sec=rng.choice((60.0, 1800.0, 7200.0)),
        gpu_models=rng.choice((None, ("H100",), ("A100", "H100"))),
        share_gpu=rng.random() < 0.3,
    )
    reserved = {n.id: {rng.choice(("job", "other"))} for n in nodes if rng.random() < 0.2}
    allowed = [n for n in nodes if "job" in reserved.get(n.id, {"job"})]
    expected = schedule_job(job, allowed, NOW, safety_margin_sec=300)
    got = NodeClasses(nodes, reserved).schedule(job, NOW, 300)
    assert got.decision.kind == expected.kind
    assert (got.decision.node_id, got.decision.gpu_indices) == (expected.node_id, expected.gpu_indices)
    assert got.decision.score == expected.score
    assert got.decision.reason == expected.reason
    assert got.counts == count_rejections(expected.rejections)


def test_classes_follow_bookings_placement_after_placement() -> None:
    rng = random.Random(8)
    nodes = cluster(rng)
    classes = NodeClasses(nodes, {})
    placed_count = 0
    for n in range(40):
        job = Job(f"j{n}", nodes[0].tier, rng.choice((1, 2)), 1.0, 1, 1, 60)
        current = sorted(classes.nodes.values(), key=lambda node: node.id)
        expected = schedule_job(job, current, NOW, safety_margin_sec=300)
        got = classes.schedule(job, NOW, 300)
        assert (got.decision.node_id, got.decision.gpu_indices, got.decision.reason) == (
            expected.node_id,
            expected.gpu_indices,
            expected.reason,
        )
        assert got.counts == count_rejections(expected.rejections)
        if got.decision.node_id is not None:
            node = book_job(classes.nodes[got.decision.node_id], job, got.decision.gpu_indices)
            classes.update(node, None)
            placed_count += 1
    assert placed_count > 5
