"""Fragmentation against typical pods: the vectorised table form equals the FGD artifact's definition."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.sim.fragmentation import FragModel, TypicalPod, typical_pods
from tests.sim.helpers import bind, make_state, node, pod

MODELS = ["A10", "G2", "T4"]


def literal_frag(cpu_left: int, gpus: list[int], model: str, typical: list[TypicalPod]) -> int:
    """The artifact's per-typical-pod classification, written out plainly.

    Returns the fragment times the total typical count (an exact integer); divide by it for GPU milli.
    """
    idle = sum(gpus)
    frag = 0
    for t in typical:
        w = t.count
        if t.gpu_milli == 0 or (t.gpu_spec and model not in t.gpu_spec):
            frag += w * idle  # CPU-only typical pods and no-access: every idle milli is a fragment
            continue
        fits_gpu = sum(1 for g in gpus if g >= t.gpu_milli) >= t.num_gpu
        if fits_gpu and cpu_left >= t.cpu_milli:
            frag += w * sum(g for g in gpus if g < t.gpu_milli)
        else:
            frag += w * idle
    return frag


typical_strategy = st.lists(
    st.builds(
        TypicalPod,
        cpu_milli=st.sampled_from([0, 1_000, 4_000, 12_000, 32_000]),
        gpu_milli=st.sampled_from([0, 110, 250, 470, 500, 810, 1000]),
        num_gpu=st.sampled_from([1, 1, 2, 4, 8]),
        gpu_spec=st.sampled_from([(), (), ("T4",), ("G2", "A10")]),
        count=st.integers(1, 50),
    ),
    min_size=1,
    max_size=12,
).map(
    lambda ts: [
        TypicalPod(t.cpu_milli, t.gpu_milli, t.num_gpu if t.gpu_milli else 0, t.gpu_spec, t.count) for t in ts
    ]
)

node_strategy = st.tuples(
    st.integers(0, 64_000),
    st.lists(st.integers(0, 1000), min_size=1, max_size=8),
    st.sampled_from(MODELS),
)


@settings(max_examples=150)
@given(typical=typical_strategy, nodes=st.lists(node_strategy, min_size=1, max_size=6))
def test_table_form_equals_the_artifact_definition(typical: list[TypicalPod], nodes: list) -> None:
    fm = FragModel(typical, MODELS, 8)
    gpu = np.zeros((len(nodes), 8), dtype=np.int64)
    for i, (_, gpus, _) in enumerate(nodes):
        gpu[i, : len(gpus)] = gpus
    cpu = np.array([n[0] for n in nodes], dtype=np.int64)
    model = np.array([MODELS.index(n[2]) for n in nodes], dtype=np.int64)
    amount, count = fm.profile(gpu)
    scaled = fm.scaled(cpu, gpu.sum(axis=1), amount, count, model)
    for i, (cpu_left, gpus, name) in enumerate(nodes):
        assert scaled[i] == literal_frag(cpu_left, gpus, name, typical)
        one = fm.scaled_py(
            float(cpu_left), float(sum(gpus)), amount[i].tolist(), count[i].tolist(), int(model[i])
        )
        assert one == scaled[i]


def test_typical_pods_cover_the_popularity_threshold_most_frequent_first() -> None:
    pods = [pod(f"a{i}", 1, 1000) for i in range(60)]
    pods += [pod(f"b{i}", 1, 500) for i in range(30)]
    pods += [pod(f"c{i}", 0, cpu=8_000) for i in range(6)]
    pods += [pod(f"d{i}", 8, 1000, cpu=64_000) for i in range(4)]
    chosen = typical_pods(pods, 0.95)
    # 60 + 30 = 90 < 95, + 6 = 96 >= 95: the 8-GPU shape (4%) is left out.
    assert [(t.gpu_milli, t.num_gpu, t.count) for t in chosen] == [(1000, 1, 60), (500, 1, 30), (0, 0, 6)]


def test_incremental_node_refresh_matches_a_full_recompute() -> None:
    nodes = [node("a", 8), node("b", 2, cpu=16_000, model="T4"), node("c", 4, model="T4")]
    pods = [
        pod("p0", 1, 470),
        pod("p1", 1, 470),
        pod("p2", 2, 1000),
        pod("p3", 0, cpu=12_000),
        pod("p4", 1, 810),
    ]
    state, views = make_state(nodes, pods)
    state.track_fragmentation()
    chooser = bind("best-fit", state)
    for p in views:
        feasible = state.feasible(p)
        n, gpus = chooser.choose(p, feasible)
        state.place(p, n, gpus)
        amount, count = state.frag_model.profile(state.gpu)
        full = state.frag_model.scaled(state.cpu_left, state.idle, amount, count, state.model)
        assert np.array_equal(amount, state.amount) and np.array_equal(count, state.count)
        assert np.array_equal(full, state.frag)
        assert state.frag_total == float(full.sum())
