"""Injected time for store tests: nothing in the store reads the clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from scalar.store import NewAction, NewEvent

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def event(stimulus_id: str, kind: str = "job_submitted", t: float = 0.0, **payload: Any) -> NewEvent:
    return NewEvent(stimulus_id=stimulus_id, kind=kind, payload=payload, at=at(t))


def action(action_id: str, kind: str = "buy", **payload: Any) -> NewAction:
    return NewAction(action_id=action_id, kind=kind, payload=payload)
