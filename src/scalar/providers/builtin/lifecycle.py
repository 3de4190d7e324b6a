"""Bringing the market up to a time: node moves, finished and killed jobs, written as numbered events.

Called inside the market's write lock. The market is lazy: nothing happens between calls; when a call
arrives at ``now`` the market works out every move that happened up to ``now`` (from the plans drawn when
each node was granted) and appends them to ``market_events`` in time order, each exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update

from scalar.domain.market import CAUSE_PREEMPTED, NodeEvent, NodeState
from scalar.providers.builtin import schema
from scalar.providers.builtin.clock import describe_duration, from_us
from scalar.providers.builtin.config import HOURS_PER_MONTH
from scalar.providers.builtin.timeline import (
    CAUSE_BOOT_FAILED,
    CAUSE_CONTRACT_ENDED,
    CAUSE_RELEASED,
    Move,
    NodePlan,
    due_moves,
    next_move_us,
)

JOB_SUCCEEDED = "succeeded"
JOB_KILLED = "killed"
JOB_STOPPED = "stopped"


@dataclass(slots=True)
class PendingEvent:
    at_us: int
    provider: str
    node_id: str
    block_id: str
    rank: int  # at the same time on the same node: jobs end (0) before the node moves (1)
    state: NodeState | None = None
    job_id: str | None = None
    job_succeeded: bool | None = None
    reason: str | None = None
    details: dict[str, str] = field(default_factory=dict)

    def sort_key(self) -> tuple[int, str, int, str]:
        return (self.at_us, self.node_id, self.rank, self.job_id or "")


# Statements run on every call into the market, built once (bound values are passed at execution).
_EVENT_SEQ = select(schema.meta.c.event_seq).where(schema.meta.c.id == 1)
_SET_EVENT_SEQ = update(schema.meta).where(schema.meta.c.id == 1).values(event_seq=bindparam("b_seq"))


def write_events(conn: Connection, pending: Iterable[PendingEvent], *, sort: bool = True) -> None:
    """Number and append events (sorted by time unless ``sort`` is False)."""
    items = sorted(pending, key=PendingEvent.sort_key) if sort else list(pending)
    if not items:
        return
    last = int(conn.execute(_EVENT_SEQ).scalar_one())
    rows = []
    for offset, item in enumerate(items, start=1):
        rows.append(
            {
                "seq": last + offset,
                "provider": item.provider,
                "node_id": item.node_id,
                "block_id": item.block_id,
                "at_us": item.at_us,
                "state": None if item.state is None else item.state.value,
                "job_id": item.job_id,
                "job_succeeded": item.job_succeeded,
                "reason": item.reason,
                "details": json.dumps(item.details, sort_keys=True),
            }
        )
    conn.execute(insert(schema.events), rows)
    conn.execute(_SET_EVENT_SEQ, {"b_seq": last + len(items)})


def event_from_row(row: Any) -> NodeEvent:
    return NodeEvent(
        node_id=row.node_id,
        block_id=row.block_id,
        at=from_us(int(row.at_us)),
        state=None if row.state is None else NodeState(row.state),
        job_id=row.job_id,
        job_succeeded=row.job_succeeded,
        reason=row.reason,
        details=dict(json.loads(row.details)),
    )


def plan_from_row(row: Any) -> NodePlan:
    return NodePlan(
        booting_us=int(row.booting_us),
        initializing_us=int(row.initializing_us),
        ready_us=int(row.ready_us),
        fail_cause=row.fail_cause,
        preempt_us=None if row.preempt_us is None else int(row.preempt_us),
        end_us=int(row.end_us),
    )


def _period_text(hours: float) -> str:
    if hours == HOURS_PER_MONTH:
        return "month"
    return "hour" if hours == 1 else f"{hours:g} hours"


def _move_reason(move: Move, row: Any, plan: NodePlan, period_hours: float = HOURS_PER_MONTH) -> str:
    start = int(row.start_us)
    if move.state is NodeState.BOOTING:
        return f"allocated after {describe_duration(move.at_us - start)}; booting"
    if move.state is NodeState.INITIALIZING:
        return "booted; installing drivers and the image"
    if move.state is NodeState.READY:
        return f"ready {describe_duration(move.at_us - start)} after the contract started"
    if move.cause == CAUSE_BOOT_FAILED:
        return f"boot failed: the node did not pass its health check ({plan.fail_cause})"
    if move.cause == CAUSE_PREEMPTED:
        rate = row.interruption_rate
        rate_text = (
            "" if rate is None else f" at an interruption rate of {rate:.1%} per {_period_text(period_hours)}"
        )
        return f"spot capacity preempted after {describe_duration(move.at_us - start)}{rate_text}"
    return f"contract ended at {from_us(int(row.end_us)).isoformat()}"


def job_end_event(
    work_row: Any, node_row: Any, at_us: int, succeeded: bool, cause: str | None
) -> PendingEvent:
    ran = describe_duration(at_us - int(work_row.started_us))
    expected = describe_duration(int(work_row.finish_us) - int(work_row.started_us))
    if succeeded:
        reason = f"job {work_row.job_id} finished after {ran}"
        details = {"outcome": JOB_SUCCEEDED}
    else:
        why = {
            CAUSE_PREEMPTED: "the node was preempted",
            CAUSE_CONTRACT_ENDED: "the node's contract ended",
            CAUSE_RELEASED: "the node was released",
        }.get(cause or "", "the node stopped")
        reason = f"job {work_row.job_id} killed after {ran} of {expected}: {why}"
        details = {"outcome": JOB_KILLED, "cause": cause or "node_stopped"}
    return PendingEvent(
        at_us=at_us,
        provider=node_row.provider,
        node_id=node_row.node_id,
        block_id=node_row.block_id,
        rank=0,
        job_id=work_row.job_id,
        # A killed job did not fail on its own: ``None`` tells the controller it was preempted, so it is
        # requeued (the ``details`` say why), not marked FAILED.
        job_succeeded=True if succeeded else None,
        reason=reason,
        details=details,
    )


def _open_work(conn: Connection, node_ids: list[str]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {node_id: [] for node_id in node_ids}
    if not node_ids:
        return found
    rows = conn.execute(
        select(schema.work)
        .where(schema.work.c.node_id.in_(node_ids), schema.work.c.ended_us.is_(None))
        .order_by(schema.work.c.id)
    ).all()
    for row in rows:
        found[row.node_id].append(row)
    return found


_CLOSE_WORK = (
    update(schema.work)
    .where(schema.work.c.id == bindparam("b_id"))
    .values(ended_us=bindparam("b_at"), outcome=bindparam("b_outcome"))
)


def _close_work(conn: Connection, work_id: int, at_us: int, outcome: str) -> None:
    conn.execute(_CLOSE_WORK, {"b_id": work_id, "b_at": at_us, "b_outcome": outcome})


def end_jobs_on_stop(
    conn: Connection, node_row: Any, works: list[Any], stop_us: int, cause: str | None
) -> list[PendingEvent]:
    """Jobs that finish by ``stop_us`` succeed; the rest are killed at ``stop_us``."""
    out: list[PendingEvent] = []
    for work_row in works:
        finish = int(work_row.finish_us)
        if finish <= stop_us:
            out.append(job_end_event(work_row, node_row, finish, True, None))
            _close_work(conn, work_row.id, finish, JOB_SUCCEEDED)
        else:
            out.append(job_end_event(work_row, node_row, stop_us, False, cause))
            _close_work(conn, work_row.id, stop_us, JOB_KILLED)
    return out


NODE_COLUMNS = (
    schema.nodes,
    schema.blocks.c.start_us,
    schema.blocks.c.instance_type,
    schema.blocks.c.interruption_rate,
)


_DUE_NODES = (
    select(*NODE_COLUMNS)
    .join(schema.blocks, schema.blocks.c.block_id == schema.nodes.c.block_id)
    .where(schema.nodes.c.next_us.is_not(None), schema.nodes.c.next_us <= bindparam("b_until"))
    .order_by(schema.nodes.c.node_id)
)
_SET_NODE = (
    update(schema.nodes)
    .where(schema.nodes.c.node_id == bindparam("b_node_id"))
    .values(state=bindparam("b_state"), next_us=bindparam("b_next_us"))
)
_FINISHED_WORK = (
    select(schema.work, schema.nodes.c.provider, schema.nodes.c.block_id)
    .join(schema.nodes, schema.nodes.c.node_id == schema.work.c.node_id)
    .where(schema.work.c.ended_us.is_(None), schema.work.c.finish_us <= bindparam("b_until"))
    .order_by(schema.work.c.id)
)


def advance(conn: Connection, until_us: int, period_hours: float = HOURS_PER_MONTH) -> None:
    """Write every move and job end that happened up to ``until_us``.
    ``period_hours``: the hours the market's interruption rates refer to (its config), for the reasons."""
    due_nodes = conn.execute(_DUE_NODES, {"b_until": until_us}).all()
    pending: list[PendingEvent] = []
    stopped: dict[str, tuple[Any, int, str | None]] = {}
    for row in due_nodes:
        plan = plan_from_row(row)
        state = NodeState(row.state)
        moves = due_moves(state, plan, until_us)
        for move in moves:
            pending.append(
                PendingEvent(
                    at_us=move.at_us,
                    provider=row.provider,
                    node_id=row.node_id,
                    block_id=row.block_id,
                    rank=1,
                    state=move.state,
                    reason=_move_reason(move, row, plan, period_hours),
                    details={"cause": move.cause} if move.cause else {},
                )
            )
            state = move.state
            if move.state is NodeState.TERMINATED:
                stopped[row.node_id] = (row, move.at_us, move.cause)
        conn.execute(
            _SET_NODE,
            {"b_node_id": row.node_id, "b_state": state.value, "b_next_us": next_move_us(state, plan)},
        )
    works_by_node = _open_work(conn, sorted(stopped))
    for node_id, (row, stop_us, cause) in sorted(stopped.items()):
        pending.extend(end_jobs_on_stop(conn, row, works_by_node[node_id], stop_us, cause))
    finished = conn.execute(_FINISHED_WORK, {"b_until": until_us}).all()
    for work_row in finished:
        pending.append(job_end_event(work_row, work_row, int(work_row.finish_us), True, None))
        _close_work(conn, work_row.id, int(work_row.finish_us), JOB_SUCCEEDED)
    write_events(conn, pending)


def node_rows(conn: Connection, where: Any) -> list[Any]:
    return list(
        conn.execute(
            select(*NODE_COLUMNS)
            .join(schema.blocks, schema.blocks.c.block_id == schema.nodes.c.block_id)
            .where(where)
            .order_by(schema.nodes.c.idx)
        ).all()
    )


def terminate_nodes(
    conn: Connection, rows: list[Any], at_us: int, cause: str, reason: str, extra: Mapping[str, str]
) -> list[PendingEvent]:
    """Stop live nodes now (release): kill their jobs, then TERMINATED."""
    live = [row for row in rows if row.next_us is not None]
    works = _open_work(conn, [row.node_id for row in live])
    out: list[PendingEvent] = []
    for row in live:
        out.extend(end_jobs_on_stop(conn, row, works[row.node_id], at_us, cause))
        out.append(
            PendingEvent(
                at_us=at_us,
                provider=row.provider,
                node_id=row.node_id,
                block_id=row.block_id,
                rank=1,
                state=NodeState.TERMINATED,
                reason=reason,
                details={"cause": cause, **extra},
            )
        )
        conn.execute(
            update(schema.nodes)
            .where(schema.nodes.c.node_id == row.node_id)
            .values(state=NodeState.TERMINATED.value, next_us=None)
        )
    return out
