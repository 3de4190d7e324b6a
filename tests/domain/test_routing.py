"""Seed 003 (autoscaler v2 demand routing), scenario by scenario: build the groups and demand, route,
assert on the decision and its reason. ``seed_pseudocode_route`` at the bottom is a literal port of the
seed's pseudocode; the tests marked "seed defect" show it gets those scenarios wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scalar.domain.errors import InvalidSpecError
from scalar.domain.routing import RoutingInputError, build_demand_entries, route_demand
from scalar.domain.routing_model import (
    Availability,
    Constraint,
    DemandEntry,
    DeviceType,
    ResourceSpec,
    RoutingDecision,
    ScaleGroup,
    SliceStateCounts,
    UnscheduledTask,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GIB = 1024**3


def gpu_group(
    name: str,
    *,
    priority: int | None = 10,
    max_slices: int = 4,
    min_slices: int = 0,
    variant: str | None = "H100",
    preemptible: bool = False,
    gpus: int = 8,
    cpu: float = 96,
    memory_gib: int = 1024,
    slice_size: int = 1,
    availability: Availability = Availability.AVAILABLE,
    **counts: int,
) -> ScaleGroup:
    return ScaleGroup(
        name=name,
        priority=priority,
        max_slices=max_slices,
        min_slices=min_slices,
        device_type=DeviceType.GPU,
        device_variant=variant,
        preemptible=preemptible,
        resources=ResourceSpec(cpu=cpu, memory_bytes=memory_gib * GIB, gpu_count=gpus),
        slice_size=slice_size,
        slice_state_counts=SliceStateCounts(**counts),
        availability=availability,
    )


def tpu_group(
    name: str, *, slice_size: int, max_slices: int = 4, min_slices: int = 0, **counts: int
) -> ScaleGroup:
    return ScaleGroup(
        name=name,
        priority=100,
        max_slices=max_slices,
        min_slices=min_slices,
        device_type=DeviceType.TPU,
        device_variant="v5litepod-16",
        preemptible=True,
        resources=ResourceSpec(cpu=128, memory_bytes=128 * GIB, tpu_count=8),
        slice_size=slice_size,
        slice_state_counts=SliceStateCounts(**counts),
    )


def gpu_task(
    task_id: str,
    gpus: int = 2,
    *,
    variant: str | None = "H100",
    preemptible: bool | None = None,
    cpu: float = 8,
) -> DemandEntry:
    return DemandEntry(
        task_ids=(task_id,),
        device_type=DeviceType.GPU,
        device_variant=variant,
        preemptible=preemptible,
        resources=ResourceSpec(cpu=cpu, memory_bytes=64 * GIB, gpu_count=gpus),
    )


def tpu_job(job_id: str, tasks: int, tpus: int = 8) -> DemandEntry:
    return DemandEntry(
        task_ids=tuple(f"{job_id}-{i}" for i in range(tasks)),
        coschedule_group_id=job_id,
        device_type=DeviceType.TPU,
        resources=ResourceSpec(cpu=16, memory_bytes=32 * GIB, tpu_count=tpus),
    )


def routed_to(decision: RoutingDecision) -> dict[str, list[str]]:
    return {g: [t for e in entries for t in e.task_ids] for g, entries in decision.routed_entries.items()}


def only_unmet(decision: RoutingDecision) -> Any:
    assert len(decision.unmet_entries) == 1, decision.explain()
    return decision.unmet_entries[0].reason


# --- priority -------------------------------------------------------------------------------------------


def test_priority_lower_number_first() -> None:
    groups = [gpu_group("second", priority=20), gpu_group("first", priority=10)]
    decision = route_demand(groups, [gpu_task("t-1")], NOW)
    assert routed_to(decision) == {"first": ["t-1"]}
    assert dict(decision.group_to_launch) == {"first": 1}


def test_priority_zero_or_unset_means_100_and_ties_go_by_name() -> None:
    groups = [
        gpu_group("z-explicit-100", priority=100),
        gpu_group("unset", priority=None),
        gpu_group("zero", priority=0),
        gpu_group("p150", priority=150),
    ]
    # 50 < 100 (unset, z-explicit-100, zero: ties broken by name) < 150
    order = []
    for _ in range(4):
        decision = route_demand(groups, [gpu_task("t", gpus=8)], NOW)
        (chosen,) = decision.routed_entries
        order.append(chosen)
        groups = [g for g in groups if g.name != chosen]
    assert order == ["unset", "z-explicit-100", "zero", "p150"]


def test_group_input_order_does_not_matter() -> None:
    groups = [gpu_group("b", priority=10), gpu_group("a", priority=10)]
    demand = [gpu_task("t-1", 8), gpu_task("t-2", 8)]
    assert route_demand(groups, demand, NOW) == route_demand(list(reversed(groups)), demand, NOW)
    assert routed_to(route_demand(groups, demand, NOW)) == {"a": ["t-1", "t-2"]}


# --- overflow ---------------------------------------------------------------------------------------------


def test_overflow_to_the_next_group_when_the_first_is_at_max_slices() -> None:
    groups = [gpu_group("h100-a", priority=10, max_slices=2, ready=2), gpu_group("h100-b", priority=20)]
    decision = route_demand(groups, [gpu_task("t-1")], NOW)
    assert routed_to(decision) == {"h100-b": ["t-1"]}
    explanation = decision.entry_decisions[0].explanation
    assert "passed over h100-a has 2 of max 2 slices" in explanation


def test_overflow_within_one_round_once_the_first_group_fills_up() -> None:
    groups = [gpu_group("small", priority=10, max_slices=2), gpu_group("big", priority=20, max_slices=10)]
    demand = [gpu_task(f"t-{i}", gpus=8) for i in range(5)]
    decision = route_demand(groups, demand, NOW)
    assert routed_to(decision) == {"small": ["t-0", "t-1"], "big": ["t-2", "t-3", "t-4"]}
    assert dict(decision.group_to_launch) == {"small": 2, "big": 3}


def test_every_group_full_reports_at_max_slices_with_numbers() -> None:
    groups = [gpu_group("h100", max_slices=3, ready=2, failed=1)]
    reason = only_unmet(route_demand(groups, [gpu_task("t-1")], NOW))
    assert reason.code == "at_max_slices"
    assert (reason.resource, reason.need, reason.have, reason.limit) == ("slices", 1, 0, 3)
    assert "3 of max 3 slices (0 in flight, 2 ready, 1 failed" in reason.message


def test_failed_slices_count_against_max_slices_but_not_towards_min_slices() -> None:
    group = gpu_group("h100", max_slices=2, min_slices=2, ready=1, failed=1)
    decision = route_demand([group], [], NOW)
    assert dict(decision.group_to_launch) == {}
    assert any("below min_slices (1 of 2 live)" in n and "1 failed" in n for n in decision.notes)


def test_never_launches_more_than_the_headroom() -> None:
    groups = [gpu_group("h100", max_slices=3, ready=1)]
    decision = route_demand(groups, [gpu_task(f"t-{i}", gpus=8) for i in range(5)], NOW)
    assert dict(decision.group_to_launch) == {"h100": 2}
    assert [u.entry.task_ids for u in decision.unmet_entries] == [("t-2",), ("t-3",), ("t-4",)]
    assert all(u.reason.code == "at_max_slices" for u in decision.unmet_entries)


# --- device type and variant --------------------------------------------------------------------------


def test_unknown_variant_is_no_matching_group_and_says_what_exists() -> None:
    groups = [
        gpu_group("h100-spot", variant="H100"),
        gpu_group("a100", variant="A100-80GB"),
        tpu_group("tpu", slice_size=4),
    ]
    reason = only_unmet(route_demand(groups, [gpu_task("t-1", variant="H200")], NOW))
    assert reason.code == "no_matching_group"
    assert (reason.resource, reason.need) == ("device", "gpu:H200")
    assert reason.have == "gpu:A100-80GB, gpu:H100, tpu:v5litepod-16"
    assert "h100-spot is gpu:H100" in reason.message


def test_variant_none_matches_any_variant_and_variants_compare_case_insensitively() -> None:
    groups = [
        gpu_group("a100", variant="A100-80GB", priority=5),
        gpu_group("h100", variant="H100", priority=10),
    ]
    assert routed_to(route_demand(groups, [gpu_task("any", variant=None)], NOW)) == {"a100": ["any"]}
    assert routed_to(route_demand(groups, [gpu_task("lower", variant="h100")], NOW)) == {"h100": ["lower"]}


def test_cpu_demand_runs_on_any_group_as_in_iris() -> None:
    groups = [gpu_group("h100", priority=10)]
    cpu_entry = DemandEntry(task_ids=("c-1",), device_type=DeviceType.CPU, resources=ResourceSpec(cpu=4))
    assert routed_to(route_demand(groups, [cpu_entry], NOW)) == {"h100": ["c-1"]}


def test_gpu_demand_never_goes_to_a_tpu_group() -> None:
    reason = only_unmet(route_demand([tpu_group("tpu", slice_size=1)], [gpu_task("t-1", variant=None)], NOW))
    assert reason.code == "no_matching_group"


# --- preemptible ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preemptible", "expected"),
    [(True, "spot"), (False, "on-demand"), (None, "spot")],
    ids=["true-only-spot", "false-only-on-demand", "none-either-by-priority"],
)
def test_preemptible_preference(preemptible: bool | None, expected: str) -> None:
    groups = [gpu_group("spot", priority=10, preemptible=True), gpu_group("on-demand", priority=20)]
    decision = route_demand(groups, [gpu_task("t-1", preemptible=preemptible)], NOW)
    assert routed_to(decision) == {expected: ["t-1"]}


def test_preemptible_none_takes_on_demand_when_it_has_the_better_priority() -> None:
    groups = [gpu_group("spot", priority=20, preemptible=True), gpu_group("on-demand", priority=10)]
    assert routed_to(route_demand(groups, [gpu_task("t-1", preemptible=None)], NOW)) == {"on-demand": ["t-1"]}


def test_no_group_with_the_wanted_preemptibility() -> None:
    reason = only_unmet(route_demand([gpu_group("on-demand")], [gpu_task("t-1", preemptible=True)], NOW))
    assert reason.code == "no_matching_group"
    assert (reason.resource, reason.need, reason.have) == ("preemptible", True, False)
    assert "no preemptible group offers gpu:H100" in reason.message


# --- in-flight capacity ---------------------------------------------------------------------------------


def test_in_flight_group_is_reused_before_a_better_priority_group_launches() -> None:
    """Seed defect 2 as well: the literal pseudocode launches max(1, 1 - 1) = 1 slice here."""
    groups = [gpu_group("h100-new", priority=10), gpu_group("h100-booting", priority=20, booting=1)]
    demand = [gpu_task("t-1"), gpu_task("t-2")]
    decision = route_demand(groups, demand, NOW)
    assert routed_to(decision) == {"h100-booting": ["t-1", "t-2"]}
    assert dict(decision.group_to_launch) == {}
    assert decision.entry_decisions[0].reason.code == "in_flight_capacity"
    assert dict(seed_pseudocode_route(groups, demand)[0]) != {}


def test_in_flight_slice_full_then_new_slices_go_by_priority() -> None:
    groups = [gpu_group("h100-new", priority=10), gpu_group("h100-booting", priority=20, requesting=1)]
    demand = [gpu_task(f"t-{i}", gpus=4) for i in range(3)]
    decision = route_demand(groups, demand, NOW)
    assert routed_to(decision) == {"h100-new": ["t-2"], "h100-booting": ["t-0", "t-1"]}
    assert dict(decision.group_to_launch) == {"h100-new": 1}


def test_ready_slices_are_not_pending_capacity() -> None:
    # The scheduler would have used READY slices; demand routed here is what it could not place.
    decision = route_demand([gpu_group("h100", ready=3)], [gpu_task("t-1")], NOW)
    assert dict(decision.group_to_launch) == {"h100": 1}


def test_in_flight_capacity_of_a_group_in_backoff_is_still_used_but_nothing_is_launched() -> None:
    group = gpu_group("h100", availability=Availability.BACKOFF, initializing=1)
    decision = route_demand([group], [gpu_task("t-1", gpus=8), gpu_task("t-2", gpus=8)], NOW)
    assert routed_to(decision) == {"h100": ["t-1"]}
    assert dict(decision.group_to_launch) == {}
    reason = only_unmet(decision)
    assert reason.code == "group_unavailable"
    assert "in-flight slice(s) have no room left" in reason.message


# --- seed defect 1: a group with nothing in flight -------------------------------------------------------


def test_a_group_with_nothing_in_flight_takes_demand() -> None:
    """Seed defect 1: the pseudocode gives a new pending group remaining_slices = in-flight = 0."""
    groups = [gpu_group("h100")]
    decision = route_demand(groups, [gpu_task("t-1")], NOW)
    assert routed_to(decision) == {"h100": ["t-1"]}
    assert dict(decision.group_to_launch) == {"h100": 1}
    _, seed_routed, seed_unmet = seed_pseudocode_route(groups, [gpu_task("t-1")])
    assert seed_routed == {} and seed_unmet == [("t-1",)]


# --- packing (seed defect 2 and beyond the seed's non-goal) --------------------------------------------


def test_four_2gpu_tasks_share_one_8gpu_slice() -> None:
    """Seed defect 2: ``max(1, len(entries) - remaining)`` launches one slice per entry (4 here)."""
    groups = [gpu_group("h100", gpus=8)]
    demand = [gpu_task(f"t-{i}", gpus=2) for i in range(4)]
    decision = route_demand(groups, demand, NOW)
    assert dict(decision.group_to_launch) == {"h100": 1}
    (pending,) = decision.pending_groups
    assert [len(vm) for s in pending.slices for vm in s.vm_tasks] == [4]
    assert pending.free_resources == ResourceSpec(cpu=96 - 4 * 8, memory_bytes=(1024 - 4 * 64) * GIB)
    assert decision.pending_groups[0].launch_reason is not None
    assert decision.pending_groups[0].launch_reason.code == "demand"


def test_literal_pseudocode_buys_one_slice_per_entry() -> None:
    groups = [gpu_group("h100", gpus=8, booting=1)]
    launch, routed, _ = seed_pseudocode_route(groups, [gpu_task(f"t-{i}", gpus=2) for i in range(4)])
    assert routed == {"h100": [("t-0",), ("t-1",), ("t-2",), ("t-3",)]}
    assert launch == {"h100": 3}  # ours: 0, the booting slice takes all four


def test_packing_counts_every_resource_not_only_gpus() -> None:
    # 4 tasks of 2 GPU fit by GPUs, but each wants 40 of the VM's 96 CPUs: 2 per VM.
    groups = [gpu_group("h100", gpus=8, cpu=96)]
    decision = route_demand(groups, [gpu_task(f"t-{i}", gpus=2, cpu=40) for i in range(4)], NOW)
    assert dict(decision.group_to_launch) == {"h100": 2}


def test_first_fit_decreasing_beats_arrival_order() -> None:
    # Arrival-order first fit: [3,3] [5] [5] = 3 slices; largest first: [5,3] [5,3] = 2.
    groups = [gpu_group("h100", gpus=8)]
    demand = [gpu_task("a", 3), gpu_task("b", 3), gpu_task("c", 5), gpu_task("d", 5)]
    assert dict(route_demand(groups, demand, NOW).group_to_launch) == {"h100": 2}


def test_multi_vm_slices_pack_tasks_per_vm() -> None:
    # A slice is 4 VMs of 8 GPUs: five 8-GPU tasks need 5 VMs = 2 slices.
    groups = [gpu_group("h100x4", gpus=8, slice_size=4)]
    decision = route_demand(groups, [gpu_task(f"t-{i}", gpus=8) for i in range(5)], NOW)
    assert dict(decision.group_to_launch) == {"h100x4": 2}


# --- coscheduling ---------------------------------------------------------------------------------------


def test_coscheduled_job_takes_one_whole_slice_of_matching_size() -> None:
    decision = route_demand(
        [tpu_group("v5e", slice_size=4)], [tpu_job("a", 4, tpus=1), tpu_job("b", 4, tpus=1)], NOW
    )
    # Even though both jobs would fit one slice's VMs by resources, each pack takes its own slice.
    assert dict(decision.group_to_launch) == {"v5e": 2}
    assert all(s.coscheduled for s in decision.pending_groups[0].slices)


def test_coschedule_mismatch_when_slice_size_differs_from_task_count() -> None:
    groups = [tpu_group("v5e-16", slice_size=16), tpu_group("v5e-4", slice_size=4)]
    reason = only_unmet(route_demand(groups, [tpu_job("job-7", 8)], NOW))
    assert reason.code == "coschedule_mismatch"
    # numbers from the first group by priority (a tie at 100, so by name: "v5e-16" < "v5e-4")
    assert (reason.resource, reason.need, reason.have) == ("slice_size", 8, 16)
    assert "v5e-16 has slice_size 16" in reason.message and "v5e-4 has slice_size 4" in reason.message


def test_coscheduled_tasks_that_differ_fail_fast() -> None:
    def task(task_id: str, tpus: int) -> UnscheduledTask:
        return UnscheduledTask(
            task_id=task_id,
            coschedule_group_id="job-7",
            device_type=DeviceType.TPU,
            resources=ResourceSpec(cpu=8, tpu_count=tpus),
        )

    entries = build_demand_entries([task("w-0", 8), task("w-1", 8), task("w-2", 4), task("w-3", 8)])
    assert len(entries) == 1 and entries[0].task_ids == ("w-0", "w-1", "w-2", "w-3")
    reason = only_unmet(route_demand([tpu_group("v5e", slice_size=4)], entries, NOW))
    assert reason.code == "coschedule_mismatch"
    assert (reason.resource, reason.need, reason.have) == ("resources.tpu_count", 8, 4)
    assert "task w-2" in reason.message


def test_build_demand_entries_keeps_single_tasks_apart_and_groups_coscheduled_ones() -> None:
    tasks = [
        UnscheduledTask(task_id="solo-1", device_type=DeviceType.CPU),
        UnscheduledTask(task_id="g-0", coschedule_group_id="g", device_type=DeviceType.TPU),
        UnscheduledTask(task_id="solo-2", device_type=DeviceType.CPU),
        UnscheduledTask(task_id="g-1", coschedule_group_id="g", device_type=DeviceType.TPU),
    ]
    entries = build_demand_entries(tasks)
    assert [e.task_ids for e in entries] == [("solo-1",), ("g-0", "g-1"), ("solo-2",)]
    assert all(e.invalid_reason is None for e in entries)
    with pytest.raises(RoutingInputError) as err:
        build_demand_entries([*tasks, UnscheduledTask(task_id="g-0", device_type=DeviceType.CPU)])
    assert err.value.field == "tasks[4].task_id"


# --- min_slices -------------------------------------------------------------------------------------------


def test_min_slices_launches_without_demand() -> None:
    decision = route_demand([tpu_group("v5e", slice_size=16, min_slices=2, max_slices=4, ready=1)], [], NOW)
    assert dict(decision.group_to_launch) == {"v5e": 1}
    (pending,) = decision.pending_groups
    assert pending.reason == "min_slices"
    assert pending.launch_reason is not None and pending.launch_reason.code == "min_slices"
    assert "min_slices 2 (1 live)" in pending.launch_reason.message


def test_demand_rides_on_min_slices_slices_instead_of_buying_more() -> None:
    decision = route_demand([tpu_group("v5e", slice_size=4, min_slices=1)], [tpu_job("j", 4)], NOW)
    assert dict(decision.group_to_launch) == {"v5e": 1}
    assert decision.entry_decisions[0].reason.code == "planned_capacity"


def test_in_flight_slices_count_towards_min_slices() -> None:
    decision = route_demand([gpu_group("h100", min_slices=2, booting=2)], [], NOW)
    assert dict(decision.group_to_launch) == {}


def test_min_slices_is_not_launched_in_backoff() -> None:
    group = gpu_group("h100", min_slices=1, availability=Availability.BACKOFF)
    decision = route_demand([group], [], NOW)
    assert dict(decision.group_to_launch) == {}
    assert decision.notes == (
        "h100 is below min_slices (0 of 1 live) but is backoff; no slice launched for min_slices",
    )


def test_min_slices_above_max_slices_is_a_validation_error() -> None:
    with pytest.raises(InvalidSpecError) as err:
        gpu_group("h100", min_slices=5, max_slices=2)
    assert err.value.field == "min_slices"


# --- backoff / quota --------------------------------------------------------------------------------------


@pytest.mark.parametrize("availability", [Availability.BACKOFF, Availability.QUOTA_EXCEEDED])
def test_unavailable_group_is_skipped_for_the_next_by_priority(availability: Availability) -> None:
    groups = [gpu_group("first", priority=10, availability=availability), gpu_group("second", priority=20)]
    decision = route_demand(groups, [gpu_task("t-1")], NOW)
    assert routed_to(decision) == {"second": ["t-1"]}
    assert f"first is in {availability.value}" in decision.entry_decisions[0].explanation


@pytest.mark.parametrize("availability", [Availability.BACKOFF, Availability.QUOTA_EXCEEDED])
def test_only_unavailable_groups_give_group_unavailable(availability: Availability) -> None:
    reason = only_unmet(route_demand([gpu_group("h100", availability=availability)], [gpu_task("t-1")], NOW))
    assert reason.code == "group_unavailable"
    assert (reason.resource, reason.need, reason.have) == ("availability", "available", availability.value)


def test_backoff_is_over_once_backoff_until_has_passed() -> None:
    group = ScaleGroup(
        name="h100",
        max_slices=2,
        device_type=DeviceType.GPU,
        resources=ResourceSpec(cpu=8, memory_bytes=64 * GIB, gpu_count=8),
        availability=Availability.BACKOFF,
        backoff_until=NOW + timedelta(minutes=5),
    )
    assert route_demand([group], [gpu_task("t", variant=None)], NOW).unmet_entries
    later = NOW + timedelta(minutes=5)
    assert routed_to(route_demand([group], [gpu_task("t", variant=None)], later)) == {"h100": ["t"]}


def test_group_reporting_at_max_slices_takes_no_new_slices() -> None:
    group = gpu_group("h100", availability=Availability.AT_MAX_SLICES)
    reason = only_unmet(route_demand([group], [gpu_task("t-1")], NOW))
    assert reason.code == "at_max_slices"


# --- insufficient resources and precedence ----------------------------------------------------------------


def test_insufficient_resources_names_resource_need_and_have() -> None:
    groups = [gpu_group("h100", gpus=8), gpu_group("h100-big", gpus=8, memory_gib=2048)]
    reason = only_unmet(route_demand(groups, [gpu_task("t-1", gpus=16)], NOW))
    assert reason.code == "insufficient_resources"
    assert (reason.resource, reason.need, reason.have) == ("gpu_count", 16, 8)


def test_insufficient_memory_reports_bytes() -> None:
    groups = [gpu_group("h100", memory_gib=32)]
    reason = only_unmet(route_demand(groups, [gpu_task("t-1")], NOW))
    assert (reason.resource, reason.need, reason.have) == ("memory_bytes", 64 * GIB, 32 * GIB)
    assert "64 GiB" in reason.message and "32 GiB per VM" in reason.message


def test_precedence_prefers_the_group_that_came_closest() -> None:
    too_small = gpu_group("too-small", priority=10, gpus=1)
    in_backoff = gpu_group("in-backoff", priority=20, availability=Availability.BACKOFF)
    full = gpu_group("full", priority=30, max_slices=1, ready=1)
    wrong = gpu_group("wrong", priority=5, variant="A100")
    entry = [gpu_task("t-1", gpus=4)]
    assert only_unmet(route_demand([wrong, too_small], entry, NOW)).code == "insufficient_resources"
    assert only_unmet(route_demand([wrong, too_small, in_backoff], entry, NOW)).code == "group_unavailable"
    reason = only_unmet(route_demand([wrong, too_small, in_backoff, full], entry, NOW))
    assert reason.code == "at_max_slices"
    assert "in-backoff is in backoff" in reason.message and "too-small has 1 GPU per VM" in reason.message


# --- explanations and validation ----------------------------------------------------------------------


def test_each_entry_gets_a_sentence_with_numbers() -> None:
    groups = [
        gpu_group("h100-full", priority=5, max_slices=1, ready=1),
        gpu_group("h100-spot", priority=10, ready=1),
    ]
    decision = route_demand(groups, [gpu_task("t-3", gpus=2)], NOW)
    assert decision.entry_decisions[0].explanation == (
        "task t-3 (2 GPU, 8 CPU, 64 GiB) -> h100-spot: priority 10, first matching group with headroom "
        "(3 of 4 slices free); needs 1 new slice; passed over h100-full has 1 of max 1 slices (0 in flight, "
        "1 ready, 0 failed, 0 planned this round); h100-spot launches 1 slice in total"
    )


def test_duplicate_group_names_and_task_ids_are_rejected() -> None:
    with pytest.raises(RoutingInputError) as err:
        route_demand([gpu_group("a"), gpu_group("a")], [], NOW)
    assert err.value.field == "groups[1].name"
    with pytest.raises(RoutingInputError) as err:
        route_demand([gpu_group("a")], [gpu_task("t"), gpu_task("t")], NOW)
    assert err.value.field == "demand_entries[1].task_ids"


def test_now_must_be_timezone_aware_and_task_ids_non_empty() -> None:
    with pytest.raises(InvalidSpecError):
        route_demand([], [], datetime(2026, 1, 1))
    with pytest.raises(InvalidSpecError) as err:
        DemandEntry(task_ids=(), device_type=DeviceType.GPU)
    assert err.value.field == "task_ids"


def test_constraints_select_groups_by_attribute() -> None:
    base = tpu_group("v5e", slice_size=1)
    eu = ScaleGroup(**{**_fields(base), "name": "eu", "attributes": (("zone", "europe-west4-b"),)})
    us = ScaleGroup(**{**_fields(base), "name": "us", "attributes": (("zone", "us-central2-b"),)})
    entry = DemandEntry(
        task_ids=("p",),
        device_type=DeviceType.TPU,
        resources=ResourceSpec(tpu_count=4),
        constraints=(Constraint("zone", values=("us-central2-b",)),),
    )
    assert routed_to(route_demand([eu, us], [entry], NOW)) == {"us": ["p"]}
    reason = only_unmet(route_demand([eu], [entry], NOW))
    assert (reason.code, reason.resource, reason.need, reason.have) == (
        "no_matching_group",
        "constraints",
        "zone=us-central2-b",
        "europe-west4-b",
    )


def _fields(group: ScaleGroup) -> dict[str, Any]:
    return {name: getattr(group, name) for name in ScaleGroup.__dataclass_fields__}


# --- a literal port of the seed's pseudocode, to show what the tests above catch ---------------------------


def seed_pseudocode_route(
    groups: list[ScaleGroup], entries: list[DemandEntry]
) -> tuple[dict[str, int], dict[str, list[tuple[str, ...]]], list[tuple[str, ...]]]:
    """The seed's ``route_demand`` line by line, over our types. A group's ``remaining_*`` is its per-VM
    capacity and its ``remaining_slices`` the headroom (the seed leaves both undefined on a ScaleGroup)."""

    class View:
        def __init__(self, g: ScaleGroup, remaining_slices: int) -> None:
            self.name, self.g = g.name, g
            self.cpu, self.mem = g.resources.cpu, g.resources.memory_bytes
            self.gpus, self.tpus = g.resources.gpu_count, g.resources.tpu_count
            self.remaining_slices = remaining_slices
            self.assigned: list[DemandEntry] = []

    def can_fit(v: View, e: DemandEntry) -> bool:
        if not v.g.matches_device(e.device_type, e.device_variant):
            return False
        if e.preemptible is not None and v.g.preemptible != e.preemptible:
            return False
        if v.g.availability is not Availability.AVAILABLE:
            return False
        r = e.resources
        if r.cpu > v.cpu or r.memory_bytes > v.mem or r.gpu_count > v.gpus or r.tpu_count > v.tpus:
            return False
        return v.remaining_slices > 0

    def deduct(v: View, e: DemandEntry) -> None:
        v.cpu -= e.resources.cpu
        v.mem -= e.resources.memory_bytes
        v.gpus -= e.resources.gpu_count
        v.tpus -= e.resources.tpu_count
        v.assigned.append(e)

    sorted_groups = sorted(groups, key=lambda g: g.priority or 100)
    pending: dict[str, View] = {}
    routed: dict[str, list[tuple[str, ...]]] = {}
    unmet: list[tuple[str, ...]] = []
    for e in entries:
        pg_hit = next((pg for pg in pending.values() if can_fit(pg, e)), None)
        if pg_hit is not None:
            deduct(pg_hit, e)
            routed.setdefault(pg_hit.name, []).append(e.task_ids)
            continue
        matched = False
        for g in sorted_groups:
            if not can_fit(View(g, g.max_slices - g.slice_state_counts.counted), e):
                continue
            if g.name not in pending:
                pending[g.name] = View(g, g.slice_state_counts.in_flight)
            pg = pending[g.name]
            if can_fit(pg, e):
                deduct(pg, e)
                routed.setdefault(pg.name, []).append(e.task_ids)
                matched = True
                break
        if not matched:
            unmet.append(e.task_ids)
    launch = {
        name: max(0, max(1, len(pg.assigned) - pg.remaining_slices))
        for name, pg in pending.items()
        if pg.assigned
    }
    return launch, routed, unmet
