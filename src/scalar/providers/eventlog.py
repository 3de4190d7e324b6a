"""Turn polled node states into ``NodeEvent``s behind a cursor, for sellers that only answer "status now".

Real APIs (Prime Intellect's ``/pods/status``, SFCompute's orders) report a node's current state, not a
stream of moves. ``EventLog.observe`` records a move only when a node's state changes, and
``since(cursor)`` serves the moves after the cursor the caller holds. Cursors count moves; a cursor from
before a restart (larger than anything this process has recorded) continues from where the caller is,
so the caller never goes backwards and misses nothing.
"""

from __future__ import annotations

import threading
from datetime import datetime

from scalar.domain.market import NodeEvent, NodeState


class EventLog:
    def __init__(self) -> None:
        self._events: list[NodeEvent] = []
        self._offset = 0  # the cursor value of self._events[0]
        self._states: dict[str, NodeState] = {}
        self._lock = threading.Lock()

    def state(self, node_id: str) -> NodeState | None:
        with self._lock:
            return self._states.get(node_id)

    def observe(
        self,
        node_id: str,
        block_id: str,
        state: NodeState,
        at: datetime,
        reason: str,
        details: dict[str, str] | None = None,
    ) -> bool:
        """Record ``state`` for a node; returns True when it is a move (a new event)."""
        with self._lock:
            if self._states.get(node_id, NodeState.REQUESTING) == state:
                return False
            self._states[node_id] = state
            self._events.append(
                NodeEvent(
                    node_id=node_id,
                    block_id=block_id,
                    at=at,
                    state=state,
                    reason=reason,
                    details=dict(details or {}),
                )
            )
            return True

    def since(self, cursor: int) -> tuple[list[NodeEvent], int]:
        """Events after ``cursor`` and the new cursor."""
        with self._lock:
            end = self._offset + len(self._events)
            if cursor > end:
                # The caller's cursor comes from an earlier process, which numbered more moves than this
                # one has: renumber ours to follow the caller's cursor, so it sees every one of them.
                self._offset = cursor
                return list(self._events), cursor + len(self._events)
            start = max(cursor - self._offset, 0)
            return list(self._events[start:]), end
