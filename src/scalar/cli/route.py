"""``scalar route``: which scale groups would the autoscaler grow for this demand, and why (seed 003)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import typer

from scalar.cli.errors import user_errors
from scalar.cli.inputs import InputError, parse_json_file
from scalar.cli.output import Col, cell, explain, make_table, print_json, say, show, wide_option
from scalar.domain.errors import InvalidSpecError
from scalar.domain.reasons import Reason
from scalar.domain.routing import RoutingInputError, route_demand
from scalar.domain.routing_model import DemandEntry, RoutingDecision, ScaleGroup
from scalar.wire.routing import DemandFile, GroupsFile, decision_to_json


def _parse_now(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(
            "--now", None, f"{value!r} is not an ISO 8601 time (e.g. 2026-01-01T12:00:00Z)"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _problem(exc: InvalidSpecError) -> str:
    return exc.problem if exc.hint is None else f"{exc.problem}. To fix: {exc.hint}"


def _load(groups_path: Path, demand_path: Path) -> tuple[list[ScaleGroup], list[DemandEntry]]:
    groups_file = parse_json_file(groups_path, GroupsFile)
    demand_file = parse_json_file(demand_path, DemandFile)
    try:
        groups = groups_file.to_domain()
    except InvalidSpecError as exc:
        raise InputError(str(groups_path), exc.field, _problem(exc)) from None
    try:
        entries = demand_file.to_domain()
    except InvalidSpecError as exc:
        raise InputError(str(demand_path), exc.field, _problem(exc)) from None
    return groups, entries


def _tasks(entry: DemandEntry) -> str:
    ids = entry.task_ids
    return ",".join(ids) if len(ids) <= 3 else f"{ids[0]}..{ids[-1]} ({len(ids)})"


def _numbers(reason: Reason) -> str:
    if reason.resource is None:
        return "-"
    parts = [f"need {cell(reason.need)}", f"have {cell(reason.have)}"]
    if reason.limit is not None:
        parts.append(f"limit {cell(reason.limit)}")
    return f"{reason.resource}: " + ", ".join(parts)


LAUNCH_COLUMNS = [
    Col("group", "id"),
    Col("priority", "num"),
    Col("launch", "num"),
    Col("in_flight", "num", wide=True),
    Col("ready", "num", wide=True),
    Col("failed", "num", wide=True),
    Col("max", "num"),
    Col("reason", "text"),
]
ROUTED_COLUMNS = [
    Col("tasks", "key"),
    Col("group", "id"),
    Col("per_task", "text"),
    Col("why", "text", ratio=2),
]
UNMET_COLUMNS = [
    Col("tasks", "key"),
    Col("code", "key"),
    Col("numbers", "text"),
    Col("message", "text", ratio=2),
]


def _print_tables(decision: RoutingDecision, groups: list[ScaleGroup], wide: bool) -> None:
    by_name = {g.name: g for g in groups}
    launch_rows = []
    for pg in decision.pending_groups:
        g = by_name[pg.name]
        counts = g.slice_state_counts
        why = pg.launch_reason.message if pg.launch_reason else f"{pg.reason}: nothing to launch"
        launch_rows.append(
            [
                pg.name,
                g.effective_priority,
                pg.slices_to_launch,
                counts.in_flight,
                counts.ready,
                counts.failed,
                g.max_slices,
                why,
            ]
        )
    if launch_rows:
        show(make_table(LAUNCH_COLUMNS, launch_rows, title="Groups to launch", wide=wide))
    else:
        say("Groups to launch: none")

    routed_rows = [
        [_tasks(d.entry), d.group, d.entry.resources.describe(), d.reason.message]
        for d in decision.entry_decisions
        if d.routed
    ]
    if routed_rows:
        show(make_table(ROUTED_COLUMNS, routed_rows, title="Routed entries", wide=wide))
    else:
        say("Routed entries: none")

    unmet_rows = [
        [_tasks(u.entry), u.reason.code, _numbers(u.reason), u.reason.message] for u in decision.unmet_entries
    ]
    if unmet_rows:
        show(make_table(UNMET_COLUMNS, unmet_rows, title="Unmet entries", wide=wide))
    else:
        say("Unmet entries: none")
    for note in decision.notes:
        explain(f"note: {note}")


def register(app: typer.Typer) -> None:
    @app.command("route")
    @user_errors
    def route(
        groups: Path = typer.Option(
            ..., "--groups", help="GROUPS.json: the scale groups (docs/formats/route.md)."
        ),
        demand: Path = typer.Option(..., "--demand", help="DEMAND.json: the demand entries to route."),
        as_json: bool = typer.Option(False, "--json", help="Print the decision as JSON instead of tables."),
        now: str | None = typer.Option(
            None, "--now", help="ISO 8601 time used for backoff_until (default: the current time)."
        ),
        wide: bool = wide_option(),
    ) -> None:
        """Route demand to scale groups: slices to launch, where each entry goes, what stays unmet and why."""
        at = _parse_now(now)
        scale_groups, entries = _load(groups, demand)
        try:
            decision = route_demand(scale_groups, entries, at)
        except RoutingInputError as exc:
            source = groups if exc.collection == "groups" else demand
            raise InputError(str(source), f"[{exc.index}].{exc.subfield}", _problem(exc)) from None
        if as_json:
            print_json(decision_to_json(decision))
        else:
            _print_tables(decision, scale_groups, wide)
