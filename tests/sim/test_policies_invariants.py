"""Every policy respects every node's CPU, memory, per-GPU milli and GPU-model constraint."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.sim.policies import POLICIES
from scalar.sim.policies.scalar import ScalarPolicy
from scalar.sim.traces import GPU_MILLI, PodSpec
from tests.sim.helpers import bind, drive, make_state, node, pod

MODELS = ["A10", "G2", "T4"]

node_strategy = st.builds(
    lambda gpus, cpu, mem, model: (gpus, cpu, mem, model),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([4_000, 16_000, 64_000, 96_000]),
    st.sampled_from([8_192, 65_536, 393_216]),
    st.sampled_from(MODELS),
)
pod_strategy = st.builds(
    lambda shape, cpu, mem, spec: (shape, cpu, mem, spec),
    st.sampled_from(
        [(0, 0), (1, 1000), (1, 810), (1, 470), (1, 320), (1, 50), (2, 1000), (4, 1000), (8, 1000)]
    ),
    st.sampled_from([500, 3_152, 12_000, 40_000]),
    st.sampled_from([1_024, 16_384, 131_072]),
    st.sampled_from([(), (), ("T4",), ("A10", "G2")]),
)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(max_examples=40)
@given(
    nodes=st.lists(node_strategy, min_size=1, max_size=6),
    pods=st.lists(pod_strategy, min_size=1, max_size=40),
    seed=st.integers(0, 1000),
    tie_break=st.sampled_from(["name", "random"]),
)
def test_no_policy_over_commits_a_node(
    policy: str, nodes: list, pods: list, seed: int, tie_break: str
) -> None:
    node_specs = [node(f"n{i}", g, c, m, model) for i, (g, c, m, model) in enumerate(nodes)]
    pod_specs = [pod(f"p{j}", s[0], s[1], cpu, mem, spec) for j, (s, cpu, mem, spec) in enumerate(pods)]
    state, views = make_state(node_specs, pod_specs)
    chooser = bind(policy, state, tie_break=tie_break, seed=seed)
    used_cpu = np.zeros(state.n, dtype=np.int64)
    used_mem = np.zeros(state.n, dtype=np.int64)
    used_gpu = np.zeros((state.n, state.width), dtype=np.int64)
    for p, spec in zip(views, pod_specs, strict=True):
        feasible = state.feasible(p)
        if len(feasible) == 0:
            continue
        n, gpus = chooser.choose(p, feasible)
        assert n in feasible.tolist()
        assert len(gpus) == p.num_gpu and len(set(gpus)) == p.num_gpu
        assert all(0 <= g < node_specs[n].gpus for g in gpus)
        if p.num_gpu and spec.gpu_spec:
            assert node_specs[n].model in spec.gpu_spec
        state.place(p, n, gpus)
        chooser.placed(p, n)
        used_cpu[n] += p.cpu
        used_mem[n] += p.mem
        for g in gpus:
            used_gpu[n, g] += p.milli
        assert used_cpu[n] <= node_specs[n].cpu_milli
        assert used_mem[n] <= node_specs[n].memory_mib
        assert (used_gpu[n] <= GPU_MILLI).all()
    assert (
        state.gpu == np.where(np.arange(state.width) < state.gpu_count[:, None], GPU_MILLI, 0) - used_gpu
    ).all()
    assert (state.cpu_left == state.cpu_cap - used_cpu).all()


def test_place_refuses_to_over_commit() -> None:
    pods = [
        pod("a", 1, 810, cpu=1_000),
        pod("b", 1, 470, cpu=1_000),
        pod("c", 0, cpu=4_000),
        pod("d", 1, 1000, cpu=1_000),
    ]
    state, views = make_state([node("n0", gpus=1, cpu=4_000)], pods)
    state.place(views[0], 0, [0])
    with pytest.raises(ValueError, match="does not fit GPU 0"):
        state.place(views[1], 0, [0])  # 810 + 470 > 1000 milli
    with pytest.raises(ValueError, match="cpu/memory"):
        state.place(views[2], 0, [])  # 1 + 4 cores > 4
    with pytest.raises(ValueError, match="needs 1 distinct GPUs"):
        state.place(views[3], 0, [])
    with pytest.raises(ValueError, match="does not fit GPU 1"):
        state.place(views[1], 0, [1])  # the node has one GPU
    assert int(state.cpu_left[0]) == 3_000 and state.gpu[0, 0] == 190


@settings(max_examples=40)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(["scalar", "scalar-list"]))
def test_scalar_small_batch_path_scores_exactly_like_the_vectorised_path(seed: int, policy: str) -> None:
    rng = np.random.default_rng(seed)
    nodes = [
        node(
            f"n{i}",
            gpus=int(rng.choice([1, 2, 4, 8])),
            cpu=int(rng.choice([16_000, 96_000])),
            mem=int(rng.choice([65_536, 393_216])),
            model=str(rng.choice(MODELS)),
        )
        for i in range(10)
    ]
    shapes = [(0, 0), (1, 1000), (1, 810), (1, 470), (1, 320), (1, 230), (2, 1000), (4, 1000)]
    pods = []
    for j in range(80):
        num, milli = shapes[int(rng.integers(len(shapes)))]
        pods.append(
            pod(
                f"p{j}",
                num,
                milli,
                cpu=int(rng.choice([1_000, 3_152, 11_300])),
                mem=int(rng.choice([2_048, 49_152])),
            )
        )
    state, views = make_state(nodes, pods)
    chooser = bind(policy, state)
    assert isinstance(chooser, ScalarPolicy)
    for p in views[:50]:
        feasible = state.feasible(p)
        if len(feasible):
            n, gpus = chooser.choose(p, feasible)
            state.place(p, n, gpus)
            chooser.placed(p, n)
    for p in views:
        feasible = state.feasible(p)
        if len(feasible) == 0:
            continue
        chooser._compute(p.shape, feasible)
        vector = chooser.scores[p.shape, feasible].copy(), chooser.values[p.shape, feasible].copy()
        chooser._compute_small(p.shape, feasible.tolist())
        small = chooser.scores[p.shape, feasible], chooser.values[p.shape, feasible]
        assert np.array_equal(vector[0], small[0])
        if p.shares_gpu:
            assert np.array_equal(vector[1], small[1])


@settings(max_examples=40)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(["scalar", "scalar-list"]))
def test_scalar_cache_is_never_stale_even_when_pods_of_one_shape_allow_different_models(
    seed: int, policy: str
) -> None:
    rng = np.random.default_rng(seed)
    nodes = [
        node(
            f"n{i}",
            gpus=int(rng.choice([2, 4, 8])),
            cpu=int(rng.choice([16_000, 96_000])),
            model=str(rng.choice(MODELS)),
        )
        for i in range(8)
    ]
    shapes = [(1, 470), (1, 320), (1, 1000), (0, 0), (2, 1000)]
    specs = [(), ("T4",), ("A10", "G2")]
    pods = []
    for j in range(70):
        num, milli = shapes[int(rng.integers(len(shapes)))]
        pods.append(
            pod(f"p{j}", num, milli, cpu=4_000, mem=8_192, spec=specs[int(rng.integers(3))] if num else ())
        )
    state, views = make_state(nodes, pods)
    chooser = bind(policy, state)
    assert isinstance(chooser, ScalarPolicy)
    for p in views:
        feasible = state.feasible(p)
        if len(feasible) == 0:
            continue
        n, gpus = chooser.choose(p, feasible)
        cached = chooser.scores[p.shape, feasible].copy(), chooser.values[p.shape, feasible].copy()
        chooser._compute(p.shape, feasible)  # from scratch
        assert np.array_equal(cached[0], chooser.scores[p.shape, feasible])
        if p.shares_gpu:
            assert np.array_equal(cached[1], chooser.values[p.shape, feasible])
        state.place(p, n, gpus)
        chooser.placed(p, n)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), cut=st.integers(1, 60))
def test_scalar_online_prior_never_reads_the_future(seed: int, cut: int) -> None:
    """The online prior learns from the pods that arrived: the decisions up to pod ``cut`` are the same
    whatever the pods after it are (the whole-list prior, which reads them, is ``scalar-list``)."""
    rng = np.random.default_rng(seed)
    nodes = [node(f"n{i}", gpus=int(rng.choice([2, 4, 8])), model=str(rng.choice(MODELS))) for i in range(8)]
    shapes = [(1, 470), (1, 320), (1, 1000), (0, 0), (2, 1000), (4, 1000), (1, 810)]

    def draw(prefix: str, n: int, which: list[tuple[int, int]]) -> list[PodSpec]:
        out = []
        for j in range(n):
            num, milli = which[int(rng.integers(len(which)))]
            out.append(pod(f"{prefix}{j}", num, milli, cpu=int(rng.choice([2_000, 12_000])), mem=8_192))
        return out

    head = draw("p", cut, shapes)
    tail_a = draw("a", 40, shapes[:3])  # two different futures after the cut
    tail_b = draw("b", 40, shapes[3:])
    decided = []
    for pods in (head + tail_a, head + tail_b):
        state, views = make_state(nodes, pods)
        decided.append(drive(bind("scalar", state), state, views)[:cut])
    assert decided[0] == decided[1]
