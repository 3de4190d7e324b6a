"""One packer: the simulator's ``scalar`` policy and the controller decide with the same code.

* The policy's fast paths (numpy, and plain Python over precomputed tables) give the scores of
  ``scalar.domain.packing_scalar`` bit for bit, on every shape and node of random clusters.
* The controller (its scheduler, fed events) and the policy put each job of the same stream on the same
  node and the same GPUs, with the same online prior (the same shapes and weights, bit for bit), one job
  per step or several (the controller counts a step's jobs in before it places them, and so does the
  policy here), over a stream long enough to pass the prior's relearns at 512 and 1,024 jobs; a replay of
  the controller's events returns the original controller's actions and rebuilds its prior.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
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
from scalar.engine.actions import Action, StartWork, WorkPlacement
from scalar.engine.config import ControllerConfig
from scalar.engine.controller import Controller
from scalar.engine.events import Event, HostRegistered, JobSpec, JobSubmitted
from scalar.sim.policies.scalar import ScalarListPolicy, ScalarPolicy
from scalar.sim.state import ClusterState, IntArray, Pod
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


Choice = tuple[int, tuple[int, ...]]  # (node index, GPU indices); (-1, ()) for a job that fits nowhere
Log = list[tuple[datetime, list[Event]]]


@dataclass
class ControllerRun:
    """What the controller decided for a stream: each job's node and GPUs, its events and its actions."""

    choices: list[Choice]
    controller: Controller
    log: Log
    actions: list[Action]


def controller_choices(
    nodes: list[NodeSpec], pods: list[PodSpec], steps: Sequence[int] | None = None
) -> ControllerRun:
    """Register ``nodes``, then submit ``pods`` in order, ``steps[k]`` of them in step ``k`` (default one per
    step), and record where each job was started."""
    ctl = Controller(ControllerConfig())
    index = {spec.name: i for i, spec in enumerate(nodes)}
    log: Log = [(T0, [host(spec) for spec in nodes])]
    actions = list(ctl.step(T0, log[0][1]))
    placed: dict[str, WorkPlacement] = {}
    first = 0
    for k, size in enumerate(steps or [1] * len(pods), start=1):
        when = T0 + timedelta(seconds=k)
        events: list[Event] = [job(pods[i], i) for i in range(first, first + size)]
        log.append((when, events))
        out = ctl.step(when, events)
        actions.extend(out)
        starts = {a.job_id: a.placements for a in out if isinstance(a, StartWork)}
        # nothing that failed earlier fits later (nodes only fill), and no job runs on two nodes
        assert set(starts) <= {f"job-{i:04d}" for i in range(first, first + size)}
        assert all(len(p) == 1 for p in starts.values())
        placed.update({job_id: p[0] for job_id, p in starts.items()})
        first += size
    assert first == len(pods)
    choices: list[Choice] = []
    for i in range(len(pods)):
        where = placed.get(f"job-{i:04d}")
        choices.append((-1, ()) if where is None else (index[where.node_id], tuple(where.gpu_indices)))
    return ControllerRun(choices, ctl, log, actions)


class StepPolicy(ScalarPolicy):
    """``scalar`` told of a whole step's arrivals before it places any of them, as the controller counts a
    step's submitted jobs into its prior before its scheduling pass: ``choose`` must not count the pod
    again (``ScalarPolicy.choose`` counts a pod that was not the last one announced)."""

    def choose(self, pod: Pod, nodes: IntArray) -> tuple[int, list[int]]:
        self._last_arrived = pod.index
        return super().choose(pod, nodes)


def assert_same_prior(sim: ShapeWindow, ctl: ShapeWindow) -> None:
    """The same shapes with the same weights (floats compared exactly), learnt as often, at the same jobs."""
    assert (sim.arrived, sim.base, sim.next_learn, sim.learnt) == (
        ctl.arrived,
        ctl.base,
        ctl.next_learn,
        ctl.learnt,
    )
    assert sim.seen == ctl.seen
    assert sim.prior.weights == ctl.prior.weights


def assert_replay_decides_the_same(run: ControllerRun) -> None:
    """A fresh controller fed the same events returns the original controller's actions, one for one, and
    rebuilds the same prior."""
    again = Controller(ControllerConfig())
    replayed: list[Action] = []
    for when, events in run.log:
        replayed.extend(again.step(when, events))
    assert replayed == run.actions
    assert_same_prior(again.state.shapes, run.controller.state.shapes)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_the_controller_and_the_simulator_choose_the_same_node_for_every_job(seed: int) -> None:
    rng = random.Random(seed)
    nodes = random_cluster(rng, 6)
    pods = random_pods(rng, 70)
    state, views = make_state(nodes, pods)
    policy = bind("scalar", state)
    assert isinstance(policy, ScalarPolicy)
    sim = drive(policy, state, views)
    run = controller_choices(nodes, pods)
    assert run.choices == sim  # the same node and the same GPUs for every job
    assert sum(1 for n, _ in sim if n >= 0) >= 10  # the stream placed jobs, not only failures
    # the controller's prior is the simulator's, bit for bit, and both counted every job
    assert_same_prior(policy.window, run.controller.state.shapes)
    assert run.controller.state.shapes.arrived == len(pods)
    assert_replay_decides_the_same(run)


def roomy_cluster(rng: random.Random, n_nodes: int) -> list[NodeSpec]:
    return [
        node(
            f"n{i:03d}",
            rng.choice((4, 8, 8)),
            cpu=rng.choice((64_000, 96_000)),
            mem=rng.choice((262_144, 393_216)),
            model=rng.choice(MODELS),
        )
        for i in range(n_nodes)
    ]


def light_pods(rng: random.Random, count: int) -> list[PodSpec]:
    """Small pods (mostly sharing a GPU, many CPU-only, a few whole GPUs) so that a long stream still finds
    room after the prior's relearns at 512 and 1,024 jobs. Whole cores only: the controller adds up cores
    in floats, so after fractional ones (0.1 core) a node with exactly 1 core left refuses a 1-core job
    that the simulator's integer milli-cores still fit."""
    out = []
    for i in range(count):
        kind = rng.random()
        spec = (rng.choice(MODELS),) if rng.random() < 0.2 else ()
        mem = rng.choice((1_024, 2_048, 4_096))
        if kind < 0.4:
            out.append(pod(f"p{i}", 0, 0, cpu=1_000, mem=mem))
        elif kind < 0.97:
            out.append(pod(f"p{i}", 1, rng.choice((50, 100, 150, 200, 300)), cpu=1_000, mem=mem, spec=spec))
        else:
            out.append(pod(f"p{i}", rng.choice((1, 2)), GPU_MILLI, cpu=1_000, mem=mem, spec=spec))
    return out


def test_several_jobs_per_step_and_a_stream_past_the_relearns_at_512_and_1024() -> None:
    rng = random.Random(5)
    nodes = roomy_cluster(rng, 12)
    pods = light_pods(rng, 1_100)
    steps: list[int] = []
    while sum(steps) < len(pods):
        steps.append(min(rng.randint(1, 6), len(pods) - sum(steps)))
    state, views = make_state(nodes, pods)
    policy = StepPolicy()
    bind(policy, state)
    sim = drive(policy, state, views, steps)
    run = controller_choices(nodes, pods, steps)
    assert len(steps) < len(pods) / 3  # several jobs per step
    assert run.choices == sim  # the same node and the same GPUs for every job
    assert sum(1 for n, _ in sim[1_024:] if n >= 0) >= 20  # jobs still placed after the relearn at 1,024
    assert policy.window.learnt == run.controller.state.shapes.learnt == 11  # after 1, 2, 4, ... 512, 1,024
    assert_same_prior(policy.window, run.controller.state.shapes)
    assert_replay_decides_the_same(run)


def test_the_seed_score_stays_selectable_and_decides_differently_somewhere() -> None:
    rng = random.Random(7)
    nodes = random_cluster(rng, 6)
    pods = random_pods(rng, 70)
    scalar = controller_choices(nodes, pods)
    seed = Controller(ControllerConfig(packing_score="seed"))
    chosen = []
    for when, events in scalar.log:
        chosen.extend(a for a in seed.step(when, events) if isinstance(a, StartWork))
    index = {spec.name: i for i, spec in enumerate(nodes)}
    by_job = {a.job_id: index[a.placements[0].node_id] for a in chosen}
    seed_choices = [by_job.get(f"job-{i:04d}", -1) for i in range(len(pods))]
    state, views = make_state(nodes, pods)
    assert seed_choices == [n for n, _ in drive(bind("seed", state), state, views)]
    assert seed_choices != [n for n, _ in scalar.choices]
