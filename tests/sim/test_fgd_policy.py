"""The vectorised FGD policy makes the decisions of the artifact's plugin, written out node by node."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.sim.fragmentation import typical_pods
from scalar.sim.state import ClusterState, Pod
from tests.sim.helpers import bind, make_state, node, pod
from tests.sim.test_fragmentation import literal_frag


def literal_fgd(state: ClusterState, p: Pod, nodes: np.ndarray, typical: list) -> tuple[int, list[int]]:
    """Score = int(100 * sigmoid((frag_before - frag_after) / 1000)); sharing pods try every GPU in index
    order and keep the first best; ties between nodes go to the lowest rank (here: node index)."""

    total = sum(t.count for t in typical)

    def frag(cpu: int, gpus: list[int], model: str) -> int:
        return literal_frag(cpu, gpus, model, typical)  # exact: times ``total``

    best: tuple[int, int, list[int]] | None = None
    for n in nodes.tolist():
        gpus = state.gpu[n, : state.gpu_count[n]].tolist()
        model = state.model_names[int(state.model[n])]
        cpu = int(state.cpu_left[n])
        before = frag(cpu, gpus, model)
        if p.shares_gpu:
            node_best: tuple[int, list[int]] | None = None
            for g, left in enumerate(gpus):
                if left >= p.milli:
                    after = gpus.copy()
                    after[g] -= p.milli
                    score = int(
                        1 / (1 + math.exp(-(before - frag(cpu - p.cpu, after, model)) / total / 1000)) * 100
                    )
                    if node_best is None or score > node_best[0]:
                        node_best = (score, [g])
            assert node_best is not None
            score, chosen = node_best
        else:
            chosen = [g for g, left in enumerate(gpus) if left == 1000][: p.num_gpu]
            after = [0 if g in chosen else left for g, left in enumerate(gpus)]
            score = int(1 / (1 + math.exp(-(before - frag(cpu - p.cpu, after, model)) / total / 1000)) * 100)
        if best is None or score > best[0]:
            best = (score, n, chosen)
    assert best is not None
    return best[1], best[2]


@settings(max_examples=25)
@given(seed=st.integers(0, 10_000))
def test_fgd_matches_the_literal_plugin(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nodes = [
        node(
            f"n{i}",
            gpus=int(rng.choice([1, 2, 4, 8])),
            cpu=int(rng.choice([16_000, 64_000])),
            model=str(rng.choice(["T4", "G2"])),
        )
        for i in range(8)
    ]
    shapes = [(0, 0), (1, 1000), (1, 470), (1, 320), (1, 810), (2, 1000)]
    pods = []
    for j in range(60):
        num, milli = shapes[int(rng.integers(len(shapes)))]
        pods.append(
            pod(
                f"p{j}",
                num,
                milli,
                cpu=int(rng.choice([1_000, 4_000, 8_000])),
                spec=("T4",) if num and rng.random() < 0.2 else (),
            )
        )
    state, views = make_state(nodes, pods)
    typical = typical_pods(pods)
    chooser = bind("fgd", state)
    for p in views:
        feasible = state.feasible(p)
        if len(feasible) == 0:
            continue
        expected = literal_fgd(state, p, feasible, typical)
        got = chooser.choose(p, feasible)
        assert got[0] == expected[0] and list(got[1]) == expected[1]
        state.place(p, got[0], got[1])
        chooser.placed(p, got[0])
