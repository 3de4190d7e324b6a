"""Protocol A's mechanics on tiny hand-built traces with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from scalar.sim.metrics import Recorder, discretise_at
from scalar.sim.policies.base import TieBreak
from scalar.sim.protocol_a import node_ranks, prepare_workload, run_once
from scalar.sim.synthetic import generate
from tests.sim.helpers import ScriptedRng, bind, drive, make_state, node, pod

# Two 1-GPU nodes: capacity 2000 milli, target at 1.3x = 2600 milli.
NODES = [node("n0", gpus=1), node("n1", gpus=1)]


def names(pods, workload) -> list[str]:
    return [pods[i].name for i in workload.order]


def test_shuffle_sorts_by_name_then_applies_the_permutation() -> None:
    pods = [pod("c", 0), pod("a", 0), pod("b", 0)]
    workload = prepare_workload(pods, 2000, 0.0, ScriptedRng(permutation=[2, 0, 1]))
    # Sorted by name: a, b, c; permutation [2, 0, 1] -> c, a, b. Ratio 0: no tuning.
    assert names(pods, workload) == ["c", "a", "b"]
    assert workload.tuning == "none"


def test_inflation_appends_draws_until_the_next_one_would_pass_the_target() -> None:
    pods = [pod("a", 1, 1000), pod("b", 1, 500), pod("c", 0)]
    # Total 1500. Draws (indices into the name-sorted list a, b, c): b -> 2000, c -> 2000 (CPU-only pods
    # never stop it), a -> 3000 > 2600: stop before a.
    rng = ScriptedRng(integers=[1, 2, 0])
    workload = prepare_workload(pods, 2000, 1.3, rng)
    assert names(pods, workload) == ["a", "b", "c", "b", "c"]
    assert workload.tuning == "up"
    assert workload.requested_milli == 2000
    assert rng.integer_bounds == [3, 3, 3]


def test_inflation_checks_the_per_gpu_milli_as_the_artifact_does() -> None:
    # Capacity 4000 milli, target 5200; the list asks 2100. The artifact's stop test adds a drawn pod's
    # per-GPU milli (1000 for a 2-GPU pod) but the running total grows by its whole request (2000).
    pods = [pod("a", 1, 100), pod("d", 2, 1000)]
    workload = prepare_workload(pods, 4000, 1.3, ScriptedRng(integers=[1, 1, 0]))
    # d: 2100 + 1000 <= 5200, total 4100; d: 4100 + 1000 <= 5200, total 6100 (900 over); a: 6200 > 5200.
    assert names(pods, workload) == ["a", "d", "d", "d"]
    assert workload.requested_milli == 6100


def test_lists_above_the_target_are_tuned_down_by_dropping_random_pods() -> None:
    pods = [pod("a", 2, 1000), pod("b", 1, 1000), pod("c", 1, 500), pod("d", 0)]  # 3500 > 2600
    # Order after the identity shuffle: a, b, c, d. Drop index 1 (b): 2500 <= 2600, stop.
    rng = ScriptedRng(integers=[1])
    workload = prepare_workload(pods, 2000, 1.3, rng)
    assert names(pods, workload) == ["a", "c", "d"]
    assert workload.tuning == "down" and workload.requested_milli == 2500
    # Dropping CPU-only pods does not help: keep drawing until the GPU total is at most the target.
    rng = ScriptedRng(integers=[3, 2, 0])
    workload = prepare_workload(pods, 2000, 1.3, rng)
    assert names(pods, workload) == ["b"]
    assert rng.integer_bounds == [4, 3, 2]


def test_failed_pods_are_dropped_and_later_pods_still_place() -> None:
    nodes = [node("n0", gpus=2, cpu=16_000)]
    pods = [
        pod("a", 2, 1000, cpu=8_000),
        pod("big", 1, 1000),
        pod("cpu", 0, cpu=8_000),
        pod("late", 0, cpu=9_000),
    ]
    state, views = make_state(nodes, pods)
    out = drive(bind("best-fit", state), state, views)
    # a takes both GPUs; big finds no GPU (dropped); cpu fits the 8 cores left; late needs 9 of 0 left.
    assert out == [(0, (0, 1)), (-1, ()), (0, ()), (-1, ())]
    assert state.used_milli == 2000 and int(state.cpu_left[0]) == 0


@pytest.mark.parametrize("policy", ["best-fit", "fgd", "scalar", "gpu-packing", "dotprod", "seed"])
def test_ties_go_to_the_smallest_node_name_of_the_run(policy: str) -> None:
    nodes = [node("n0", gpus=2), node("n1", gpus=2), node("n2", gpus=2)]
    pods = [pod("a", 1, 1000)]
    # The artifact names node i (in name order) "%04d-<name>" % perm[i]; the smallest prefix wins a tie.
    rank = node_ranks(nodes, ScriptedRng(permutation=[2, 0, 1]))
    assert rank.tolist() == [2, 0, 1]
    state, views = make_state(nodes, pods)
    chooser = bind(policy, state, rank=rank)
    assert chooser.choose(views[0], state.feasible(views[0]))[0] == 1


def test_random_tie_break_spreads_over_the_tied_nodes() -> None:
    nodes = [node(f"n{i}", gpus=1) for i in range(4)]
    state, views = make_state(nodes, [pod("a", 1, 1000)])
    tie = TieBreak("random", np.arange(4), np.random.default_rng(7))
    picks = {tie.pick(np.arange(4), np.zeros(4)) for _ in range(60)}
    assert picks == {0, 1, 2, 3}
    assert (
        TieBreak("name", np.array([3, 1, 2, 0]), np.random.default_rng(7)).pick(np.arange(4), np.zeros(4))
        == 3
    )
    with pytest.raises(ValueError, match="unknown tie-break"):
        TieBreak("first", np.arange(4), np.random.default_rng(0))
    del state, views


def test_allocation_ratio_is_sampled_per_arrived_percent_like_the_artifact() -> None:
    rec = Recorder(capacity_milli=10_000, size=6)
    # arrived %: 9.6 -> 10, 10.4 -> 10, 11 -> 11, 30 -> 30 ; allocated %: 5, 7, 9, 20.
    for arrived, used in [(960, 500), (1040, 700), (1100, 900), (3000, 2000)]:
        rec.record(arrived, used, float("nan"))
    alloc, frag = rec.curves()
    assert alloc[10] == 6.0  # mean of the two records rounding to 10%
    assert alloc[11] == 9.0
    assert alloc[12] == 9.0  # none at 12%: records at 11..13% are used
    assert alloc[9] == 6.0  # none at 9%: records at 8..10%
    assert alloc[20] is None  # nothing within 19..21%
    assert alloc[30] == 20.0
    assert frag is None  # no record near 90% arrived
    arrived = np.array([89.0, 90.0, 90.0, 91.0])
    assert discretise_at(arrived, np.array([1.0, 2.0, 4.0, 8.0]), 90) == 3.0
    assert discretise_at(np.array([89.0, 91.0]), np.array([1.0, 2.0]), 90) == 1.5


def test_same_seed_same_result_and_different_seeds_differ() -> None:
    nodes, pods = generate(3, n_nodes=30, n_pods=250)
    for policy in ("scalar", "random"):
        first = run_once(nodes, pods, policy, 11, keep_placements=True)
        again = run_once(nodes, pods, policy, 11, keep_placements=True)
        other = run_once(nodes, pods, policy, 12, keep_placements=True)
        assert first.placements == again.placements
        assert first.allocation == again.allocation
        assert first.placements != other.placements


def test_run_reports_pods_after_inflation_and_failures() -> None:
    nodes, pods = generate(5, n_nodes=20, n_pods=150)
    result = run_once(nodes, pods, "best-fit", 42, keep_placements=True)
    assert result.placements is not None
    assert result.pods == len(result.placements)
    assert result.failed_pods == sum(1 for _, n, _ in result.placements if n < 0)
    gpus = sum(n.gpus for n in nodes) * 1000
    requested = sum(pods[i].total_gpu_milli for i, _, _ in result.placements)
    assert requested <= 1.3 * gpus + 7000  # a multi-GPU draw may overshoot by at most 7 GPUs
    values = [v for v in result.allocation.values() if v is not None]
    assert values == sorted(values)  # no departures: allocation never falls
    assert 0 < values[-1] <= 100
