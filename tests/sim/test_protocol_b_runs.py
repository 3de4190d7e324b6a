"""Protocol B runs on the built-in market: departures, determinism, no over-commitment, policies' contracts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.market import NodeEvent, NodeState
from scalar.domain.tier import Tier
from scalar.sim.dynamic.baselines import KarpenterDriver, RayV2Driver
from scalar.sim.dynamic.cluster import SimNode
from scalar.sim.dynamic.engine_run import EngineDriver
from scalar.sim.dynamic.loop import run_loop
from scalar.sim.dynamic.mapping import ALL_MAPPED_MODELS
from scalar.sim.dynamic.market import MarketSession
from scalar.sim.dynamic.workload import DynamicJob, Workload
from scalar.sim.protocol_b import (
    LOWER_BOUND,
    POLICIES,
    ProtocolBOptions,
    on_demand_config,
    run_policy,
    run_protocol_b,
    scalar_config,
)
from tests.sim.protocol_b_fixtures import job, workload

ANY = ("T4", "V100", "A100")


def _strip(d: dict[str, Any]) -> dict[str, Any]:
    out = dict(d)
    out.pop("wall_s", None)
    return out


def test_a_departure_frees_capacity_for_the_next_job() -> None:
    # A runs 10 min; B, the same shape, arrives 20 min after the start: it takes A's node, nothing is bought.
    jobs = [
        job("a", arrival_s=0, duration_s=600, cpu=12, ram=48, models=ANY),
        job("b", arrival_s=1200, duration_s=600, cpu=12, ram=48, models=ANY),
    ]
    result = run_policy("scalar", workload(jobs), 7)
    assert result.nodes_bought == 1
    fast = result.waits[Tier.FAST]
    assert fast.finished == 2
    assert fast.p50_s is not None and fast.p50_s < 1.0  # b started on arrival; a waited for the boot
    assert fast.max_s is not None and 30 < fast.max_s < 900


def test_a_departure_in_the_baselines_cluster_frees_gpus_cpu_and_ram() -> None:
    node = SimNode("n", "b", "aws", "T4", 1, 16.0, 8.0, 32.0, datetime.max.replace(tzinfo=None))
    a, b = job("a", cpu=6), job("b", cpu=6)
    gpus = node.fit(a)
    assert gpus == (0,)
    node.place(a, gpus)
    assert node.fit(b) is None  # the only GPU and most CPUs are taken
    node.remove(a, datetime(2025, 7, 1))
    assert node.fit(b) == (0,) and node.cpu_used == 0 and node.ram_used == 0


def test_sharing_jobs_share_a_gpu_until_its_memory_is_used() -> None:
    node = SimNode("n", "b", "aws", "T4", 1, 16.0, 0.0, 0.0, datetime.max)
    shares = [job(f"s{i}", fraction=0.46) for i in range(3)]
    for s in shares[:2]:
        gpus = node.fit(s)
        assert gpus == (0,)
        node.place(s, gpus)
    assert node.fit(shares[2]) is None  # 2 x 7.36 GB used, 7.36 more would pass 16 GB
    assert node.fit(job("whole")) is None  # a whole-GPU job never joins a shared GPU


def test_same_seed_same_result() -> None:
    jobs = [
        job("a", arrival_s=0, duration_s=1800, cpu=8, models=ANY),
        job("b", arrival_s=60, duration_s=900, fraction=0.5, cpu=2, models=ANY, tier=Tier.FLEX),
        job("c", arrival_s=300, duration_s=2400, gpu_count=2, cpu=16, models=ANY),
    ]
    wl = workload(jobs)
    options = ProtocolBOptions(seed=11)
    first = run_protocol_b("hand-built", options, workload=wl).to_dict()
    second = run_protocol_b("hand-built", options, workload=wl).to_dict()
    assert [_strip(p) for p in first["policies"]] == [_strip(p) for p in second["policies"]]
    assert [p["policy"] for p in first["policies"]] == list(POLICIES)
    bound = next(p for p in first["policies"] if p["policy"] == LOWER_BOUND)
    for p in first["policies"]:
        assert p["cost"] >= bound["cost"]  # nothing beats the lower bound
        assert p["fast"]["finished"] == 2 and p["flex"]["finished"] == 1


def test_scalar_may_buy_spot_on_demand_and_blocks_and_reads_hazards_per_hour() -> None:
    config = scalar_config()
    groups = config.scale_groups
    assert [g.name for g in groups] == ["orderbook", "interruptible", "on-demand"]
    assert groups[1].spot is True and groups[2].spot is False
    # The simulated market reads the Spot Advisor bands per hour; the engine prices spot risk the same way.
    assert config.interruption_period_hours == 1.0
    assert on_demand_config().interruption_period_hours == 1.0


# ---- never over-commit: every policy, random small workloads ------------------------------------------

jobs_strategy = st.lists(
    st.builds(
        lambda i, arrival, duration, gpus, share, cpu, ram, flex: job(
            f"j{i}",
            arrival_s=float(arrival),
            duration_s=float(duration),
            gpu_count=gpus if not share else 1,
            fraction=0.25 * share if share else 1.0,
            cpu=float(cpu),
            ram=float(ram),
            models=ANY,
            tier=Tier.FLEX if flex else Tier.FAST,
        ),
        i=st.integers(0, 10_000),
        arrival=st.integers(0, 3600),
        duration=st.integers(1, 5400),
        gpus=st.sampled_from([1, 1, 2, 4, 8]),
        share=st.integers(0, 3),
        cpu=st.integers(0, 24),
        ram=st.integers(0, 128),
        flex=st.booleans(),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda j: j.job_id,
)


class Checked:
    """Wraps a policy and checks, after every step, that no node holds more than it has."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.steps = 0

    def step(self, now: datetime, arrivals: list[DynamicJob], events: list[NodeEvent]) -> None:
        self.inner.step(now, arrivals, events)
        self.steps += 1
        if isinstance(self.inner, EngineDriver):
            for view in self.inner.controller.nodes():
                if view.state is NodeState.READY:
                    assert view.cpu_used <= view.cpu_total + 1e-6
                    assert view.ram_used_gb <= view.ram_total_gb + 1e-6
                    assert 0 <= view.gpus_free <= view.gpu_count
        else:
            for node in self.inner.nodes.values():
                assert not node.over_committed(), node
                if node.gone:
                    assert not node.jobs

    def wake(self, now: datetime, tick_s: float) -> datetime | None:
        return self.inner.wake(now, tick_s)

    def given_up(self) -> set[str]:
        return self.inner.given_up()


def _run_checked(policy: str, wl: Workload) -> None:
    with MarketSession(3, ALL_MAPPED_MODELS) as session:
        if policy == "scalar":
            inner: Any = EngineDriver(scalar_config(), session)
        elif policy == "karpenter":
            inner = KarpenterDriver(session, wl.horizon_s)
        else:
            inner = RayV2Driver(session, wl.horizon_s)
        checked = Checked(inner)
        trace = run_loop(wl, session, checked)
        assert not trace.timed_out
        done = set(trace.finished_at) | inner.given_up()
        assert done >= {j.job_id for j in wl.jobs}


@settings(max_examples=8, deadline=None)
@given(jobs=jobs_strategy)
def test_scalar_never_over_commits_a_node(jobs: list[DynamicJob]) -> None:
    _run_checked("scalar", workload(jobs))


@settings(max_examples=8, deadline=None)
@given(jobs=jobs_strategy)
def test_karpenter_never_over_commits_a_node(jobs: list[DynamicJob]) -> None:
    _run_checked("karpenter", workload(jobs))


@settings(max_examples=8, deadline=None)
@given(jobs=jobs_strategy)
def test_ray_v2_never_over_commits_a_node(jobs: list[DynamicJob]) -> None:
    _run_checked("ray-v2", workload(jobs))


@settings(max_examples=100, deadline=None)
@given(jobs=jobs_strategy)
def test_the_baselines_packing_never_over_commits(jobs: list[DynamicJob]) -> None:
    node = SimNode("n", "b", "aws", "A100", 8, 40.0, 96.0, 512.0, datetime.max)
    placed: list[DynamicJob] = []
    for j in jobs:
        gpus = node.fit(j)
        if gpus is not None:
            node.place(j, gpus)
            placed.append(j)
        assert not node.over_committed()
    for j in placed:
        node.remove(j, datetime(2025, 7, 1))
    assert node.free_gpus() == 8 and node.cpu_used == 0 and not node.jobs
