"""The PostgreSQL server restarted under a running control plane: it reconnects and carries on, and
nothing is lost (jobs accepted before, during and after all finish once; no purchase made twice)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from scalar.engine import ControllerConfig
from scalar.runtime import ControlPlane, load_settings
from scalar.store.errors import StoreError
from tests.faults.pgcluster import private_cluster
from tests.runtime.helpers import CONTROLLER, PROVIDERS, audit

pytestmark = pytest.mark.slow  # a PostgreSQL server restarted under load


def _submit(plane: ControlPlane, gpus: int) -> str:
    """Submit as a client would: a refused connection is retried; an accepted job is never lost."""
    for _ in range(200):
        try:
            return str(plane.submit_job({"tier": "FAST", "gpu_count": gpus, "expected_duration_sec": 3}).id)
        except (OperationalError, StoreError):
            time.sleep(0.1)
    raise AssertionError("the database never came back")


def test_a_database_restart_mid_run_loses_nothing(tmp_path: Path) -> None:
    with private_cluster() as pg:
        settings = load_settings(
            None,
            {
                "data_dir": tmp_path,
                "database_url": pg.url,
                "time_scale": 600.0,
                "tick_s": 0.2,
                "market_seed": 7,
                "enabled": PROVIDERS,
                "controller": ControllerConfig.from_dict(CONTROLLER),
                "lease_ttl_s": 10.0,
                "lease_renew_s": 2.0,
                "price_interval_s": 5.0,
                "retry_backoff_s": 0.2,
                "auth_required": False,
            },
            {},
        )
        plane = ControlPlane(settings)
        plane.start()
        try:
            ids = [_submit(plane, g) for g in (1, 2, 8)]
            time.sleep(2.0)  # purchases on their way
            pg.restart()  # every connection cut
            ids += [_submit(plane, g) for g in (1, 4)]
            time.sleep(1.0)
            pg.restart()
            ids += [_submit(plane, 2)]
            deadline = time.monotonic() + 120
            waiting = set(ids)
            while waiting and time.monotonic() < deadline:
                time.sleep(0.5)
                try:
                    waiting -= {j for j in waiting if getattr(plane.get_job(j), "state", None) == "SUCCEEDED"}
                except (OperationalError, StoreError):
                    continue
            assert not waiting, {j: plane.get_job(j) for j in waiting}
            assert plane.is_leader
        finally:
            plane.stop()
        result = audit(pg.url, plane.settings.controller)  # the config the controller steps with
        assert result.states() == {"SUCCEEDED": len(ids)}
        assert all(n == 1 for n in result.market_orders.values())
