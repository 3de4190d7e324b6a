"""Types of seed 003's demand routing: demand entries, scale groups and the routing decision.

A scale group's ``resources`` are per VM and one slice is ``slice_size`` VMs. A demand entry's
``resources`` are per task; a coscheduled entry holds every task of its group and needs one whole slice.
The algorithm lives in ``scalar.domain.routing``; this module only holds the values it reads and returns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from scalar.domain.errors import InvalidSpecError
from scalar.domain.reasons import Reason

#: Iris's config treats an unset priority (0 in proto3) as 100; so do we. Lower numbers are preferred.
DEFAULT_PRIORITY = 100


class DeviceType(StrEnum):
    CPU = "cpu"
    GPU = "gpu"
    TPU = "tpu"

    @classmethod
    def parse(cls, value: str, field_name: str = "device_type") -> DeviceType:
        """Accept ``gpu``/``GPU``; raise ``InvalidSpecError`` naming the allowed values otherwise."""
        try:
            return cls(value.strip().lower())
        except (ValueError, AttributeError):
            allowed = ", ".join(t.value for t in cls)
            raise InvalidSpecError(
                field_name, f"unknown device type {value!r}", f"use one of {allowed}"
            ) from None


class Availability(StrEnum):
    """Whether a group may launch new slices now (Iris's ``GroupAvailability``)."""

    AVAILABLE = "available"
    BACKOFF = "backoff"
    QUOTA_EXCEEDED = "quota_exceeded"
    AT_MAX_SLICES = "at_max_slices"


class UnmetCode(StrEnum):
    """Why a demand entry was not routed, from least to most specific (see ``docs/seeds/003-routing.md``)."""

    NO_MATCHING_GROUP = "no_matching_group"
    COSCHEDULE_MISMATCH = "coschedule_mismatch"
    INSUFFICIENT_RESOURCES = "insufficient_resources"
    GROUP_UNAVAILABLE = "group_unavailable"
    AT_MAX_SLICES = "at_max_slices"


class RoutedCode(StrEnum):
    """How a routed entry found room."""

    IN_FLIGHT_CAPACITY = "in_flight_capacity"  # fits slices already requesting/booting/initializing
    PLANNED_CAPACITY = "planned_capacity"  # fits room left in slices planned earlier this round
    NEW_SLICE = "new_slice"  # needed one or more new slices in the first group by priority


class LaunchCode(StrEnum):
    DEMAND = "demand"
    MIN_SLICES = "min_slices"


GIB = 1024**3
MIB = 1024**2
KIB = 1024


def format_bytes(n: int) -> str:
    """``34359738368`` -> ``32 GiB``; at most one decimal."""
    for unit, size in (("TiB", 1024**4), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{_short_number(n / size)} {unit}"
    return f"{n} B"


def _short_number(x: float) -> str:
    if x == int(x):
        return str(int(x))
    return f"{x:.1f}".rstrip("0").rstrip(".")


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """Resources of one VM (a group's) or of one task (an entry's). ``cpu`` in cores, may be fractional."""

    cpu: float = 0.0
    memory_bytes: int = 0
    gpu_count: int = 0
    tpu_count: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.cpu, bool) or not math.isfinite(self.cpu) or self.cpu < 0:
            raise InvalidSpecError("resources.cpu", f"must be a finite number >= 0, got {self.cpu!r}")
        for name in ("memory_bytes", "gpu_count", "tpu_count"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidSpecError(f"resources.{name}", f"must be a whole number >= 0, got {value!r}")

    def describe(self) -> str:
        """``2 GPU, 8 CPU, 32 GiB``: accelerators first, zeros left out."""
        parts: list[str] = []
        if self.gpu_count:
            parts.append(f"{self.gpu_count} GPU")
        if self.tpu_count:
            parts.append(f"{self.tpu_count} TPU")
        if self.cpu:
            parts.append(f"{_short_number(self.cpu)} CPU")
        if self.memory_bytes:
            parts.append(format_bytes(self.memory_bytes))
        return ", ".join(parts) or "no resources"


class ConstraintOp(StrEnum):
    EQ = "eq"
    NE = "ne"
    IN = "in"
    EXISTS = "exists"
    NOT_EXISTS = "not_exists"


@dataclass(frozen=True, slots=True)
class Constraint:
    """An attribute constraint on the group (``zone eq europe-west4-b``), checked against its attributes."""

    key: str
    op: ConstraintOp = ConstraintOp.EQ
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.key:
            raise InvalidSpecError("constraints.key", "must not be empty")
        if self.op in (ConstraintOp.EQ, ConstraintOp.NE) and len(self.values) != 1:
            raise InvalidSpecError("constraints.value", f"operator {self.op.value} takes exactly one value")
        if self.op is ConstraintOp.IN and not self.values:
            raise InvalidSpecError("constraints.value", "operator in takes at least one value")

    def satisfied_by(self, attributes: Mapping[str, str]) -> bool:
        value = attributes.get(self.key)
        if self.op is ConstraintOp.EXISTS:
            return value is not None
        if self.op is ConstraintOp.NOT_EXISTS:
            return value is None
        if self.op is ConstraintOp.NE:
            return value != self.values[0]
        return value is not None and value in self.values

    def describe(self) -> str:
        if self.op is ConstraintOp.EXISTS:
            return f"{self.key} exists"
        if self.op is ConstraintOp.NOT_EXISTS:
            return f"{self.key} not set"
        if self.op is ConstraintOp.EQ:
            return f"{self.key}={self.values[0]}"
        if self.op is ConstraintOp.NE:
            return f"{self.key}!={self.values[0]}"
        return f"{self.key} in ({', '.join(self.values)})"


@dataclass(frozen=True, slots=True)
class SliceStateCounts:
    """How many of a group's slices are in each lifecycle state (terminated slices are not counted)."""

    requesting: int = 0
    booting: int = 0
    initializing: int = 0
    ready: int = 0
    failed: int = 0

    def __post_init__(self) -> None:
        for name in ("requesting", "booting", "initializing", "ready", "failed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidSpecError(
                    f"slice_state_counts.{name}", f"must be a whole number >= 0, got {value!r}"
                )

    @property
    def in_flight(self) -> int:
        """Slices on their way (REQUESTING, BOOTING, INITIALIZING): the pending capacity demand uses first."""
        return self.requesting + self.booting + self.initializing

    @property
    def live(self) -> int:
        """Slices that exist and are not failed: what counts towards ``min_slices``."""
        return self.in_flight + self.ready

    @property
    def counted(self) -> int:
        """Slices that count against ``max_slices``: live ones and failed ones not yet cleaned up."""
        return self.live + self.failed


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleGroup:
    """One scale group: an offer shape the autoscaler can launch slices of."""

    name: str
    max_slices: int
    device_type: DeviceType
    resources: ResourceSpec
    priority: int | None = None
    min_slices: int = 0
    device_variant: str | None = None
    preemptible: bool = False
    slice_size: int = 1
    slice_state_counts: SliceStateCounts = field(default_factory=SliceStateCounts)
    availability: Availability = Availability.AVAILABLE
    backoff_until: datetime | None = None
    attributes: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.name or not self.name.strip():
            raise InvalidSpecError("name", "must not be empty")
        for name in ("min_slices", "max_slices"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidSpecError(name, f"must be a whole number >= 0, got {value!r}")
        if self.min_slices > self.max_slices:
            raise InvalidSpecError(
                "min_slices",
                f"is {self.min_slices} but max_slices is {self.max_slices}",
                "make min_slices <= max_slices",
            )
        if isinstance(self.slice_size, bool) or not isinstance(self.slice_size, int) or self.slice_size < 1:
            raise InvalidSpecError("slice_size", f"must be a whole number >= 1, got {self.slice_size!r}")
        if self.backoff_until is not None and self.backoff_until.tzinfo is None:
            raise InvalidSpecError("backoff_until", "must carry a timezone (e.g. 2026-01-01T00:00:00Z)")

    @property
    def effective_priority(self) -> int:
        """``priority or 100``: 0 and unset both mean 100, as in Iris's config."""
        return self.priority if self.priority else DEFAULT_PRIORITY

    @property
    def attribute_map(self) -> dict[str, str]:
        return dict(self.attributes)

    @property
    def headroom(self) -> int:
        """New slices ``max_slices`` still allows: max minus live and failed slices, never below 0."""
        return max(0, self.max_slices - self.slice_state_counts.counted)

    @property
    def min_slices_deficit(self) -> int:
        """Slices missing to reach ``min_slices`` (live slices only), bounded by the headroom."""
        return min(self.headroom, max(0, self.min_slices - self.slice_state_counts.live))

    def availability_at(self, now: datetime) -> Availability:
        """The group's availability at ``now``: a backoff whose ``backoff_until`` has passed is over."""
        if (
            self.availability is Availability.BACKOFF
            and self.backoff_until is not None
            and now >= self.backoff_until
        ):
            return Availability.AVAILABLE
        return self.availability

    def device_label(self) -> str:
        return (
            f"{self.device_type.value}:{self.device_variant}"
            if self.device_variant
            else self.device_type.value
        )

    def matches_device(self, device_type: DeviceType, device_variant: str | None) -> bool:
        """CPU demand runs on any group (every VM has CPUs, as in Iris); GPU/TPU demand needs the same type,
        and the same variant (case-insensitive) unless the entry leaves the variant open."""
        if device_type is DeviceType.CPU:
            return True
        if self.device_type is not device_type:
            return False
        if device_variant is None:
            return True
        return (self.device_variant or "").casefold() == device_variant.casefold()

    def matches_preemptible(self, preemptible: bool | None) -> bool:
        return preemptible is None or preemptible == self.preemptible


@dataclass(frozen=True, slots=True, kw_only=True)
class DemandEntry:
    """One unit of unscheduled work: a single task, or every task of one coscheduled group."""

    task_ids: tuple[str, ...]
    device_type: DeviceType
    resources: ResourceSpec = field(default_factory=ResourceSpec)
    coschedule_group_id: str | None = None
    device_variant: str | None = None
    preemptible: bool | None = None
    constraints: tuple[Constraint, ...] = ()
    #: Set by ``build_demand_entries`` when the tasks of a coscheduled group disagree: routing reports it.
    invalid_reason: Reason | None = None

    def __post_init__(self) -> None:
        if not self.task_ids:
            raise InvalidSpecError("task_ids", "must list at least one task id")
        for i, task_id in enumerate(self.task_ids):
            if not isinstance(task_id, str) or not task_id.strip():
                raise InvalidSpecError(f"task_ids[{i}]", "must be a non-empty string")
        if len(set(self.task_ids)) != len(self.task_ids):
            raise InvalidSpecError("task_ids", "lists a task id twice")

    @property
    def is_coscheduled(self) -> bool:
        return self.coschedule_group_id is not None

    @property
    def task_count(self) -> int:
        return len(self.task_ids)

    def device_label(self) -> str:
        if self.device_type is DeviceType.CPU:
            return "cpu (any group)"
        return (
            f"{self.device_type.value}:{self.device_variant}"
            if self.device_variant
            else self.device_type.value
        )

    def describe(self) -> str:
        """``task t-3 (2 GPU)`` or ``coscheduled job-7: 4 tasks t-1..t-4 (8 TPU each)``."""
        res = self.resources.describe()
        if self.is_coscheduled:
            return f"coscheduled {self.coschedule_group_id}: {self.task_count} tasks {_ids(self.task_ids)} ({res} each)"
        if self.task_count == 1:
            return f"task {self.task_ids[0]} ({res})"
        return f"{self.task_count} tasks {_ids(self.task_ids)} ({res} each)"


def _ids(task_ids: tuple[str, ...]) -> str:
    if len(task_ids) <= 3:
        return ", ".join(task_ids)
    return f"{task_ids[0]}..{task_ids[-1]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class UnscheduledTask:
    """A task the scheduler could not place; ``build_demand_entries`` groups these into entries."""

    task_id: str
    device_type: DeviceType
    resources: ResourceSpec = field(default_factory=ResourceSpec)
    coschedule_group_id: str | None = None
    device_variant: str | None = None
    preemptible: bool | None = None
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskRef:
    """One task of the ``entry_index``-th demand entry, as placed on a VM of a planned slice."""

    entry_index: int
    task_id: str


@dataclass(frozen=True, slots=True)
class PlannedSlice:
    """A slice of a pending group after routing: in flight already or to launch; tasks per VM."""

    in_flight: bool
    coscheduled: bool
    vm_tasks: tuple[tuple[TaskRef, ...], ...]

    @property
    def is_empty(self) -> bool:
        return not any(self.vm_tasks)


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingGroup:
    """A group that has capacity on its way or to launch: the seed's pending accounting, as a result."""

    name: str
    reason: str  # "in-flight", "min_slices" or "demand-routed": why the group became pending
    in_flight_slices: int
    slices_to_launch: int
    remaining_slices: int  # headroom left after this round's launches
    free_resources: ResourceSpec  # room left on the VMs of its in-flight and planned slices
    assigned_entries: tuple[DemandEntry, ...]
    slices: tuple[PlannedSlice, ...]
    launch_reason: Reason | None


@dataclass(frozen=True, slots=True)
class UnmetDemand:
    entry: DemandEntry
    reason: Reason


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryDecision:
    """What happened to one demand entry (in input order), with the sentence a person reads."""

    entry_index: int
    entry: DemandEntry
    group: str | None
    reason: Reason
    explanation: str

    @property
    def routed(self) -> bool:
        return self.group is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingDecision:
    """The autoscaler's decision for one round: what to launch, where each entry goes, what stays unmet."""

    group_to_launch: Mapping[str, int]
    routed_entries: Mapping[str, tuple[DemandEntry, ...]]
    unmet_entries: tuple[UnmetDemand, ...]
    entry_decisions: tuple[EntryDecision, ...]
    pending_groups: tuple[PendingGroup, ...]
    notes: tuple[str, ...] = ()

    def explain(self) -> list[str]:
        """Every sentence of the decision: one per launch, one per entry, then group notes."""
        lines = [pg.launch_reason.message for pg in self.pending_groups if pg.launch_reason is not None]
        lines += [d.explanation for d in self.entry_decisions]
        lines += list(self.notes)
        return lines
