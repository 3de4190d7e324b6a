"""Seed 003: autoscaler v2 demand routing. Which scale groups to grow, by how many slices, and why.

``route_demand(groups, demand_entries, now)`` walks the entries in order. Each one goes

1. to a *pending* group (one with slices in flight, slices planned for ``min_slices``, or slices already
   chosen earlier this round) whose planned slices still have room for it at no extra slice, in
   priority order; otherwise
2. to the first group by priority (lower number first; 0 or unset = 100; ties by name) that matches its
   device type/variant, preemptibility and constraints, whose VM fits one task, and that may open the
   slices it needs within ``max_slices``; otherwise
3. to the unmet list, with the most specific reason any group gave (``routing_reasons``).

Slices to launch come from packing the routed entries into slices (``routing_packing``), not one slice
per entry. See ``docs/seeds/003-routing.md`` for the seed's defects and the choices made here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from scalar.domain.errors import InvalidSpecError
from scalar.domain.reasons import Reason
from scalar.domain.routing_model import (
    Availability,
    Constraint,
    DemandEntry,
    EntryDecision,
    LaunchCode,
    PendingGroup,
    RoutedCode,
    RoutingDecision,
    ScaleGroup,
    UnmetCode,
    UnmetDemand,
    UnscheduledTask,
)
from scalar.domain.routing_packing import PackUnit, SlicePacking, Vec, fits, pack_decreasing, to_vec
from scalar.domain.routing_reasons import Stage, Verdict, capacity_verdict, shape_verdict, unmet_reason

__all__ = ["RoutingInputError", "build_demand_entries", "route_demand", "sorted_by_priority"]


class RoutingInputError(InvalidSpecError):
    """A routing input is invalid; ``collection``/``index``/``subfield`` locate it (``groups[2].name``)."""

    def __init__(
        self, collection: str, index: int, subfield: str, problem: str, hint: str | None = None
    ) -> None:
        self.collection = collection
        self.index = index
        self.subfield = subfield
        super().__init__(f"{collection}[{index}].{subfield}", problem, hint)


def sorted_by_priority(groups: Sequence[ScaleGroup]) -> list[ScaleGroup]:
    """Lower priority number first (0/unset = 100), ties broken by name so input order never matters."""
    return sorted(groups, key=lambda g: (g.effective_priority, g.name))


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"


# --- building entries from tasks -------------------------------------------------------------------


def _mismatch(first: UnscheduledTask, other: UnscheduledTask) -> tuple[str, object, object] | None:
    fields: list[tuple[str, object, object]] = [
        ("device_type", first.device_type.value, other.device_type.value),
        ("device_variant", first.device_variant, other.device_variant),
        ("preemptible", first.preemptible, other.preemptible),
        ("resources.cpu", first.resources.cpu, other.resources.cpu),
        ("resources.memory_bytes", first.resources.memory_bytes, other.resources.memory_bytes),
        ("resources.gpu_count", first.resources.gpu_count, other.resources.gpu_count),
        ("resources.tpu_count", first.resources.tpu_count, other.resources.tpu_count),
        ("constraints", _constraints_text(first.constraints), _constraints_text(other.constraints)),
    ]
    return next(((name, a, b) for name, a, b in fields if a != b), None)


def _constraints_text(constraints: tuple[Constraint, ...]) -> str:
    return ", ".join(c.describe() for c in constraints) or "none"


def _number_or_text(value: object) -> float | int | str | None:
    if value is None or isinstance(value, int | float | str):
        return value
    return str(value)


def build_demand_entries(tasks: Sequence[UnscheduledTask]) -> list[DemandEntry]:
    """Group coscheduled tasks into one entry each (first-appearance order); other tasks stay single.

    Tasks of one coscheduled group must agree on device, preemptibility, resources and constraints; when
    they do not, the entry carries ``invalid_reason`` (``coschedule_mismatch``, naming the field and both
    values) and routing reports it unmet without trying any group: fail fast, as the seed asks.
    """
    seen: set[str] = set()
    buckets: dict[tuple[str, str], list[UnscheduledTask]] = {}
    for i, task in enumerate(tasks):
        if task.task_id in seen:
            raise RoutingInputError("tasks", i, "task_id", f"task id {task.task_id!r} appears twice")
        seen.add(task.task_id)
        key = (
            ("task", task.task_id) if task.coschedule_group_id is None else ("gang", task.coschedule_group_id)
        )
        buckets.setdefault(key, []).append(task)

    entries: list[DemandEntry] = []
    for members in buckets.values():
        first = members[0]
        invalid: Reason | None = None
        for other in members[1:]:
            diff = _mismatch(first, other)
            if diff is not None:
                name, a, b = diff
                invalid = Reason(
                    UnmetCode.COSCHEDULE_MISMATCH.value,
                    f"coscheduled group {first.coschedule_group_id}: task {other.task_id} has {name}={b} but "
                    f"task {first.task_id} has {name}={a}; every task of a coscheduled group must ask for "
                    "the same device, preemptibility, resources and constraints",
                    name,
                    _number_or_text(a),
                    _number_or_text(b),
                )
                break
        entries.append(
            DemandEntry(
                task_ids=tuple(t.task_id for t in members),
                coschedule_group_id=first.coschedule_group_id,
                device_type=first.device_type,
                device_variant=first.device_variant,
                preemptible=first.preemptible,
                resources=first.resources,
                constraints=first.constraints,
                invalid_reason=invalid,
            )
        )
    return entries


# --- routing -------------------------------------------------------------------------------------------


class _Plan:
    """One group's working state during a round (mutable, private)."""

    def __init__(self, group: ScaleGroup, now: datetime, memo: bool = False) -> None:
        self.group = group
        self.availability = group.availability_at(now)
        available = self.availability is Availability.AVAILABLE
        counts = group.slice_state_counts
        self.min_deficit = group.min_slices_deficit if available else 0
        limit = counts.in_flight + (group.headroom if available else 0)
        self.packing = SlicePacking(
            to_vec(group.resources), group.slice_size, counts.in_flight, self.min_deficit, limit
        )
        self.entry_indices: list[int] = []
        self.failed_repack: tuple[int, Vec, bool] | None = None
        self.pending_reason: str | None = None
        # With ``memo``: what ``try_commit`` refused and what ``slices_needed`` answered, per unit shape (its
        # per-task need, task count, coscheduling), valid while the plan is unchanged (``version``). Packing
        # reads nothing else of a unit, so an unchanged plan refuses the same shape again and needs the
        # same slices for it: a queue of many jobs of few shapes is routed without packing each again.
        self.memo = memo
        self.version = 0
        self.refused: dict[tuple[object, ...], int] = {}
        self.needed: dict[tuple[object, ...], tuple[int, int]] = {}
        if counts.in_flight:
            self.pending_reason = "in-flight"
        elif self.min_deficit:
            self.pending_reason = "min_slices"

    @property
    def pending(self) -> bool:
        return self.pending_reason is not None

    def try_commit(self, unit: PackUnit, allow_open: bool) -> tuple[int, bool] | None:
        """Add ``unit`` if it fits: first fit, or (when new slices are allowed and first fit passes
        ``max_slices``) a first-fit-decreasing repack of everything. Returns (slices added, whether every
        task landed on an in-flight slice), or None, leaving the plan unchanged."""
        key = (unit.need, len(unit.tasks), unit.coscheduled, allow_open)
        if self.memo and self.refused.get(key) == self.version:
            return None
        result = self._try_commit(unit, allow_open)
        if result is None:
            self.refused[key] = self.version
        return result

    def _try_commit(self, unit: PackUnit, allow_open: bool) -> tuple[int, bool] | None:
        before = self.packing.launches
        placement = self.packing.place(unit, allow_open)
        if placement is not None:
            self.packing.apply(placement)
            self.version += 1
            in_flight = all(si < self.packing.in_flight for si, _ in placement.positions)
            return self.packing.launches - before, in_flight
        if not allow_open or not self._worth_repacking(unit):
            return None
        p = self.packing
        repacked = pack_decreasing(
            [*p.units, unit], p.vm, p.slice_size, p.in_flight, self.min_deficit, p.limit
        )
        self.version += 1
        if repacked is None:
            self.failed_repack = (len(p.units), unit.need, unit.coscheduled)
            return None
        self.packing = repacked
        return repacked.launches - before, False

    def _worth_repacking(self, unit: PackUnit) -> bool:
        if not self.packing.could_hold(unit):
            return False
        if self.failed_repack is None:
            return True
        count, need, gang = self.failed_repack
        # The same state already failed to take a unit no bigger than this one: do not try again.
        return not (count == len(self.packing.units) and gang == unit.coscheduled and fits(need, unit.need))

    def slices_needed(self, unit: PackUnit) -> int:
        """Extra slices ``unit`` would need if ``max_slices`` were no limit (first fit)."""
        key = (unit.need, len(unit.tasks), unit.coscheduled)
        if self.memo:
            found = self.needed.get(key)
            if found is not None and found[0] == self.version:
                return found[1]
        needed = self._slices_needed(unit)
        self.needed[key] = (self.version, needed)
        return needed

    def _slices_needed(self, unit: PackUnit) -> int:
        placement = self.packing.place(
            unit, allow_open=True, limit=len(self.packing.slices) + unit_size(unit)
        )
        return 1 if placement is None else max(1, placement.opened)


def unit_size(unit: PackUnit) -> int:
    return len(unit.tasks)


@dataclass(frozen=True, slots=True)
class _Routed:
    group: str
    reason: Reason


def _validate(groups: Sequence[ScaleGroup], entries: Sequence[DemandEntry], now: datetime) -> None:
    if now.tzinfo is None:
        raise InvalidSpecError("now", "must carry a timezone (UTC-aware datetime)")
    names: dict[str, int] = {}
    for i, g in enumerate(groups):
        if g.name in names:
            raise RoutingInputError(
                "groups", i, "name", f"duplicate group name {g.name!r} (also used at index {names[g.name]})"
            )
        names[g.name] = i
    tasks: dict[str, int] = {}
    gangs: dict[str, int] = {}
    for i, e in enumerate(entries):
        for task_id in e.task_ids:
            if task_id in tasks:
                raise RoutingInputError(
                    "demand_entries",
                    i,
                    "task_ids",
                    f"task id {task_id!r} is also in the entry at index {tasks[task_id]}",
                )
            tasks[task_id] = i
        gid = e.coschedule_group_id
        if gid is not None:
            if gid in gangs:
                raise RoutingInputError(
                    "demand_entries",
                    i,
                    "coschedule_group_id",
                    f"{gid!r} is also used by the entry at index {gangs[gid]}",
                    "list every task of a coscheduled group in one entry",
                )
            gangs[gid] = i


def route_demand(
    groups: Sequence[ScaleGroup],
    demand_entries: Sequence[DemandEntry],
    now: datetime,
    *,
    memo: bool = True,
) -> RoutingDecision:
    """Route every demand entry to a scale group or to the unmet list, and decide the slices to launch.

    ``now`` (UTC-aware) only decides availability: a group in backoff whose ``backoff_until`` has passed
    is available again. ``memo``: remember each group's structural verdict per demand shape (the fast
    path); ``False`` decides every entry from scratch, the reference the memo must match decision for
    decision (tests/engine/test_autoscaler_speed_equivalence.py). Raises ``RoutingInputError`` on
    duplicate group names, task ids or coschedule ids.
    """
    _validate(groups, demand_entries, now)
    ordered = sorted_by_priority(groups)
    plans = {g.name: _Plan(g, now, memo) for g in ordered}
    outcomes: dict[int, _Routed | Reason] = {}
    verdicts = _ShapeVerdicts(memo=memo)

    # With the memo: an entry shape left unmet while no plan changed since (the plans' versions only grow,
    # so their sum moves with any change) is left unmet again for the same reason: every step of its
    # routing reads only the plans and the entry's shape (and a gang's id, in the reason's text).
    unmet: dict[tuple[object, ...], tuple[int, Reason]] = {}
    for index, entry in enumerate(demand_entries):
        if entry.invalid_reason is not None:
            outcomes[index] = entry.invalid_reason
            continue
        key: tuple[object, ...] | None = None
        if memo:
            key = (_shape_key(entry), entry.coschedule_group_id)
            seen = unmet.get(key)
            if seen is not None and seen[0] == sum(p.version for p in plans.values()):
                outcomes[index] = seen[1]
                continue
        unit = PackUnit.of(index, entry)
        routed = _route_to_pending(plans, ordered, entry, unit, verdicts) or _route_by_priority(
            plans, ordered, entry, unit, verdicts
        )
        outcomes[index] = routed
        if key is not None and isinstance(routed, Reason):
            unmet[key] = (sum(p.version for p in plans.values()), routed)

    for plan in plans.values():
        _final_repack(plan)
    return _decision(ordered, plans, demand_entries, outcomes)


def _shape_key(entry: DemandEntry) -> tuple[object, ...]:
    """Everything ``shape_verdict`` reads of an entry: entries with equal keys get equal verdicts."""
    return (
        entry.device_type,
        entry.device_variant,
        entry.preemptible,
        entry.constraints,
        entry.is_coscheduled,
        entry.task_count,
        entry.resources,
    )


class _ShapeVerdicts:
    """``shape_verdict`` memoized for one ``route_demand`` call, per (group, entry shape): pending jobs
    come in few shapes, so the structural check runs once per shape and group instead of once per entry
    and group. Verdicts are frozen values, so sharing one between entries changes nothing."""

    def __init__(self, memo: bool) -> None:
        self._memo: dict[tuple[object, ...], dict[str, Verdict | None]] | None = {} if memo else None
        self._entry: DemandEntry | None = None
        self._row: dict[str, Verdict | None] = {}

    def __call__(self, group: ScaleGroup, entry: DemandEntry) -> Verdict | None:
        if self._memo is None:
            return shape_verdict(group, entry)
        if entry is not self._entry:  # one entry asks about every group in turn: key it once
            self._entry = entry
            self._row = self._memo.setdefault(_shape_key(entry), {})
        try:
            return self._row[group.name]
        except KeyError:
            found = self._row[group.name] = shape_verdict(group, entry)
            return found


def _route_to_pending(
    plans: dict[str, _Plan],
    ordered: list[ScaleGroup],
    entry: DemandEntry,
    unit: PackUnit,
    verdicts: _ShapeVerdicts,
) -> _Routed | None:
    """Step 1: a pending group whose planned slices hold the entry without any extra slice."""
    for group in ordered:
        plan = plans[group.name]
        if not plan.pending or verdicts(group, entry) is not None:
            continue
        result = plan.try_commit(unit, allow_open=False)
        if result is None:
            continue
        _, all_in_flight = result
        plan.entry_indices.append(unit.entry_index)
        where = f"{group.name} (priority {group.effective_priority})"
        if all_in_flight:
            message = (
                f"{where}: capacity already on the way, an in-flight slice has room "
                f"({plan.packing.in_flight} requesting/booting/initializing); no new slice for it"
            )
            code = RoutedCode.IN_FLIGHT_CAPACITY
        else:
            message = f"{where}: room left in a slice already planned this round; no extra slice for it"
            code = RoutedCode.PLANNED_CAPACITY
        return _Routed(
            group.name,
            Reason(code.value, message, "slices", 0, plan.packing.free_slices, group.max_slices),
        )
    return None


def _route_by_priority(
    plans: dict[str, _Plan],
    ordered: list[ScaleGroup],
    entry: DemandEntry,
    unit: PackUnit,
    shapes: _ShapeVerdicts,
) -> _Routed | Reason:
    """Step 2: the first group by priority that matches and has room; else the unmet reason."""
    verdicts: list[Verdict] = []
    for group in ordered:
        plan = plans[group.name]
        verdict = shapes(group, entry)
        if verdict is None:
            free_before = plan.packing.free_slices
            result = plan.try_commit(unit, allow_open=True)
            if result is not None:
                return _routed_by_priority(plan, result[0], free_before, unit, verdicts)
            verdict = capacity_verdict(
                group,
                plan.availability,
                plan.packing.launches,
                plan.slices_needed(unit),
                plan.packing.free_slices,
            )
        verdicts.append(verdict)
    return unmet_reason(entry, verdicts)


def _routed_by_priority(
    plan: _Plan, added: int, free_before: int, unit: PackUnit, passed: list[Verdict]
) -> _Routed:
    group = plan.group
    plan.entry_indices.append(unit.entry_index)
    if plan.pending_reason is None:
        plan.pending_reason = "demand-routed"
    skipped = [v for v in passed if v.stage >= Stage.COSCHEDULE]
    over = f"; passed over {'; '.join(v.detail for v in skipped)}" if skipped else ""
    if added > 0:
        message = (
            f"{group.name}: priority {group.effective_priority}, first matching group with headroom "
            f"({free_before} of {group.max_slices} slices free); needs {_plural(added, 'new slice')}{over}"
        )
        code = RoutedCode.NEW_SLICE
    else:
        message = f"{group.name}: priority {group.effective_priority}, fits slices already planned; no extra slice{over}"
        code = RoutedCode.PLANNED_CAPACITY
    return _Routed(
        group.name, Reason(code.value, message, "slices", max(0, added), free_before, group.max_slices)
    )


def _final_repack(plan: _Plan) -> None:
    """Repack the group's entries first-fit-decreasing; keep it when it launches fewer slices."""
    p = plan.packing
    if not p.units:
        return
    better = pack_decreasing(p.units, p.vm, p.slice_size, p.in_flight, plan.min_deficit, p.limit)
    if better is not None and better.launches < p.launches:
        plan.packing = better


def _launch_reason(plan: _Plan, entries: Sequence[DemandEntry]) -> Reason | None:
    group, p = plan.group, plan.packing
    launches = p.launches
    if launches <= 0:
        return None
    counts = group.slice_state_counts
    routed = [entries[i] for i in plan.entry_indices]
    tasks = sum(e.task_count for e in routed)
    new_with_demand = sum(1 for s in p.slices[p.in_flight :] if not s.is_empty())
    numbers = ("slices", launches, group.headroom, group.max_slices)
    if new_with_demand >= launches and routed:
        in_flight = f"; {_plural(p.in_flight, 'in-flight slice')} take the rest" if p.in_flight else ""
        minimum = f"; this also meets min_slices {group.min_slices}" if plan.min_deficit else ""
        message = (
            f"launch {_plural(launches, 'slice')} of {group.name} (slice_size {group.slice_size}) for "
            f"{_plural(len(routed), 'routed entry')} ({_plural(tasks, 'task')}), packed by resources"
            f"{in_flight}{minimum}"
        )
        return Reason(LaunchCode.DEMAND.value, message, *numbers)
    riders = f"; {_plural(len(routed), 'routed entry')} use them" if routed else ""
    message = (
        f"launch {_plural(launches, 'slice')} of {group.name} to reach min_slices {group.min_slices} "
        f"({counts.live} live){riders}"
    )
    return Reason(LaunchCode.MIN_SLICES.value, message, *numbers)


def _notes(plan: _Plan) -> list[str]:
    group = plan.group
    counts = group.slice_state_counts
    wanted = max(0, group.min_slices - counts.live)
    if wanted == 0 or plan.min_deficit >= wanted:
        return []
    if plan.availability is not Availability.AVAILABLE:
        return [
            f"{group.name} is below min_slices ({counts.live} of {group.min_slices} live) but is "
            f"{plan.availability.value}; no slice launched for min_slices"
        ]
    return [
        f"{group.name} is below min_slices ({counts.live} of {group.min_slices} live) but max_slices "
        f"{group.max_slices} leaves room for {plan.min_deficit} more ({counts.failed} failed slices still count)"
    ]


def _decision(
    ordered: list[ScaleGroup],
    plans: dict[str, _Plan],
    entries: Sequence[DemandEntry],
    outcomes: dict[int, _Routed | Reason],
) -> RoutingDecision:
    group_to_launch: dict[str, int] = {}
    routed_entries: dict[str, tuple[DemandEntry, ...]] = {}
    pending: list[PendingGroup] = []
    notes: list[str] = []
    for group in ordered:
        plan = plans[group.name]
        notes += _notes(plan)
        if not plan.pending:
            continue
        launches = plan.packing.launches
        if launches > 0:
            group_to_launch[group.name] = launches
        assigned = tuple(entries[i] for i in sorted(plan.entry_indices))
        if assigned:
            routed_entries[group.name] = assigned
        pending.append(
            PendingGroup(
                name=group.name,
                reason=plan.pending_reason or "demand-routed",
                in_flight_slices=plan.packing.in_flight,
                slices_to_launch=launches,
                remaining_slices=plan.packing.free_slices,
                free_resources=plan.packing.free_resources(),
                assigned_entries=assigned,
                slices=plan.packing.planned_slices(),
                launch_reason=_launch_reason(plan, entries),
            )
        )

    decisions: list[EntryDecision] = []
    unmet: list[UnmetDemand] = []
    for index, entry in enumerate(entries):
        outcome = outcomes[index]
        if isinstance(outcome, _Routed):
            total = group_to_launch.get(outcome.group, 0)
            tail = (
                f"{outcome.group} launches {_plural(total, 'slice')} in total"
                if total
                else f"{outcome.group} launches nothing"
            )
            explanation = f"{entry.describe()} -> {outcome.reason.message}; {tail}"
            decisions.append(
                EntryDecision(
                    entry_index=index,
                    entry=entry,
                    group=outcome.group,
                    reason=outcome.reason,
                    explanation=explanation,
                )
            )
        else:
            unmet.append(UnmetDemand(entry, outcome))
            explanation = f"{entry.describe()} -> not routed ({outcome.code}): {outcome.message}"
            decisions.append(
                EntryDecision(
                    entry_index=index, entry=entry, group=None, reason=outcome, explanation=explanation
                )
            )
    return RoutingDecision(
        group_to_launch=group_to_launch,
        routed_entries=routed_entries,
        unmet_entries=tuple(unmet),
        entry_decisions=tuple(decisions),
        pending_groups=tuple(pending),
        notes=tuple(notes),
    )
