"""The `seed` policy's fast path decides exactly as seed 001's literal packer; the speed benchmark runs.

``bench.speed.side_by_side`` raises on the first decision that differs, so each run here is an assertion
over every job it places (with departures, GPU sharing, multi-GPU windows and GPU-model constraints).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from bench import speed

from scalar.sim.seed_reference import RefNode, RefPod, reference_choose
from scalar.sim.synthetic import generate
from scalar.sim.traces import write_nodes, write_pods
from tests.sim.helpers import make_state, node, pod

pytestmark = pytest.mark.slow  # the speed benchmark runs


def jobs_of(pods: list) -> list[speed.Job]:  # type: ignore[type-arg]
    return [
        speed.Job(p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.gpu_spec) for p in pods if p.num_gpu
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reference_and_optimized_decide_identically_with_departures(seed: int) -> None:
    nodes, pods = generate(seed, n_nodes=40, n_pods=900, spec_share=0.2)
    jobs = jobs_of(pods)
    result = speed.side_by_side("tiny", nodes, jobs, seed=seed)
    assert result.identical == len(jobs) == result.placed + result.failed
    assert result.placed > 300 and result.failed > 0  # busy enough that some jobs cannot be placed


def test_after_a_warm_up_by_the_fast_path_the_reference_takes_over_the_same_cluster() -> None:
    nodes, pods = generate(7, n_nodes=30, n_pods=800)
    jobs = jobs_of(pods)
    result = speed.side_by_side("warm", nodes, jobs[300:], warmup=jobs[:300], seed=7)
    assert result.warmup_jobs == 300 and result.identical == len(jobs) - 300


def test_the_reference_follows_the_seed_pseudocode_on_a_hand_built_case() -> None:
    # Same utilization after placement on both nodes; node 0's free GPUs are spread out, node 1's adjacent:
    # the fragmentation penalty sends the 2-GPU pod to node 1, on its two adjacent GPUs.
    spread = RefNode("G2", 96_000, 393_216, [1000, 0, 1000, 0])
    tight = RefNode("G2", 96_000, 393_216, [0, 0, 1000, 1000])
    assert reference_choose([spread, tight], RefPod(1000, 1000, 2, 1000), [0, 1]) == (1, [2, 3])
    # A sharing pod takes the tightest GPU that fits; a pod too big for every node gets None.
    shared = RefNode("G2", 96_000, 393_216, [1000, 300, 600, 1000])
    assert reference_choose([shared], RefPod(1000, 1000, 1, 500), [0]) == (0, [2])
    assert reference_choose([shared], RefPod(1000, 1000, 3, 1000), [0]) is None
    assert reference_choose([shared], RefPod(1000, 1000, 1, 500, ("T4",)), [0]) is None


def test_remove_undoes_place_including_the_fragmentation_profile() -> None:
    state, pods = make_state([node("a", 4), node("b", 2, model="T4")], [pod("p", 1, 500), pod("q", 2)])
    state.track_fragmentation()
    before = (
        state.gpu.copy(),
        state.cpu_left.copy(),
        state.idle.copy(),
        state.frag.copy(),
        state.amount.copy(),
    )
    state.place(pods[0], 0, [1])
    state.place(pods[1], 0, [2, 3])
    state.remove(pods[1], 0, [2, 3])
    state.remove(pods[0], 0, [1])
    after = (state.gpu, state.cpu_left, state.idle, state.frag, state.amount)
    assert all(np.array_equal(x, y) for x, y in zip(before, after, strict=True))
    assert state.used_milli == 0 and state.frag_total == pytest.approx(float(state.frag.sum()))
    with pytest.raises(ValueError, match="was not on GPU"):
        state.remove(pods[0], 0, [1])


def test_bench_speed_smoke_writes_its_section_and_caches(tmp_path: Path) -> None:
    nodes, pods = generate(4, n_nodes=25, n_pods=400)
    write_nodes(tmp_path / "nodes.csv", nodes)
    write_pods(tmp_path / "pods.csv", pods)
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    args = [
        "--nodes", str(tmp_path / "nodes.csv"), "--pods", str(tmp_path / "pods.csv"),
        "--openb-jobs", "300", "--big-jobs", "30", "--big-nodes", "40", "--no-protocol-a",
        "--cache-dir", str(tmp_path / "cache"), "--output", str(output),
    ]  # fmt: skip
    assert speed.main(args) == 0
    text = output.read_text()
    assert "kept" in text and text.count(speed.START) == 1 and text.count(speed.END) == 1
    rows = re.findall(
        r"^\| (openb|40 x 8 GPUs) \(\d+ nodes\) \| [\d,]+ \| ([\d,]+) \| ([\d,]+) \|", text, re.M
    )
    assert [name for name, *_ in rows] == ["openb", "40 x 8 GPUs"]
    assert [(n, m) for _, n, m in rows] == [("300", "300"), ("30", "30")]  # every decision compared equal
    assert len(list((tmp_path / "cache").glob("speed-*.json"))) == 1
    assert speed.main(args) == 0  # from the cache: the same section
    assert output.read_text() == text
