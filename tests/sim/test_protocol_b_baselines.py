"""The baselines' known behaviour on tiny hand-made traces, preemptions that happen, and the LP bound below all."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.tier import Tier
from scalar.sim.dynamic.baselines import PER_POD, KarpenterDriver, PerPodDriver
from scalar.sim.dynamic.loop import ORIGIN, run_loop
from scalar.sim.dynamic.mapping import ALL_MAPPED_MODELS
from scalar.sim.dynamic.market import MarketSession
from scalar.sim.dynamic.progress import MOVED, PREEMPTED, WorkTracker
from scalar.sim.dynamic.workload import DynamicJob
from scalar.sim.protocol_b import LOWER_BOUND, POLICIES, run_policy
from tests.sim.protocol_b_fixtures import job, workload

ANY = ("T4", "V100", "A100")


def test_per_pod_buys_exactly_one_node_per_pod() -> None:
    # Three pods that one 8-GPU node could hold together: per-pod buys three nodes, one for each.
    jobs = [
        job("a", arrival_s=0, duration_s=1800, cpu=4, models=ANY),
        job("b", arrival_s=0, duration_s=1800, cpu=4, models=ANY, tier=Tier.FLEX),
        job("c", arrival_s=600, duration_s=900, fraction=0.5, cpu=2, models=ANY),
    ]
    wl = workload(jobs)
    with MarketSession(5, ALL_MAPPED_MODELS, preemption_scale=0.0, tracker=WorkTracker(wl.jobs)) as session:
        driver = PerPodDriver(session, wl.horizon_s)
        trace = run_loop(wl, session, driver)
        assert set(trace.finished_at) == {"a", "b", "c"}
        assert sorted(n.owner or "" for n in driver.nodes.values()) == ["a", "b", "c"]
        assert all(n.gone for n in driver.nodes.values())  # each released when its pod ended
    result = run_policy(PER_POD, wl, 5, preemption_scale=0.0)
    assert result.nodes_bought == 3


def test_karpenter_replaces_an_underused_expensive_node() -> None:
    # Spot is out of capacity when two pods arrive (Karpenter's unavailable-offerings cache holds every spot
    # type for 20 minutes): they are packed onto one on-demand node. The big pod ends after an hour; the
    # small one, left alone on the expensive node, is moved to a cheaper replacement and the node deleted.
    jobs = [
        job("big", arrival_s=0, duration_s=3600, gpu_count=2, cpu=16, models=("V100",)),
        job("small", arrival_s=0, duration_s=4 * 3600, cpu=4, models=("V100",), tier=Tier.FLEX),
    ]
    wl = workload(jobs)
    tracker = WorkTracker(wl.jobs)
    with MarketSession(5, ALL_MAPPED_MODELS, preemption_scale=0.0, tracker=tracker) as session:
        driver = KarpenterDriver(session, wl.horizon_s)
        for offer in session.offers(ORIGIN):
            if offer.spot:
                driver.unavailable[offer.key] = ORIGIN + timedelta(minutes=20)
        trace = run_loop(wl, session, driver)
        first = min(driver.nodes.values(), key=lambda n: n.node_id)
        assert not first.spot and first.gpus >= 3  # the on-demand node the two pods were packed onto
        assert driver.consolidations["replace"] == 1 and driver.moves == 1
        replacement = [n for n in driver.nodes.values() if n is not first]
        assert len(replacement) == 1 and replacement[0].price_per_hour < first.price_per_hour
        stopped = session.ledger.blocks[first.block_id].released_at
        assert stopped is not None and stopped < trace.finished_at["small"]
        assert set(trace.finished_at) == {"big", "small"}
        # the moved pod restarted from scratch (no checkpoints): its hour on the old node is lost
        assert 0.9 < tracker.lost_gpu_hours(MOVED) < 1.5


def test_a_preemption_at_scale_3_restarts_a_job_and_counts_its_lost_hours() -> None:
    # Two hours of A100 work on cheap spot capacity, checkpointed every 10 minutes.
    jobs = [job("long", duration_s=2 * 3600, gpu_count=1, cpu=4, models=ANY, tier=Tier.FLEX)]
    wl = replace(workload(jobs), checkpoint_s=600.0)
    calm = run_policy(PER_POD, wl, 8, preemption_scale=0.0)
    assert calm.killed_runs == 0 and calm.interruptions == 0 and calm.preempted_gpu_hours == 0
    rough = run_policy(PER_POD, wl, 8, preemption_scale=3.0)
    assert rough.interruptions >= 1 and rough.killed_runs >= 1
    assert rough.waits[Tier.FLEX].finished == 1  # it ran again from its last checkpoint until it finished
    assert 0 < rough.preempted_gpu_hours <= rough.killed_runs * 600 / 3600  # at most 10 min per kill
    # the lost hours were paid for and the work redone: the bill holds both
    assert rough.paid_gpu_hours >= calm.busy_gpu_hours + rough.preempted_gpu_hours - 0.01


def test_the_tracker_keeps_checkpoints_and_a_service_loses_nothing() -> None:
    flex = job("f", duration_s=7200, gpu_count=2, models=("A100",), tier=Tier.FLEX)
    fast = job("s", duration_s=7200, models=("T4",))
    tracker = WorkTracker([flex, fast], checkpoint_s=1800)
    assert tracker.start("f", "A100", ORIGIN) == 7200
    tracker.stopped("f", ORIGIN + timedelta(seconds=4000), PREEMPTED)  # 2 checkpoints kept: 3600 s
    assert tracker.left["f"] == 3600
    assert tracker.lost_gpu_hours(PREEMPTED) == 400 * 2 / 3600
    assert tracker.start("s", "T4", ORIGIN) == 7200  # a service's wall time on any model
    tracker.stopped("s", ORIGIN + timedelta(seconds=1000), PREEMPTED)
    assert tracker.left["s"] == 6200 and tracker.lost_gpu_hours(PREEMPTED) == 400 * 2 / 3600


# ---- the LP bound is at or below every policy's cost -----------------------------------------------------

small_jobs = st.lists(
    st.builds(
        lambda i, arrival, duration, gpus, cpu, flex: job(
            f"j{i}",
            arrival_s=float(arrival),
            duration_s=float(duration),
            gpu_count=gpus,
            cpu=float(cpu),
            ram=16.0,
            models=ANY,
            tier=Tier.FLEX if flex else Tier.FAST,
        ),
        i=st.integers(0, 1000),
        arrival=st.integers(0, 3600),
        duration=st.integers(60, 3 * 3600),
        gpus=st.sampled_from([1, 1, 2, 4]),
        cpu=st.integers(0, 24),
        flex=st.booleans(),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda j: j.job_id,
)


@pytest.mark.slow  # every policy's full run, then the LP
@settings(max_examples=20, deadline=None)
@given(jobs=small_jobs)
def test_the_lp_bound_is_at_or_below_every_policy(jobs: list[DynamicJob]) -> None:
    wl = workload(jobs)
    bound = run_policy(LOWER_BOUND, wl, 3).cost
    assert bound > 0
    for policy in POLICIES:
        if policy == LOWER_BOUND:
            continue
        result = run_policy(policy, wl, 3)
        assert result.cost >= bound, (policy, result.cost, bound)
