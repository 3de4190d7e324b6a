"""Packing routed demand into a scale group's slices (beyond seed 003's one-slice-per-entry).

A slice is ``slice_size`` VMs, each with the group's per-VM resources. A non-coscheduled task goes on one
VM that still has room for it; a coscheduled entry takes one whole empty slice, one task per VM. Slices
already in flight (and those planned for ``min_slices``) come first and cost nothing extra; a new slice
is opened only when no existing one has room, and never beyond ``limit`` slices in total.

Amounts are integers (CPU in millicores) so packing is exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scalar.domain.routing_model import DemandEntry, PlannedSlice, ResourceSpec, TaskRef

#: (cpu millicores, memory bytes, GPUs, TPUs)
Vec = tuple[int, int, int, int]

#: The order in which a shortfall is reported: accelerators first, they are what people ask for.
SHORTFALL_ORDER: tuple[tuple[int, str], ...] = (
    (2, "gpu_count"),
    (3, "tpu_count"),
    (0, "cpu"),
    (1, "memory_bytes"),
)


def to_vec(resources: ResourceSpec) -> Vec:
    return (
        round(resources.cpu * 1000),
        resources.memory_bytes,
        resources.gpu_count,
        resources.tpu_count,
    )


def fits(need: Vec, free: Vec) -> bool:
    return need[0] <= free[0] and need[1] <= free[1] and need[2] <= free[2] and need[3] <= free[3]


def first_shortfall(need: ResourceSpec, vm: ResourceSpec) -> str | None:
    """The first resource (GPU, TPU, CPU, memory) one task needs more of than one VM has, or None."""
    n, c = to_vec(need), to_vec(vm)
    for index, name in SHORTFALL_ORDER:
        if n[index] > c[index]:
            return name
    return None


def _minus(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3])


def _scale(a: Vec, k: int) -> Vec:
    return (a[0] * k, a[1] * k, a[2] * k, a[3] * k)


def _plus(a: Vec, b: Vec) -> Vec:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])


@dataclass(frozen=True, slots=True)
class PackUnit:
    """The tasks of one routed entry, as packing sees them."""

    entry_index: int
    tasks: tuple[TaskRef, ...]
    need: Vec  # per task
    coscheduled: bool

    @classmethod
    def of(cls, entry_index: int, entry: DemandEntry) -> PackUnit:
        tasks = tuple(TaskRef(entry_index, t) for t in entry.task_ids)
        return cls(entry_index, tasks, to_vec(entry.resources), entry.is_coscheduled)


class _Slice:
    __slots__ = ("coscheduled", "free", "in_flight", "room", "tasks")

    def __init__(self, vm: Vec, size: int, in_flight: bool) -> None:
        self.in_flight = in_flight
        self.coscheduled = False
        self.free: list[Vec] = [vm] * size
        self.room: Vec = vm  # per resource, the most any one VM has left: a quick "nothing fits here"
        self.tasks: list[list[TaskRef]] = [[] for _ in range(size)]

    def update_room(self) -> None:
        f = self.free
        self.room = (
            max(v[0] for v in f),
            max(v[1] for v in f),
            max(v[2] for v in f),
            max(v[3] for v in f),
        )

    def is_empty(self) -> bool:
        return not self.coscheduled and not any(self.tasks)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where first fit would put a unit's tasks: ``(slice, vm)`` per task, and how many slices it opens."""

    unit: PackUnit
    positions: tuple[tuple[int, int], ...]
    opened: int


class SlicePacking:
    """Mutable working state of one group's slices during a routing round (private to routing)."""

    def __init__(self, vm: Vec, slice_size: int, in_flight: int, preopened: int, limit: int) -> None:
        self.vm = vm
        self.slice_size = slice_size
        self.in_flight = in_flight
        self.limit = max(limit, in_flight + preopened)
        self.slices: list[_Slice] = [
            _Slice(vm, slice_size, i < in_flight) for i in range(in_flight + preopened)
        ]
        self.units: list[PackUnit] = []
        self.used: Vec = (0, 0, 0, 0)  # sum of every placed task's needs

    @property
    def launches(self) -> int:
        """New slices this plan launches: every slice beyond those already in flight."""
        return len(self.slices) - self.in_flight

    @property
    def free_slices(self) -> int:
        """Slices that could still be opened before ``limit``."""
        return self.limit - len(self.slices)

    def place(self, unit: PackUnit, allow_open: bool = True, limit: int | None = None) -> Placement | None:
        """First fit, without changing anything: the first slice/VM with room for each task, opening new
        slices (up to ``limit``, default the packing's) only when ``allow_open``. None if it cannot."""
        cap = self.limit if limit is None else limit
        n = len(self.slices)
        if unit.coscheduled:
            if len(unit.tasks) != self.slice_size or not fits(unit.need, self.vm):
                return None
            index = next((i for i, s in enumerate(self.slices) if s.is_empty()), None)
            opened = 0
            if index is None:
                if not allow_open or n >= cap:
                    return None
                index, opened = n, 1
            return Placement(unit, tuple((index, v) for v in range(self.slice_size)), opened)
        overlay: dict[tuple[int, int], Vec] = {}
        positions: list[tuple[int, int]] = []
        opened = 0
        for _task in unit.tasks:
            spot = self._first_fit(unit.need, overlay, n + opened)
            if spot is None:
                if not allow_open or n + opened >= cap or not fits(unit.need, self.vm):
                    return None
                spot = (n + opened, 0)
                opened += 1
            overlay[spot] = _minus(overlay.get(spot, self._free(spot)), unit.need)
            positions.append(spot)
        return Placement(unit, tuple(positions), opened)

    def _free(self, spot: tuple[int, int]) -> Vec:
        si, vi = spot
        return self.slices[si].free[vi] if si < len(self.slices) else self.vm

    def _first_fit(
        self, need: Vec, overlay: dict[tuple[int, int], Vec], count: int
    ) -> tuple[int, int] | None:
        for si in range(count):
            if si < len(self.slices):
                s = self.slices[si]
                # ``room`` bounds every VM's free space (and the overlay only ever lowers it).
                if s.coscheduled or not fits(need, s.room):
                    continue
                frees: Sequence[Vec] = s.free
            else:
                frees = [self.vm] * self.slice_size
            for vi, free in enumerate(frees):
                current = overlay.get((si, vi), free)
                if fits(need, current):
                    return (si, vi)
        return None

    def apply(self, placement: Placement) -> None:
        unit = placement.unit
        for _ in range(placement.opened):
            self.slices.append(_Slice(self.vm, self.slice_size, in_flight=False))
        for task, (si, vi) in zip(unit.tasks, placement.positions, strict=True):
            target = self.slices[si]
            target.coscheduled = target.coscheduled or unit.coscheduled
            target.free[vi] = _minus(target.free[vi], unit.need)
            target.tasks[vi].append(task)
            target.update_room()
            self.used = _plus(self.used, unit.need)
        self.units.append(unit)

    def add(self, unit: PackUnit) -> bool:
        """First fit, applied. False (nothing changed) when it would pass ``limit``."""
        placement = self.place(unit)
        if placement is None:
            return False
        self.apply(placement)
        return True

    def could_hold(self, unit: PackUnit) -> bool:
        """A cheap necessary condition for any packing of everything plus ``unit`` within ``limit``."""
        total = _plus(self.used, _scale(unit.need, len(unit.tasks)))
        capacity = _scale(self.vm, self.slice_size * self.limit)
        gangs = sum(1 for u in self.units if u.coscheduled) + (1 if unit.coscheduled else 0)
        return fits(total, capacity) and gangs <= self.limit

    def planned_slices(self) -> tuple[PlannedSlice, ...]:
        return tuple(
            PlannedSlice(
                in_flight=s.in_flight,
                coscheduled=s.coscheduled,
                vm_tasks=tuple(tuple(t) for t in s.tasks),
            )
            for s in self.slices
        )

    def free_resources(self) -> ResourceSpec:
        """Room left on the VMs of planned slices (a coscheduled slice is taken whole)."""
        totals = [0, 0, 0, 0]
        for s in self.slices:
            if s.coscheduled:
                continue
            for free in s.free:
                for d in range(4):
                    totals[d] += free[d]
        return ResourceSpec(
            cpu=totals[0] / 1000, memory_bytes=totals[1], gpu_count=totals[2], tpu_count=totals[3]
        )


def _size_key(need: Vec, vm: Vec) -> tuple[float, float]:
    shares = [n / c for n, c in zip(need, vm, strict=True) if c > 0]
    return (max(shares, default=0.0), sum(shares))


def pack_decreasing(
    units: Iterable[PackUnit], vm: Vec, slice_size: int, in_flight: int, preopened: int, limit: int
) -> SlicePacking | None:
    """First fit decreasing: coscheduled entries first (each needs an empty slice), then single tasks by
    their largest share of a VM, largest first. Returns None when it needs more than ``limit`` slices."""
    ordered: Sequence[PackUnit] = list(units)
    packing = SlicePacking(vm, slice_size, in_flight, preopened, limit)
    gangs = [u for u in ordered if u.coscheduled]
    singles = [
        PackUnit(u.entry_index, (task,), u.need, False)
        for u in ordered
        if not u.coscheduled
        for task in u.tasks
    ]
    singles.sort(key=lambda u: _size_key(u.need, vm), reverse=True)
    for unit in [*gangs, *singles]:
        if not packing.add(unit):
            return None
    # Keep one unit per entry (not per task) for later repacks.
    packing.units = list(ordered)
    return packing
