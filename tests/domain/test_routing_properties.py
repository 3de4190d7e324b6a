"""Seed 003 routing invariants over random groups and demand (hypothesis).

Never more slices than max_slices allows; every entry routed exactly once or unmet exactly once; the
routed demand fits the capacity of the in-flight plus launched slices; no slice bought for nothing;
reasons that are true; the same answer whatever the order of the groups."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.routing import route_demand
from scalar.domain.routing_model import (
    Availability,
    Constraint,
    DemandEntry,
    DeviceType,
    ResourceSpec,
    RoutingDecision,
    ScaleGroup,
    SliceStateCounts,
)

NOW = datetime(2026, 3, 1, tzinfo=UTC)
GIB = 1024**3
VARIANTS = [None, "A"]
# Weighted towards groups that can take demand, so full groups and overflow happen often.
AVAILABILITY = [Availability.AVAILABLE] * 5 + list(Availability)


def _millis(cpu: float) -> int:
    return round(cpu * 1000)


@st.composite
def resource_specs(draw: st.DrawFn, device: DeviceType, *, vm: bool) -> ResourceSpec:
    """Per-VM (``vm``) or per-task resources; accelerators only of the device's own kind, mostly."""
    sizes = [4, 8] if vm else [0, 1, 2, 4, 8, 16]
    gpus = draw(st.sampled_from(sizes)) if device is DeviceType.GPU else 0
    tpus = draw(st.sampled_from(sizes)) if device is DeviceType.TPU else 0
    if vm:
        return ResourceSpec(
            cpu=draw(st.integers(8, 32)) / 2,
            memory_bytes=draw(st.integers(4, 8)) * GIB,
            gpu_count=gpus,
            tpu_count=tpus,
        )
    return ResourceSpec(
        cpu=draw(st.integers(0, 20)) / 2,
        memory_bytes=draw(st.integers(0, 6)) * GIB,
        gpu_count=gpus,
        tpu_count=tpus,
    )


@st.composite
def scale_groups(draw: st.DrawFn) -> list[ScaleGroup]:
    count = draw(st.integers(1, 5))
    groups = []
    for i in range(count):
        max_slices = draw(st.integers(0, 4))
        device = draw(st.sampled_from([DeviceType.GPU, DeviceType.GPU, DeviceType.TPU, DeviceType.CPU]))
        groups.append(
            ScaleGroup(
                name=f"g{i}",
                priority=draw(st.sampled_from([None, 0, 1, 5, 10, 100, 200])),
                max_slices=max_slices,
                min_slices=draw(st.integers(0, max_slices)),
                device_type=device,
                device_variant=None if device is DeviceType.CPU else draw(st.sampled_from(VARIANTS)),
                preemptible=draw(st.booleans()),
                resources=draw(resource_specs(device, vm=True)),
                slice_size=draw(st.integers(1, 4)),
                slice_state_counts=SliceStateCounts(
                    requesting=draw(st.integers(0, 1)),
                    booting=draw(st.integers(0, 1)),
                    initializing=draw(st.integers(0, 1)),
                    ready=draw(st.integers(0, 2)),
                    failed=draw(st.integers(0, 1)),
                ),
                availability=draw(st.sampled_from(AVAILABILITY)),
                attributes=draw(st.sampled_from([(("zone", "a"),), (("zone", "a"),), (("zone", "b"),), ()])),
            )
        )
    return groups


@st.composite
def demand(draw: st.DrawFn) -> list[DemandEntry]:
    entries = []
    for i in range(draw(st.integers(0, 16))):
        coscheduled = draw(st.booleans())
        n_tasks = draw(st.integers(1, 4)) if coscheduled else draw(st.sampled_from([1, 1, 1, 2]))
        device = draw(st.sampled_from([DeviceType.GPU, DeviceType.GPU, DeviceType.TPU, DeviceType.CPU]))
        entries.append(
            DemandEntry(
                task_ids=tuple(f"e{i}-t{k}" for k in range(n_tasks)),
                coschedule_group_id=f"job-{i}" if coscheduled else None,
                device_type=device,
                device_variant=draw(st.sampled_from([None, None, "A", "C"])),
                preemptible=draw(st.sampled_from([None, None, True, False])),
                resources=draw(resource_specs(device, vm=False)),
                constraints=draw(st.sampled_from([(), (), (), (Constraint("zone", values=("a",)),)])),
            )
        )
    return entries


def _shape_fits(group: ScaleGroup, entry: DemandEntry) -> bool:
    r, v = entry.resources, group.resources
    return (
        group.matches_device(entry.device_type, entry.device_variant)
        and group.matches_preemptible(entry.preemptible)
        and all(c.satisfied_by(group.attribute_map) for c in entry.constraints)
        and (not entry.is_coscheduled or group.slice_size == entry.task_count)
        and _millis(r.cpu) <= _millis(v.cpu)
        and r.memory_bytes <= v.memory_bytes
        and r.gpu_count <= v.gpu_count
        and r.tpu_count <= v.tpu_count
    )


def _matches(group: ScaleGroup, entry: DemandEntry) -> bool:
    return (
        group.matches_device(entry.device_type, entry.device_variant)
        and group.matches_preemptible(entry.preemptible)
        and all(c.satisfied_by(group.attribute_map) for c in entry.constraints)
    )


@given(scale_groups(), demand())
def test_never_more_slices_than_max_slices_allows(
    groups: list[ScaleGroup], entries: list[DemandEntry]
) -> None:
    decision = route_demand(groups, entries, NOW)
    for g in groups:
        launches = decision.group_to_launch.get(g.name, 0)
        counts = g.slice_state_counts
        assert launches >= 0
        assert launches <= g.headroom
        if launches:
            assert counts.in_flight + counts.ready + counts.failed + launches <= g.max_slices
            assert g.availability_at(NOW) is Availability.AVAILABLE
    assert all(n > 0 for n in decision.group_to_launch.values())


@given(scale_groups(), demand())
def test_every_entry_is_routed_exactly_once_or_unmet_exactly_once(
    groups: list[ScaleGroup], entries: list[DemandEntry]
) -> None:
    decision = route_demand(groups, entries, NOW)
    seen: Counter[tuple[str, ...]] = Counter()
    for routed in decision.routed_entries.values():
        seen.update(e.task_ids for e in routed)
    seen.update(u.entry.task_ids for u in decision.unmet_entries)
    assert seen == Counter(e.task_ids for e in entries)
    assert [d.entry_index for d in decision.entry_decisions] == list(range(len(entries)))
    for d in decision.entry_decisions:
        assert d.explanation and d.reason.message
        if d.routed:
            assert d.group is not None and d.entry in decision.routed_entries[d.group]
        else:
            assert d.entry in [u.entry for u in decision.unmet_entries]


def _check_packing(decision: RoutingDecision, groups: list[ScaleGroup], entries: list[DemandEntry]) -> None:
    by_name = {g.name: g for g in groups}
    for pg in decision.pending_groups:
        g = by_name[pg.name]
        in_flight = [s for s in pg.slices if s.in_flight]
        new = [s for s in pg.slices if not s.in_flight]
        assert len(in_flight) == g.slice_state_counts.in_flight
        assert len(new) == decision.group_to_launch.get(g.name, 0) == pg.slices_to_launch
        placed: Counter[tuple[int, str]] = Counter()
        for s in pg.slices:
            assert len(s.vm_tasks) == g.slice_size
            owners = {t.entry_index for vm in s.vm_tasks for t in vm}
            if s.coscheduled:
                (owner,) = owners
                assert entries[owner].is_coscheduled
                assert all(len(vm) == 1 for vm in s.vm_tasks)
            for vm in s.vm_tasks:
                for dim_need, dim_have in [
                    (
                        sum(_millis(entries[t.entry_index].resources.cpu) for t in vm),
                        _millis(g.resources.cpu),
                    ),
                    (
                        sum(entries[t.entry_index].resources.memory_bytes for t in vm),
                        g.resources.memory_bytes,
                    ),
                    (sum(entries[t.entry_index].resources.gpu_count for t in vm), g.resources.gpu_count),
                    (sum(entries[t.entry_index].resources.tpu_count for t in vm), g.resources.tpu_count),
                ]:
                    assert dim_need <= dim_have
                placed.update((t.entry_index, t.task_id) for t in vm)
        routed_here = decision.routed_entries.get(g.name, ())
        expected = Counter((entries.index(e), task_id) for e in routed_here for task_id in e.task_ids)
        assert placed == expected
        # No slice bought for nothing: launches beyond the min_slices deficit all carry work.
        deficit = g.min_slices_deficit if g.availability_at(NOW) is Availability.AVAILABLE else 0
        assert len(new) <= max(deficit, sum(1 for s in new if not s.is_empty))


@given(scale_groups(), demand())
def test_routed_demand_fits_in_flight_plus_launched_slices(
    groups: list[ScaleGroup], entries: list[DemandEntry]
) -> None:
    decision = route_demand(groups, entries, NOW)
    _check_packing(decision, groups, entries)
    for name, routed in decision.routed_entries.items():
        group = next(g for g in groups if g.name == name)
        assert all(_shape_fits(group, e) for e in routed)


@given(scale_groups(), demand())
def test_min_slices_are_launched_where_the_group_may(
    groups: list[ScaleGroup], entries: list[DemandEntry]
) -> None:
    decision = route_demand(groups, entries, NOW)
    for g in groups:
        if g.availability_at(NOW) is Availability.AVAILABLE:
            assert decision.group_to_launch.get(g.name, 0) >= g.min_slices_deficit


@given(scale_groups(), demand())
def test_unmet_reasons_are_true(groups: list[ScaleGroup], entries: list[DemandEntry]) -> None:
    decision = route_demand(groups, entries, NOW)
    for u in decision.unmet_entries:
        e = u.entry
        code = u.reason.code
        if code == "no_matching_group":
            assert not any(_matches(g, e) for g in groups)
        elif code == "coschedule_mismatch":
            assert e.is_coscheduled
            assert all(g.slice_size != e.task_count for g in groups if _matches(g, e))
        elif code == "insufficient_resources":
            assert not any(_shape_fits(g, e) for g in groups)
            assert u.reason.need is not None and u.reason.have is not None
        else:
            assert code in {"group_unavailable", "at_max_slices"}
            assert any(_shape_fits(g, e) for g in groups)


@given(scale_groups(), demand(), st.randoms(use_true_random=False))
def test_the_order_of_the_groups_does_not_matter(
    groups: list[ScaleGroup], entries: list[DemandEntry], rng: random.Random
) -> None:
    shuffled = list(groups)
    rng.shuffle(shuffled)
    assert route_demand(shuffled, entries, NOW) == route_demand(groups, entries, NOW)
