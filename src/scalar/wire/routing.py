"""File formats of ``scalar route``: GROUPS.json and DEMAND.json in, the routing decision out.

See ``docs/formats/route.md``. Field paths in errors are relative to the file (``[2].min_slices``).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import AliasChoices, AwareDatetime, BaseModel, ConfigDict, Field, RootModel, field_validator

from scalar.domain.errors import InvalidSpecError
from scalar.domain.reasons import Reason
from scalar.domain.routing_model import (
    Availability,
    Constraint,
    ConstraintOp,
    DemandEntry,
    DeviceType,
    PendingGroup,
    ResourceSpec,
    RoutingDecision,
    ScaleGroup,
    SliceStateCounts,
)

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "ki": 1024,
    "kib": 1024,
    "mi": 1024**2,
    "mib": 1024**2,
    "gi": 1024**3,
    "gib": 1024**3,
    "ti": 1024**4,
    "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_memory_bytes(value: int | float | str) -> int:
    """Bytes as a whole number, or a string with a unit: ``128GB`` (10^9), ``16GiB`` (2^30), ``512Mi``."""
    if isinstance(value, bool):
        raise ValueError("must be a number of bytes or a size like '16GiB'")
    if isinstance(value, int | float):
        if value < 0 or value != int(value):
            raise ValueError(f"must be a whole number of bytes >= 0, got {value}")
        return int(value)
    match = _SIZE.match(value)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"cannot read size {value!r}; write bytes (17179869184) or e.g. '16GiB', '128GB'")
    return round(float(match.group(1)) * _UNITS[match.group(2).lower()])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class EntryResourcesModel(_Strict):
    """Per-task resources of a demand entry; every field defaults to 0."""

    cpu: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    memory_bytes: int = Field(default=0, validation_alias=AliasChoices("memory_bytes", "memory", "ram"))
    gpu_count: int = Field(default=0, ge=0)
    tpu_count: int = Field(default=0, ge=0, validation_alias=AliasChoices("tpu_count", "tpu_chip_count"))

    @field_validator("memory_bytes", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> int:
        return parse_memory_bytes(value)

    def to_domain(self) -> ResourceSpec:
        return ResourceSpec(
            cpu=self.cpu, memory_bytes=self.memory_bytes, gpu_count=self.gpu_count, tpu_count=self.tpu_count
        )


class GroupResourcesModel(EntryResourcesModel):
    """Per-VM resources of a scale group: ``cpu`` and ``memory_bytes`` are required (as in the seed)."""

    cpu: float = Field(..., ge=0, allow_inf_nan=False)
    memory_bytes: int = Field(..., validation_alias=AliasChoices("memory_bytes", "memory", "ram"))


class SliceStateCountsModel(_Strict):
    requesting: int = Field(default=0, ge=0)
    booting: int = Field(default=0, ge=0)
    initializing: int = Field(default=0, ge=0)
    ready: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    terminated: int = Field(
        default=0, ge=0, description="accepted and ignored: terminated slices count for nothing"
    )

    def to_domain(self) -> SliceStateCounts:
        return SliceStateCounts(
            requesting=self.requesting,
            booting=self.booting,
            initializing=self.initializing,
            ready=self.ready,
            failed=self.failed,
        )


def _device_type(value: Any) -> str:
    if not isinstance(value, str) or value.strip().lower() not in {t.value for t in DeviceType}:
        raise ValueError(f"unknown device type {value!r}; use one of cpu, gpu, tpu")
    return value.strip().lower()


class GroupModel(_Strict):
    name: str = Field(..., min_length=1)
    priority: int | None = None
    min_slices: int = Field(default=0, ge=0)
    max_slices: int = Field(..., ge=0)
    device_type: str = Field(..., validation_alias=AliasChoices("device_type", "accelerator_type"))
    device_variant: str | None = Field(
        default=None, validation_alias=AliasChoices("device_variant", "accelerator_variant")
    )
    preemptible: bool = False
    resources: GroupResourcesModel
    slice_size: int = Field(default=1, ge=1)
    slice_state_counts: SliceStateCountsModel = Field(default_factory=SliceStateCountsModel)
    availability: Literal["available", "backoff", "quota_exceeded", "at_max_slices"] = "available"
    backoff_until: AwareDatetime | None = None
    attributes: dict[str, str] = Field(default_factory=dict)

    @field_validator("device_type", mode="before")
    @classmethod
    def _check_device(cls, value: Any) -> str:
        return _device_type(value)

    def to_domain(self) -> ScaleGroup:
        return ScaleGroup(
            name=self.name,
            priority=self.priority,
            min_slices=self.min_slices,
            max_slices=self.max_slices,
            device_type=DeviceType(self.device_type),
            device_variant=self.device_variant or None,
            preemptible=self.preemptible,
            resources=self.resources.to_domain(),
            slice_size=self.slice_size,
            slice_state_counts=self.slice_state_counts.to_domain(),
            availability=Availability(self.availability),
            backoff_until=self.backoff_until,
            attributes=tuple(sorted(self.attributes.items())),
        )


class ConstraintModel(_Strict):
    key: str = Field(..., min_length=1)
    op: Literal["eq", "ne", "in", "exists", "not_exists"] = "eq"
    value: str | list[str] | None = None

    def to_domain(self) -> Constraint:
        if self.value is None:
            values: tuple[str, ...] = ()
        elif isinstance(self.value, str):
            values = (self.value,)
        else:
            values = tuple(self.value)
        return Constraint(self.key, ConstraintOp(self.op), values)


class DemandEntryModel(_Strict):
    task_ids: list[str] = Field(..., min_length=1)
    coschedule_group_id: str | None = None
    device_type: str = "cpu"
    device_variant: str | None = None
    preemptible: bool | None = None
    resources: EntryResourcesModel = Field(default_factory=EntryResourcesModel)
    constraints: list[ConstraintModel] = Field(default_factory=list)

    @field_validator("device_type", mode="before")
    @classmethod
    def _check_device(cls, value: Any) -> str:
        return _device_type(value)

    @field_validator("task_ids")
    @classmethod
    def _ids(cls, value: list[str]) -> list[str]:
        for i, task_id in enumerate(value):
            if not task_id.strip():
                raise ValueError(f"task id [{i}] is empty")
        if len(set(value)) != len(value):
            raise ValueError("lists a task id twice")
        return value

    def to_domain(self) -> DemandEntry:
        return DemandEntry(
            task_ids=tuple(self.task_ids),
            coschedule_group_id=self.coschedule_group_id,
            device_type=DeviceType(self.device_type),
            device_variant=self.device_variant or None,
            preemptible=self.preemptible,
            resources=self.resources.to_domain(),
            constraints=tuple(c.to_domain() for c in self.constraints),
        )


def _indexed(index: int, exc: InvalidSpecError) -> InvalidSpecError:
    return InvalidSpecError(f"[{index}].{exc.field}", exc.problem, exc.hint)


class GroupsFile(RootModel[list[GroupModel]]):
    """GROUPS.json: a list of scale groups."""

    def to_domain(self) -> list[ScaleGroup]:
        out: list[ScaleGroup] = []
        for i, group in enumerate(self.root):
            try:
                out.append(group.to_domain())
            except InvalidSpecError as exc:
                raise _indexed(i, exc) from None
        return out


class DemandFile(RootModel[list[DemandEntryModel]]):
    """DEMAND.json: a list of demand entries."""

    def to_domain(self) -> list[DemandEntry]:
        out: list[DemandEntry] = []
        for i, entry in enumerate(self.root):
            try:
                out.append(entry.to_domain())
            except InvalidSpecError as exc:
                raise _indexed(i, exc) from None
        return out


# --- decision -> JSON -----------------------------------------------------------------------------------


def _number(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def _resources(r: ResourceSpec) -> dict[str, Any]:
    return {
        "cpu": _number(r.cpu),
        "memory_bytes": r.memory_bytes,
        "gpu_count": r.gpu_count,
        "tpu_count": r.tpu_count,
    }


def entry_to_json(entry: DemandEntry) -> dict[str, Any]:
    """A demand entry in DEMAND.json's shape (``constraints`` only when there are some)."""
    out: dict[str, Any] = {
        "task_ids": list(entry.task_ids),
        "coschedule_group_id": entry.coschedule_group_id,
        "device_type": entry.device_type.value,
        "device_variant": entry.device_variant,
        "preemptible": entry.preemptible,
        "resources": _resources(entry.resources),
    }
    if entry.constraints:
        out["constraints"] = [
            {"key": c.key, "op": c.op.value, "value": _constraint_value(c)} for c in entry.constraints
        ]
    return out


def _constraint_value(c: Constraint) -> str | list[str] | None:
    if c.op is ConstraintOp.IN:
        return list(c.values)
    return c.values[0] if c.values else None


def _reason(reason: Reason | None) -> dict[str, Any] | None:
    return None if reason is None else reason.to_dict()


def _pending_to_json(pg: PendingGroup) -> dict[str, Any]:
    return {
        "name": pg.name,
        "reason": pg.reason,
        "in_flight_slices": pg.in_flight_slices,
        "slices_to_launch": pg.slices_to_launch,
        "remaining_slices": pg.remaining_slices,
        "free_resources": _resources(pg.free_resources),
        "task_ids": [t for e in pg.assigned_entries for t in e.task_ids],
        "launch_reason": _reason(pg.launch_reason),
        "slices": [
            {
                "in_flight": s.in_flight,
                "coscheduled": s.coscheduled,
                "vms": [[t.task_id for t in vm] for vm in s.vm_tasks],
            }
            for s in pg.slices
        ],
    }


def decision_to_json(decision: RoutingDecision) -> dict[str, Any]:
    """``{group_to_launch, routed_entries, unmet_entries}`` as the issue specifies, plus the explanations."""
    return {
        "group_to_launch": dict(decision.group_to_launch),
        "routed_entries": {
            name: [entry_to_json(e) for e in entries] for name, entries in decision.routed_entries.items()
        },
        "unmet_entries": [
            {"task_ids": list(u.entry.task_ids), "reason": u.reason.to_dict()} for u in decision.unmet_entries
        ],
        "decisions": [
            {
                "task_ids": list(d.entry.task_ids),
                "group": d.group,
                "code": d.reason.code,
                "explanation": d.explanation,
            }
            for d in decision.entry_decisions
        ],
        "launch_reasons": {
            pg.name: pg.launch_reason.to_dict()
            for pg in decision.pending_groups
            if pg.launch_reason is not None
        },
        "pending_groups": [_pending_to_json(pg) for pg in decision.pending_groups],
        "notes": list(decision.notes),
    }
