"""The pending index's per-shape queue against a plain sorted list: order, removal, chunk splits and
``next_after`` (the next job shorter than a bound) on queues long enough to split into many chunks."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from scalar.domain.packing_model import order_pending
from scalar.engine import Controller
from scalar.engine.pending_index import ShapeQueue
from tests.engine.builders import T0, at, cancel, spec, submit


def _key(priority: int, second: int, seq: int) -> tuple[int, bool, object, int]:
    return (-priority, False, T0 + timedelta(seconds=second), seq)


def _check(queue: ShapeQueue, reference: dict[Any, tuple[str, float]], rng: random.Random, n: int) -> None:
    ordered = sorted(reference)
    assert [job for _, job in queue] == [reference[k][0] for k in ordered]
    for _ in range(n):
        after = rng.choice([None, *ordered])
        bound = rng.choice([float("inf"), 600.5, 1800.5, 3600.5, 7200.5, 601.0])
        expected = next(
            (
                (k, reference[k][0])
                for k in ordered
                if (after is None or k > after) and reference[k][1] < bound
            ),
            None,
        )
        assert queue.next_after(after, bound) == expected


@pytest.mark.parametrize("seed", range(6))
def test_a_shape_queue_answers_as_a_sorted_list(seed: int) -> None:
    rng = random.Random(seed)
    queue = ShapeQueue()
    reference: dict[Any, tuple[str, float]] = {}
    for seq in range(3000):  # several splits of 512-job chunks, with removals all along
        if seq % 100 == 99:
            _check(queue, reference, rng, 20)
        if reference and rng.random() < 0.3:
            key = rng.choice(sorted(reference))
            queue.remove(key)
            del reference[key]
            continue
        key = _key(rng.randint(0, 3), rng.randint(0, 500), seq)
        # durations mostly falling with arrival: later (shorter) jobs land in chunks made by longer ones
        duration = rng.choice([600.0, 1800.0, 3600.0, 7200.0]) * (2 - seq / 3000) + rng.random()
        queue.add(key, f"j{seq}", duration)
        reference[key] = (f"j{seq}", duration)
    _check(queue, reference, rng, 300)
    assert len(queue) == len(reference)


def test_the_index_merges_its_shapes_in_queue_order_and_forgets_removed_jobs() -> None:
    c = Controller()
    specs = [
        spec(f"j{i:02d}", 1 + i % 3, priority=i % 2, submitted_at=None if i % 7 == 0 else at(40 - i % 5))
        for i in range(60)
    ]
    c.step(at(0), submit(*specs))

    def reference() -> list[str]:
        jobs = [c.state.jobs[j].job for j in c.state.pending_ids]
        return [job.id for job in order_pending([j for j in jobs if j is not None])]

    assert len(c.state.pending_ids) == 60
    assert list(c.state.pending_index.ordered()) == reference()
    c.step(at(1), [cancel(f"j{i:02d}") for i in range(0, 60, 4)])
    assert list(c.state.pending_index.ordered()) == reference()
    assert len(c.state.pending_index) == 45
    assert "j00" not in c.state.pending_index.entries
