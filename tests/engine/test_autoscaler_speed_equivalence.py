"""The autoscaler's fast routing path decides exactly what the straightforward one does.

``route_demand`` memoizes each group's structural verdict per demand shape (``routing._ShapeVerdicts``);
``memo=False`` (``ControllerConfig.routing_memo``) turns the memo off. On random groups and demand (the routing property
tests' strategies, with shapes repeated so the memo is hit) and on random controller runs (several
offers, many pending jobs of a few shapes, some bought capacity arriving), both paths must give the
same routing decision, the same actions, and the same reasons on every job.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.routing import route_demand
from scalar.domain.routing_model import DemandEntry, ResourceSpec, ScaleGroup
from scalar.engine import BuyCapacity, Controller, ControllerConfig, action_to_dict
from tests.domain.test_routing_properties import NOW, demand, scale_groups
from tests.engine.builders import at, filled, market, prime_offer, ready, sf_offer, spec, submit, tick


def _scaled(r: ResourceSpec, k: int) -> ResourceSpec:
    return ResourceSpec(
        cpu=r.cpu * k, memory_bytes=r.memory_bytes * k, gpu_count=r.gpu_count * k, tpu_count=r.tpu_count * k
    )


@settings(max_examples=60, deadline=None)
@given(scale_groups(), demand(), st.integers(1, 4))
def test_route_demand_memo_matches_the_straightforward_path(
    groups: list[ScaleGroup], entries: list[DemandEntry], copies: int
) -> None:
    # Repeat every entry under fresh task ids, the same shape (the memo answers it) and a larger one (the
    # memo must not answer it): copy c asks for (1 + c % 2) times the resources.
    many = [
        DemandEntry(
            task_ids=tuple(f"c{c}-{t}" for t in e.task_ids),
            coschedule_group_id=f"c{c}-{e.coschedule_group_id}" if e.coschedule_group_id else None,
            device_type=e.device_type,
            device_variant=e.device_variant,
            preemptible=e.preemptible,
            resources=_scaled(e.resources, 1 + c % 2),
            constraints=e.constraints,
        )
        for c in range(copies)
        for e in entries
    ]
    fast = route_demand(groups, many, NOW)
    slow = route_demand(groups, many, NOW, memo=False)
    assert fast == slow


def _run(job_args: list[tuple[int, str, float, int]], arrive: bool, memo: bool = True) -> list[Any]:
    """A short controller run; returns every action and every job's reasons, in order."""
    c = Controller(ControllerConfig(routing_memo=memo))
    out: list[Any] = []
    out += c.step(at(0), [market(sf_offer("2.00"), prime_offer("2.50", gpus=2), prime_offer("2.20", gpus=8))])
    specs = [
        spec(f"j{i:04d}", gpus, tier=tier, vram=vram, priority=prio)
        for i, (gpus, tier, vram, prio) in enumerate(job_args)
    ]
    first = c.step(at(1), submit(*specs))
    out += first
    if arrive:  # the first purchase fills and its nodes come up: some demand places, the rest re-routes
        buys = [a for a in first if isinstance(a, BuyCapacity)]
        for buy in buys[:1]:
            update = filled(buy, at(2))
            out += c.step(at(2), [update])
            grant = update.order.block
            assert grant is not None
            out += c.step(at(3), ready(*grant.node_ids, when=at(3), block_id=grant.block_id))
    for k in range(2):
        out += c.step(at(4 + k) + timedelta(milliseconds=k), [tick()])
    reasons = [
        (j, r.routing, r.routing_group, r.reason) for j, r in sorted(c.state.jobs.items(), key=lambda x: x[0])
    ]
    return [action_to_dict(a) for a in out] + reasons


jobs = st.lists(
    st.tuples(
        st.sampled_from([1, 1, 2, 4, 8, 16]),
        st.sampled_from(["FAST", "FAST", "BATCH", "FLEX"]),
        st.sampled_from([40.0, 80.0]),
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=25, deadline=None)
@given(jobs, st.booleans())
def test_controller_actions_match_the_straightforward_path(
    job_args: list[tuple[int, str, float, int]], arrive: bool
) -> None:
    fast = _run(job_args, arrive)
    slow = _run(job_args, arrive, memo=False)
    assert fast == slow


def test_a_refusal_is_not_remembered_past_a_change_of_the_plan() -> None:
    """The plan memo (``routing._Plan``): a shape refused by a full plan fits again once the plan opened a
    slice with room for it; the memo must ask again, not repeat the refusal."""
    from scalar.domain.routing_model import DeviceType

    group = ScaleGroup(
        name="g", max_slices=4, device_type=DeviceType.GPU, resources=ResourceSpec(cpu=32, gpu_count=8)
    )

    def entry(task: str, gpus: int) -> DemandEntry:
        return DemandEntry(
            task_ids=(task,), device_type=DeviceType.GPU, resources=ResourceSpec(gpu_count=gpus)
        )

    # t1 fills a slice; t2 finds no room in it and opens a second; t3 (t2's shape) fits the second's room.
    many = [entry("t1", 8), entry("t2", 4), entry("t3", 4), entry("t4", 4), entry("t5", 8), entry("t6", 4)]
    fast = route_demand([group], many, NOW)
    slow = route_demand([group], many, NOW, memo=False)
    assert fast == slow
    assert [d.reason.code for d in fast.entry_decisions][:3] == ["new_slice", "new_slice", "planned_capacity"]


def test_an_unmet_shape_is_routed_again_once_a_plan_changed() -> None:
    """The unmet memo (``route_demand``): a shape left unmet is answered from memory only while no plan
    changed; once another entry takes a slice, the same shape's reason counts that slice."""
    from scalar.domain.routing_model import DeviceType

    group = ScaleGroup(
        name="g", max_slices=3, device_type=DeviceType.GPU, resources=ResourceSpec(cpu=32, gpu_count=8)
    )

    def entry(*tasks: str) -> DemandEntry:
        return DemandEntry(task_ids=tasks, device_type=DeviceType.GPU, resources=ResourceSpec(gpu_count=8))

    # a and b take two slices; a two-task entry needs two more (one is left): unmet; c takes the last
    # slice; the next two-task entry is unmet with three slices planned, not two.
    many = [entry("a"), entry("b"), entry("s1", "s1b"), entry("c"), entry("s2", "s2b")]
    fast = route_demand([group], many, NOW)
    slow = route_demand([group], many, NOW, memo=False)
    assert fast == slow
    first, second = fast.entry_decisions[2].reason, fast.entry_decisions[4].reason
    assert first.code == second.code and first.message != second.message
