"""One packer: the simulator's ``scalar`` policy and the controller decide with the same code.

* The policy's fast paths (numpy, and plain Python over precomputed tables) give the scores of
  ``scalar.domain.packing_scalar`` bit for bit, on every shape and node of random clusters.
* The controller (its scheduler, fed events) and the policy put each job of the same stream on the same
  node, with the online prior learnt from the same jobs; a replay of the controller's events decides the same.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.packing_scalar import (
    GPU_MILLI,
    NodeView,
    Shape,
    ShapeWindow,
    best_shared_gpu,
    score_on,
)
from scalar.engine.actions import StartWork
from scalar.engine.config import ControllerConfig
from scalar.engine.controller import Controller
from scalar.engine.events import HostRegistered, JobSpec, JobSubmitted
from scalar.sim.policies.scalar import ScalarListPolicy, ScalarPolicy, shape_of
from scalar.sim.state import ClusterState
from scalar.sim.traces import NodeSpec, PodSpec
from tests.sim.helpers import bind, drive, make_state, node, pod

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MODELS = ("GA", "GB")
SHARES = (100, 250, 300, 500, 650, 700)


def random_cluster(rng: random.Random, n_nodes: int) -> list[NodeSpec]:
    out = []
    for i in range(n_nodes):
        gpus = rng.choice((2, 4, 8, 8))
        out.append(
            node(
                f"n{i:03d}",
                gpus,
                cpu=rng.choice((16_000, 32_000, 64_000)),
                mem=rng.choice((65_536, 131_072)),
                model=rng.choice(MODELS),
            )
        )
    return out


def random_pods(rng: random.Random, count: int) -> list[PodSpec]:
    out = []
    for i in range(count):
        kind = rng.random()
        spec = (rng.choice(MODELS),) if rng.random() < 0.2 else ()
        cpu = rng.choice((1_000, 2_000, 4_000, 8_000, 12_000))
        mem = rng.choice((2_048, 8_192, 16_384, 32_768))
        if kind < 0.1:
            out.append(pod(f"p{i}", 0, 0, cpu=cpu, mem=mem))
        elif kind < 0.55:
            out.append(pod(f"p{i}", 1, rng.choice(SHARES), cpu=cpu, mem=mem, spec=spec))
        else:
            out.append(pod(f"p{i}", rng.choice((1, 1, 2, 4)), GPU_MILLI, cpu=cpu, mem=mem, spec=spec))
    return out


def view_of(state: ClusterState, n: int) -> NodeView:
    model_row = state.model.item(n)
    model = state.model_names[model_row] if model_row < len(state.model_names) else None
    gpus = tuple(state.gpu[n, : state.gpu_count.item(n)].tolist())
    return NodeView(gpus, state.cpu_left.item(n), state.mem_left.item(n), model, GPU_MILLI)


def check_fast_paths(policy: ScalarPolicy, state: ClusterState) -> int:
    """Every shape on every node that can host it: numpy path == Python path == the domain. Returns how many
    (shape, node) pairs were compared."""
    compared = 0
    scale = policy.scale
    cpu, mem, num, milli = state.shapes.arrays()
    for s in range(len(cpu)):
        k, m = int(num[s]), int(milli[s])
        if k > state.width:
            continue
        fits = (state.cpu_left >= cpu[s]) & (state.mem_left >= mem[s])
        if k > 0:
            fits &= state.gpu_desc[:, k - 1] >= m
        hosts = np.flatnonzero(fits)
        if len(hosts) == 0:
            continue
        policy._compute(s, hosts)
        fast = policy.scores[s, hosts].copy()
        fast_values = policy.values[s, hosts].copy()
        policy._compute_small(s, hosts.tolist())
        small = policy.scores[s, hosts].copy()
        shape = Shape(int(cpu[s]), int(mem[s]), k, m if k > 0 and m < GPU_MILLI else None)
        for i, n in enumerate(hosts.tolist()):
            view = view_of(state, n)
            if k == 1 and m < GPU_MILLI:
                found = best_shared_gpu(scale, view, shape)
                assert found is not None
                want, gpu = found
                assert view.gpus[gpu] == fast_values[i] == policy.values.item(s, n)
            else:
                whole = [g for g, idle in enumerate(view.gpus) if idle == GPU_MILLI][:k]
                want = score_on(scale, view, shape, whole)
            assert fast[i] == small[i] == want, (s, n, fast[i], small[i], want)
            compared += 1
    return compared


@pytest.mark.parametrize("policy_cls", [ScalarPolicy, ScalarListPolicy])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_policys_fast_paths_score_as_the_domain_bit_for_bit(
    policy_cls: type[ScalarPolicy], seed: int
) -> None:
    rng = random.Random(seed)
    nodes = random_cluster(rng, 12)
    pods = random_pods(rng, 160)
    state, views = make_state(nodes, pods)
    policy = policy_cls()
    bind(policy, state)
    compared = 0
    for start in range(0, len(views), 40):
        drive(policy, state, views[start : start + 40])
        compared += check_fast_paths(policy, state)
    assert compared > 200


def host(spec: NodeSpec) -> HostRegistered:
    # GPUs of 1000/1024 GB = 1000 MiB: a GPU milli is one MiB, so the controller's units meet Protocol A's
    return HostRegistered(
        f"reg-{spec.name}",
        spec.name,
        f"byo-{spec.name}",
        "local",
        f"{spec.gpus}x{spec.model}",
        spec.model,
        spec.gpus,
        GPU_MILLI / 1024,
        spec.cpu_milli / 1000,
        spec.memory_mib / 1024,
    )


def job(spec: PodSpec, i: int) -> JobSubmitted:
    shares = spec.num_gpu == 1 and spec.gpu_milli < GPU_MILLI
    return JobSubmitted(
        f"sub-{i}",
        JobSpec(
            f"job-{i:04d}",
            "FAST",
            spec.num_gpu,
            vram_per_gpu_gb=(spec.gpu_milli if spec.num_gpu else 0) / 1024,
            cpu_cores=spec.cpu_milli / 1000,
            ram_gb=spec.memory_mib / 1024,
            expected_duration_sec=30 * 86_400,
            gpu_models=spec.gpu_spec or None,
            share_gpu=shares,
            command=("true",),
        ),
    )


def controller_choices(nodes: list[NodeSpec], pods: list[PodSpec]) -> tuple[list[int], Controller, list]:  # type: ignore[type-arg]
    ctl = Controller(ControllerConfig())
    index = {spec.name: i for i, spec in enumerate(nodes)}
    log = [(T0, [host(spec) for spec in nodes])]
    ctl.step(T0, log[0][1])
    out = []
    for i, spec in enumerate(pods):
        when = T0 + timedelta(seconds=i + 1)
        events = [job(spec, i)]
        log.append((when, events))
        starts = [a for a in ctl.step(when, events) if isinstance(a, StartWork)]
        placed = {a.job_id: a.placements[0].node_id for a in starts}
        assert set(placed) <= {f"job-{i:04d}"}  # nothing that failed earlier fits later: nodes only fill
        out.append(index[placed[f"job-{i:04d}"]] if placed else -1)
    return out, ctl, log


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_the_controller_and_the_simulator_choose_the_same_node_for_every_job(seed: int) -> None:
    rng = random.Random(seed)
    nodes = random_cluster(rng, 6)
    pods = random_pods(rng, 70)
    state, views = make_state(nodes, pods)
    sim = [n for n, _ in drive(bind("scalar", state), state, views)]
    engine, ctl, log = controller_choices(nodes, pods)
    assert engine == sim
    assert sum(1 for n in sim if n >= 0) >= 10  # the stream placed jobs, not only failures
    # the controller's prior is the simulator's: the same shapes, the same weights, bit for bit
    window = ShapeWindow()
    for p in views:
        window.observe(shape_of(p, state.spec_of(p.spec_id)))
    assert window.arrived == ctl.state.shapes.arrived == len(pods)
    # a replay of the events rebuilds the same prior and decides the same
    again = Controller(ControllerConfig())
    replayed = []
    for when, events in log:
        replayed.extend(a for a in again.step(when, events) if isinstance(a, StartWork))
    first = Controller(ControllerConfig())
    original = []
    for when, events in log:
        original.extend(a for a in first.step(when, events) if isinstance(a, StartWork))
    assert [(a.job_id, a.placements) for a in replayed] == [(a.job_id, a.placements) for a in original]
    assert again.state.shapes.seen == ctl.state.shapes.seen


def test_the_seed_score_stays_selectable_and_decides_differently_somewhere() -> None:
    rng = random.Random(7)
    nodes = random_cluster(rng, 6)
    pods = random_pods(rng, 70)
    scalar, _, log = controller_choices(nodes, pods)
    seed = Controller(ControllerConfig(packing_score="seed"))
    chosen = []
    for when, events in log:
        chosen.extend(a for a in seed.step(when, events) if isinstance(a, StartWork))
    index = {spec.name: i for i, spec in enumerate(nodes)}
    by_job = {a.job_id: index[a.placements[0].node_id] for a in chosen}
    seed_choices = [by_job.get(f"job-{i:04d}", -1) for i in range(len(pods))]
    state, views = make_state(nodes, pods)
    assert seed_choices == [n for n, _ in drive(bind("seed", state), state, views)]
    assert seed_choices != scalar
