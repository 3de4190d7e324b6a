"""The scheduling pass's node classes rank by GPU model preference, price and CUDA exactly as the packer.

Clusters of blocks that differ in GPU model, price and CUDA version, jobs with and without ``gpu_models``
and ``cuda_versions``: ``NodeClasses.schedule`` gives ``schedule_job``'s decision and rejection counts.
"""

from __future__ import annotations

import random
from dataclasses import replace
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.packing import schedule_job
from scalar.domain.packing_model import Job
from scalar.domain.tier import Tier
from scalar.engine.packing_classes import NodeClasses
from scalar.engine.scheduler import count_rejections
from tests.engine.test_packing_classes import NOW, cluster


@settings(max_examples=200)
@given(st.integers(0, 2**32))
def test_class_decisions_equal_the_packers_with_preferences_prices_and_cuda(seed: int) -> None:
    rng = random.Random(seed)
    nodes = []
    blocks = {}
    for node in cluster(rng):
        block = blocks.setdefault(
            node.block.id,
            replace(
                node.block,
                cost_per_hour=Decimal(rng.choice((0, 8, 10, 16))),
                cuda_version=rng.choice(("12.4", "12.8", None)),
            ),
        )
        nodes.append(replace(node, block=block))
    job = Job(
        id="job",
        tier=rng.choice((Tier.FAST, Tier.FLEX)),
        gpu_count=rng.choice((0, 1, 1, 2, 4)),
        vram_per_gpu_gb=rng.choice((0.0, 10.0, 30.0)),
        cpu_cores=rng.choice((1.0, 8.0)),
        ram_gb=rng.choice((4.0, 100.0)),
        expected_duration_sec=rng.choice((60.0, 1800.0)),
        gpu_models=rng.choice((None, ("H100",), ("A100", "H100"), ("H100", "A100"))),
        cuda_versions=rng.choice((None, ("12.4",), ("12.8", "12.4"))),
        share_gpu=rng.random() < 0.3,
    )
    expected = schedule_job(job, nodes, NOW, safety_margin_sec=300)
    got = NodeClasses(nodes, {}).schedule(job, NOW, 300)
    assert got.decision.kind == expected.kind
    assert (got.decision.node_id, got.decision.gpu_indices) == (expected.node_id, expected.gpu_indices)
    assert got.decision.reason == expected.reason
    assert got.counts == count_rejections(expected.rejections)
