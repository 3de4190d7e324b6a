"""Lifecycles as transition tables: jobs, slices/nodes, purchase orders.

A move not in its table raises :class:`IllegalTransitionError`; the controller records every legal move
with its time and cause (the story). Creation is a move from ``None``.

Jobs::

    None -> PENDING | REJECTED
    PENDING -> SCHEDULED | CANCELLED
    SCHEDULED -> RUNNING | PREEMPTED | SUCCEEDED | FAILED | CANCELLED
    RUNNING -> SUCCEEDED | FAILED | CANCELLED | PREEMPTED
    PREEMPTED -> PENDING            (never silently lost: a preempted job always queues again)

(SCHEDULED -> SUCCEEDED/FAILED: a node may report a finished job whose start it never confirmed.)

Slices and nodes (seed 003; a state may be skipped forwards, never gone back to)::

    None -> REQUESTING | BOOTING
    REQUESTING -> BOOTING | INITIALIZING | READY | FAILED | TERMINATED
    BOOTING -> INITIALIZING | READY | FAILED | TERMINATED
    INITIALIZING -> READY | FAILED | TERMINATED
    READY -> SUSPECT | LOST | FAILED | TERMINATED
    SUSPECT -> READY | LOST | FAILED | TERMINATED     (an agent-backed node's heartbeat lease)
    LOST -> READY | FAILED | TERMINATED               (a lost node whose agent calls again rejoins)

Orders (our side of a purchase)::

    None -> PLACED
    PLACED -> ACKNOWLEDGED | FILLED | REJECTED | CANCELLED | EXPIRED
    ACKNOWLEDGED -> FILLED | REJECTED | CANCELLED | EXPIRED
    EXPIRED -> FILLED | REJECTED | CANCELLED
    REJECTED | CANCELLED -> FILLED             (a fill always wins: capacity that exists is ours and
                                                costs money, so a late or contradictory fill is adopted)
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

from scalar.domain.errors import DomainError
from scalar.domain.market import NodeState


class JobState(StrEnum):
    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    PREEMPTED = "PREEMPTED"
    REJECTED = "REJECTED"


SliceState = NodeState


class OrderStatus(StrEnum):
    PLACED = "placed"
    ACKNOWLEDGED = "acknowledged"
    FILLED = "filled"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


J = JobState
N = NodeState
O = OrderStatus  # noqa: E741

JOB_TRANSITIONS: Mapping[JobState | None, frozenset[JobState]] = {
    None: frozenset({J.PENDING, J.REJECTED}),
    J.PENDING: frozenset({J.SCHEDULED, J.CANCELLED}),
    J.SCHEDULED: frozenset({J.RUNNING, J.PREEMPTED, J.SUCCEEDED, J.FAILED, J.CANCELLED}),
    J.RUNNING: frozenset({J.SUCCEEDED, J.FAILED, J.CANCELLED, J.PREEMPTED}),
    J.PREEMPTED: frozenset({J.PENDING}),
    J.SUCCEEDED: frozenset(),
    J.FAILED: frozenset(),
    J.CANCELLED: frozenset(),
    J.REJECTED: frozenset(),
}

SLICE_TRANSITIONS: Mapping[NodeState | None, frozenset[NodeState]] = {
    None: frozenset({N.REQUESTING, N.BOOTING}),
    N.REQUESTING: frozenset({N.BOOTING, N.INITIALIZING, N.READY, N.FAILED, N.TERMINATED}),
    N.BOOTING: frozenset({N.INITIALIZING, N.READY, N.FAILED, N.TERMINATED}),
    N.INITIALIZING: frozenset({N.READY, N.FAILED, N.TERMINATED}),
    N.READY: frozenset({N.SUSPECT, N.LOST, N.FAILED, N.TERMINATED}),
    N.SUSPECT: frozenset({N.READY, N.LOST, N.FAILED, N.TERMINATED}),
    N.LOST: frozenset({N.READY, N.FAILED, N.TERMINATED}),
    N.FAILED: frozenset(),
    N.TERMINATED: frozenset(),
}

ORDER_TRANSITIONS: Mapping[OrderStatus | None, frozenset[OrderStatus]] = {
    None: frozenset({O.PLACED}),
    O.PLACED: frozenset({O.ACKNOWLEDGED, O.FILLED, O.REJECTED, O.CANCELLED, O.EXPIRED}),
    O.ACKNOWLEDGED: frozenset({O.FILLED, O.REJECTED, O.CANCELLED, O.EXPIRED}),
    O.EXPIRED: frozenset({O.FILLED, O.REJECTED, O.CANCELLED}),
    O.FILLED: frozenset(),
    O.REJECTED: frozenset({O.FILLED}),
    O.CANCELLED: frozenset({O.FILLED}),
}

TERMINAL_JOB_STATES = frozenset(s for s, nxt in JOB_TRANSITIONS.items() if s is not None and not nxt)
LIVE_NODE_STATES = frozenset({N.REQUESTING, N.BOOTING, N.INITIALIZING, N.READY, N.SUSPECT, N.LOST})
IN_FLIGHT_STATES = frozenset({N.REQUESTING, N.BOOTING, N.INITIALIZING})
OPEN_ORDER_STATES = frozenset({O.PLACED, O.ACKNOWLEDGED})
# Slice/node lifecycle order, for "the least advanced node decides the slice's state".
NODE_STAGE = {N.REQUESTING: 0, N.BOOTING: 1, N.INITIALIZING: 2, N.READY: 3, N.SUSPECT: 4, N.LOST: 5}


class IllegalTransitionError(DomainError):
    """A lifecycle move that its transition table does not allow."""

    def __init__(self, kind: str, key: str, current: str | None, target: str) -> None:
        self.kind = kind
        self.key = key
        self.current = current
        self.target = target
        table = _TABLES[kind]
        allowed = sorted(str(s) for s in table.get(_lookup(table, current), frozenset()))
        where = "(new)" if current is None else current
        detail = f"allowed: {', '.join(allowed)}" if allowed else f"{where} is final"
        super().__init__(
            f"{kind} {key} cannot move from {where} to {target} ({detail}).",
            "this is a controller bug or a stale report; the move was refused",
        )


_TABLES: dict[str, Mapping[Any, frozenset[Any]]] = {
    "job": JOB_TRANSITIONS,
    "slice": SLICE_TRANSITIONS,
    "node": SLICE_TRANSITIONS,
    "order": ORDER_TRANSITIONS,
}

S = TypeVar("S", bound=StrEnum)


def _lookup(table: Mapping[Any, frozenset[Any]], current: str | None) -> Any:
    if current is None:
        return None
    for state in table:
        if state is not None and state == current:
            return state
    return current


def is_legal(kind: str, current: StrEnum | None, target: StrEnum) -> bool:
    table = _TABLES[kind]
    return target in table.get(current, frozenset())


def check_move(kind: str, key: str, current: S | None, target: S) -> S:
    """Return ``target`` if ``current -> target`` is in ``kind``'s table, else raise."""
    if not is_legal(kind, current, target):
        raise IllegalTransitionError(kind, key, None if current is None else current.value, target.value)
    return target
