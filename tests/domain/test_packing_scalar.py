"""The online prior of Scalar's score (``scalar.domain.packing_scalar``): what it learns, when, and what it forgets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.packing import EXPIRES_TOO_SOON, LOWER_SCORE, PlacementKind, evaluate_node, schedule_job
from scalar.domain.packing_model import Block, Job, Node
from scalar.domain.packing_scalar import (
    EXPIRY_TICKS,
    FORGET_BELOW,
    HALF_LIFE,
    NodeView,
    Prior,
    Shape,
    ShapeWindow,
    best_shared_gpu,
    hole_waste_table,
    job_shape,
    score_on,
)
from scalar.domain.tier import Tier

WHOLE = Shape(8_000, 32_768, 1)
HALF = Shape(4_000, 16_384, 1, 500)


def test_the_prior_is_relearnt_after_1_2_4_jobs_and_then_every_512() -> None:
    window = ShapeWindow()
    learnt_at = [i + 1 for i in range(2_100) if window.observe(WHOLE)]
    assert learnt_at == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1536, 2048]


def test_a_shape_not_seen_for_20_half_lives_is_forgotten() -> None:
    window = ShapeWindow()
    window.observe(HALF)
    for _ in range(21 * HALF_LIFE):
        window.observe(WHOLE)
    assert HALF not in window.seen and HALF not in window.prior.weights
    assert min(window.seen.values()) >= FORGET_BELOW


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.sampled_from([WHOLE, HALF, Shape(2_000, 4_096, 0), Shape(16_000, 65_536, 2)]),
        min_size=1,
        max_size=80,
    )
)
def test_the_prior_reads_only_the_jobs_seen_so_far(shapes: list[Shape]) -> None:
    """Two windows fed the same first jobs hold the same prior, whatever comes after."""
    a, b = ShapeWindow(), ShapeWindow()
    cut = len(shapes) // 2
    for s in shapes[:cut]:
        a.observe(s)
        b.observe(s)
    assert a.seen == b.seen and a.prior.weights == b.prior.weights
    for s in shapes[cut:]:
        a.observe(s)
    assert a.arrived == len(shapes) and b.arrived == cut


def test_a_hole_only_the_rare_tiny_jobs_fill_is_expected_to_stay_dead() -> None:
    table = hole_waste_table({650: 10.0, 320: 10.0, 30: 0.1})
    assert table[0] == 0.0
    assert table[30] < table[210]  # a 30-milli hole wastes less than a 210 one
    assert all(0 <= table[h] <= h for h in range(1001))


def test_a_sharing_job_goes_next_to_the_job_that_leaves_the_smallest_dead_hole() -> None:
    # one GPU next to a 650-milli job (350 idle), one next to a 470 (530 idle); a 320-milli job leaves 30
    # on the first, 210 on the second, which only rare tiny jobs fill
    prior = Prior(
        {
            Shape(1_000, 1_024, 1, 320): 10.0,
            Shape(1_000, 1_024, 1, 650): 10.0,
            Shape(1_000, 1_024, 1, 100): 0.2,
        }
    )
    scale = prior.at(1000)
    view = NodeView((350, 530, 0, 0), 64_000, 262_144, "GA")
    found = best_shared_gpu(scale, view, Shape(1_000, 1_024, 1, 320))
    assert found is not None and found[1] == 0


def test_cpu_a_gpu_needs_is_kept_for_it_stranding_counts() -> None:
    # GPU jobs need 8 cores per GPU; a CPU-only job on a node with 2 idle GPUs and 16 cores strands them
    prior = Prior({Shape(8_000, 8_192, 1): 10.0, Shape(8_000, 8_192, 0): 1.0})
    scale = prior.at(1000)
    gpu_node = NodeView((1000, 1000), 16_000, 262_144, "GA")
    cpu_node = NodeView((), 64_000, 262_144, None)
    job = Shape(8_000, 8_192, 0)
    assert score_on(scale, cpu_node, job, []) > score_on(scale, gpu_node, job, [])


# --- seed 001's expiry term, under Scalar's score ----------------------------------------------------------

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
HOUR = 3600.0


def seed_node(node_id: str, hours_left: float) -> Node:
    """The seed's node: 8 GPUs x 80 GB, 64 cores, 512 GB RAM, on a Prime Intellect block ending then."""
    block = Block(
        id=f"blk-{node_id}",
        provider="prime",
        instance_type="8xH100",
        gpus_per_node=8,
        vram_per_gpu_gb=80.0,
        cpu_per_node=64,
        ram_per_node_gb=512.0,
        start_time=NOW - timedelta(hours=1),
        end_time=NOW + timedelta(hours=hours_left),
        cost_per_hour=Decimal("16.00"),
        tier=Tier.FAST,
        gpu_model="H100",
    )
    return Node.empty(node_id, block)


def test_seed_001s_expiry_term_filters_and_penalises_under_the_scalar_score() -> None:
    """Seed 001 (docs/decisions/packing.md): a node ending before the job's run + 300 s is filtered out; one
    ending within twice the run pays ``expiry_penalty = 1 - time_left / (2 x run)``, here 0.3 of a whole
    GPU per unit (``EXPIRY_TICKS`` ticks), so an equal node that outlives the job wins though its id is
    larger."""
    one_hour = Job("job-1", Tier.FAST, 2, 40.0, 8, 64.0, HOUR)
    window = ShapeWindow()
    window.observe(job_shape(one_hour))  # the controller counts the job in when it is submitted
    prior = window.prior
    gone = seed_node("a-gone", 0.5)  # ends in 30 min: before the 1 h run
    soon = seed_node("b-soon", 1.5)  # ends within 2 h: penalty 1 - 1.5 / 2 = 0.25
    late = seed_node("c-late", 10)  # outlives the job twice over: no penalty

    decision = schedule_job(one_hour, [gone, soon, late], NOW, prior=prior)

    assert decision.kind is PlacementKind.EXISTING_NODE and decision.node_id == "c-late"
    assert decision.score is not None and decision.score.expiry_penalty == 0.0
    by_node = {r.node_id: r for r in decision.rejections}
    assert by_node["a-gone"].reason.code == EXPIRES_TOO_SOON
    assert by_node["b-soon"].reason.code == LOWER_SCORE
    assert by_node["b-soon"].score == decision.score.score - EXPIRY_TICKS * 0.25
    penalised = evaluate_node(one_hour, soon, NOW, prior=prior).score
    unpenalised = evaluate_node(one_hour, late, NOW, prior=prior).score
    assert penalised is not None and unpenalised is not None
    assert penalised.expiry_penalty == pytest.approx(0.25)
    assert penalised.score == unpenalised.score - EXPIRY_TICKS * 0.25
    # without the term the two nodes would tie and the smaller id, b-soon, would win
    assert penalised.score + EXPIRY_TICKS * penalised.expiry_penalty == unpenalised.score
