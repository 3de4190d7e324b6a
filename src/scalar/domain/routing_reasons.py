"""Why a scale group cannot take a demand entry, and the one reason an unmet entry reports.

Each group that cannot take an entry gets a verdict at the stage where it stopped. Stages run from the
least to the most specific: device type/variant, preemptibility, constraints (all ``no_matching_group``),
then ``coschedule_mismatch`` (slice_size != task count), ``insufficient_resources`` (one task does not fit
one VM), ``group_unavailable`` (backoff, quota) and ``at_max_slices``. An unmet entry reports the most
specific stage any group reached: the group that came closest to taking it says the most about what to
change. Its numbers come from the first such group by priority; the message names every one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from scalar.domain.reasons import Reason
from scalar.domain.routing_model import (
    Availability,
    DemandEntry,
    ResourceSpec,
    ScaleGroup,
    UnmetCode,
    format_bytes,
)
from scalar.domain.routing_packing import first_shortfall

MAX_LISTED = 6


class Stage(IntEnum):
    DEVICE = 0
    PREEMPTIBLE = 1
    CONSTRAINTS = 2
    COSCHEDULE = 3
    RESOURCES = 4
    UNAVAILABLE = 5
    FULL = 6


STAGE_CODE: dict[Stage, UnmetCode] = {
    Stage.DEVICE: UnmetCode.NO_MATCHING_GROUP,
    Stage.PREEMPTIBLE: UnmetCode.NO_MATCHING_GROUP,
    Stage.CONSTRAINTS: UnmetCode.NO_MATCHING_GROUP,
    Stage.COSCHEDULE: UnmetCode.COSCHEDULE_MISMATCH,
    Stage.RESOURCES: UnmetCode.INSUFFICIENT_RESOURCES,
    Stage.UNAVAILABLE: UnmetCode.GROUP_UNAVAILABLE,
    Stage.FULL: UnmetCode.AT_MAX_SLICES,
}

_RESOURCE_UNIT = {"gpu_count": "GPU", "tpu_count": "TPU", "cpu": "CPU", "memory_bytes": "memory"}


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why ``group`` cannot take an entry: the stage it stopped at, a short text, and the numbers."""

    group: ScaleGroup
    stage: Stage
    detail: str
    resource: str | None = None
    need: float | int | str | None = None
    have: float | int | str | None = None
    limit: float | int | str | None = None


def _preemptible_word(value: bool | None) -> str:
    return "either" if value is None else ("preemptible" if value else "on-demand")


def _amount(resource: str, spec: ResourceSpec) -> float | int:
    value: float | int = getattr(spec, resource)
    return value


def _show(resource: str, amount: float | int) -> str:
    if resource == "memory_bytes":
        return format_bytes(int(amount))
    shown = int(amount) if float(amount).is_integer() else amount
    return f"{shown} {_RESOURCE_UNIT[resource]}"


def shape_verdict(group: ScaleGroup, entry: DemandEntry) -> Verdict | None:
    """The first structural reason ``group`` can never take ``entry``, or None if its shape fits."""
    if not group.matches_device(entry.device_type, entry.device_variant):
        return Verdict(group, Stage.DEVICE, f"{group.name} is {group.device_label()}", "device")
    if not group.matches_preemptible(entry.preemptible):
        return Verdict(
            group,
            Stage.PREEMPTIBLE,
            f"{group.name} is {_preemptible_word(group.preemptible)}",
            "preemptible",
            entry.preemptible,
            group.preemptible,
        )
    attributes = group.attribute_map
    for constraint in entry.constraints:
        if not constraint.satisfied_by(attributes):
            value = attributes.get(constraint.key)
            return Verdict(
                group,
                Stage.CONSTRAINTS,
                f"{group.name} has {constraint.key}={value if value is not None else '(unset)'}",
                "constraints",
                constraint.describe(),
                value,
            )
    if entry.is_coscheduled and group.slice_size != entry.task_count:
        return Verdict(
            group,
            Stage.COSCHEDULE,
            f"{group.name} has slice_size {group.slice_size}",
            "slice_size",
            entry.task_count,
            group.slice_size,
        )
    short = first_shortfall(entry.resources, group.resources)
    if short is not None:
        need, have = _amount(short, entry.resources), _amount(short, group.resources)
        return Verdict(
            group,
            Stage.RESOURCES,
            f"{group.name} has {_show(short, have)} per VM",
            short,
            need,
            have,
        )
    return None


def capacity_verdict(
    group: ScaleGroup,
    availability: Availability,
    planned_launches: int,
    slices_needed: int,
    free_slices: int,
) -> Verdict:
    """Why a group whose shape fits has no room: it may not launch now, or ``max_slices`` is reached."""
    counts = group.slice_state_counts
    if availability is Availability.AT_MAX_SLICES:
        return Verdict(
            group,
            Stage.FULL,
            f"{group.name} reports at_max_slices ({counts.counted} of max {group.max_slices} slices)",
            "slices",
            slices_needed,
            0,
            group.max_slices,
        )
    if availability is not Availability.AVAILABLE:
        why = availability.value
        if availability is Availability.BACKOFF and group.backoff_until is not None:
            why += f" until {group.backoff_until.isoformat()}"
        room = f"; its {counts.in_flight} in-flight slice(s) have no room left" if counts.in_flight else ""
        return Verdict(
            group,
            Stage.UNAVAILABLE,
            f"{group.name} is in {why}{room}",
            "availability",
            "available",
            availability.value,
        )
    used = counts.counted + planned_launches
    return Verdict(
        group,
        Stage.FULL,
        f"{group.name} has {used} of max {group.max_slices} slices ({counts.in_flight} in flight, "
        f"{counts.ready} ready, {counts.failed} failed, {planned_launches} planned this round)",
        "slices",
        slices_needed,
        free_slices,
        group.max_slices,
    )


def _listing(verdicts: Sequence[Verdict]) -> str:
    shown = "; ".join(v.detail for v in verdicts[:MAX_LISTED])
    if len(verdicts) > MAX_LISTED:
        shown += f"; and {len(verdicts) - MAX_LISTED} more"
    return shown


def unmet_reason(entry: DemandEntry, verdicts: Sequence[Verdict]) -> Reason:
    """The reason of the most specific stage reached (verdicts are in priority order, one per group)."""
    if not verdicts:
        return Reason(
            UnmetCode.NO_MATCHING_GROUP.value,
            "no scale groups are configured",
            "device",
            entry.device_label(),
            "none",
        )
    top = max(v.stage for v in verdicts)
    at_top = [v for v in verdicts if v.stage == top]
    first = at_top[0]
    code = STAGE_CODE[top].value
    closer = [v for v in verdicts if Stage.COSCHEDULE <= v.stage < top]
    also = f" (other matching groups: {_listing(closer)})" if closer else ""

    if top is Stage.DEVICE:
        offered = ", ".join(sorted({v.group.device_label() for v in verdicts}))
        message = f"no scale group offers {entry.device_label()}; groups offer: {_listing(at_top)}"
        return Reason(code, message, "device", entry.device_label(), offered)
    if top is Stage.PREEMPTIBLE:
        want = _preemptible_word(entry.preemptible)
        message = f"no {want} group offers {entry.device_label()}: {_listing(at_top)}"
        return Reason(code, message, "preemptible", first.need, first.have)
    if top is Stage.CONSTRAINTS:
        message = f"no {entry.device_label()} group satisfies constraint {first.need}: {_listing(at_top)}"
        return Reason(code, message, "constraints", first.need, first.have)
    if top is Stage.COSCHEDULE:
        message = (
            f"coscheduled {entry.coschedule_group_id} needs {entry.task_count} tasks on one slice "
            f"(slice_size {entry.task_count}), but matching groups differ: {_listing(at_top)}"
        )
        return Reason(code, message, "slice_size", first.need, first.have)
    if top is Stage.RESOURCES:
        resource = first.resource or "resources"
        same = [v for v in at_top if v.resource == resource]
        have = max((v.have for v in same if isinstance(v.have, int | float)), default=first.have)
        need = first.need if isinstance(first.need, int | float) else 0
        message = (
            f"one task needs {_show(resource, need)}, "
            f"more than one VM of any matching group has: {_listing(at_top)}{also}"
        )
        return Reason(code, message, resource, first.need, have)
    if top is Stage.UNAVAILABLE:
        message = f"matching groups cannot launch slices now: {_listing(at_top)}{also}"
        return Reason(code, message, "availability", first.need, first.have)
    message = f"matching groups are at max_slices: {_listing(at_top)}{also}"
    return Reason(code, message, "slices", first.need, first.have, first.limit)
