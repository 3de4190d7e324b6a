"""The online prior of Scalar's score (``scalar.domain.packing_scalar``): what it learns, when, and what it forgets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.packing_scalar import (
    FORGET_BELOW,
    HALF_LIFE,
    NodeView,
    Prior,
    Shape,
    ShapeWindow,
    best_shared_gpu,
    hole_waste_table,
    score_on,
)

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
