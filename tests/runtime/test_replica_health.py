"""A replica's ``/healthz`` (``health()``) reports the last step any leader committed, read from the log."""

from __future__ import annotations

from pathlib import Path

from scalar.runtime import ControlPlane
from tests.runtime.helpers import Clock, drive, settings_for


def test_a_replica_reports_the_leaders_last_step(db_url: str, tmp_path: Path) -> None:
    clock = Clock()
    leader = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    replica = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    try:
        replica.open()
        assert replica.health().last_step_at is None  # no step yet in the log
        drive([leader], clock, 3)
        assert leader.is_leader and not replica.is_leader
        stepped = leader.health().last_step_at
        assert stepped == clock()
        assert replica.health().last_step_at == stepped
        drive([leader], clock, 2)
        assert replica.health().last_step_at == clock()
    finally:
        leader.stop()
        replica.stop()
