"""Nodes that fail: a boot that fails, a spot node preempted under running jobs. The jobs go back to
PENDING, capacity is bought again, every job finishes exactly once, and the audit holds."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from scalar.providers.builtin import schema as market_schema
from scalar.providers.builtin.clock import to_us
from scalar.providers.sim import BuiltinMarket
from scalar.runtime import ControlPlane
from tests.runtime.helpers import PROVIDERS, Clock, audit, drive, job, settings_for


@pytest.fixture
def world(db_url: str, tmp_path: Path) -> Iterator[tuple[Clock, ControlPlane, BuiltinMarket, str]]:
    clock = Clock()
    settings = settings_for(db_url, tmp_path, retry_backoff_s=2.0)
    market = BuiltinMarket(db_url, settings.market_config(), providers=PROVIDERS)
    plane = ControlPlane(settings, clock=clock, providers=market.providers())
    yield clock, plane, market, db_url
    plane.stop()
    market.close()


def run_until(
    plane: ControlPlane, clock: Clock, ids: list[str], states: set[str], limit_s: int = 900
) -> None:
    for _ in range(limit_s // 5):
        if all(getattr(plane.get_job(i), "state", None) in states for i in ids):
            return
        drive([plane], clock, 5, step_s=2.5)
    raise AssertionError({i: plane.get_job(i) for i in ids})


def test_failed_boots_are_bought_again_and_the_jobs_finish(world: Any) -> None:
    clock, plane, market, db_url = world
    market.fail_next_boot(3)
    ids = [plane.submit_job(job(gpus=g, duration=30)).id for g in (1, 8)]
    run_until(plane, clock, ids, {"SUCCEEDED"})
    result = audit(db_url, plane.settings.controller)
    assert result.states() == {"SUCCEEDED": 2}
    failed = [n for n in result.controller.state.nodes.values() if n.state.value == "failed"]
    assert failed, "no boot failed: the fault was not injected"
    assert all(n == 1 for n in result.market_orders.values())


@pytest.mark.slow  # a whole run through a preemption
def test_a_node_preempted_under_running_jobs_requeues_them_and_they_finish_once(world: Any) -> None:
    clock, plane, market, db_url = world
    ids = [plane.submit_job(job(gpus=1, duration=120)).id for _ in range(2)]
    run_until(plane, clock, ids, {"RUNNING"})
    nodes = {p.node_id for i in ids for p in getattr(plane.get_job(i), "placements", [])}
    at_us = to_us(clock() + timedelta(seconds=2))
    with market.engine.begin() as conn:  # the seller takes the nodes back, as a spot interruption does
        conn.execute(
            update(market_schema.nodes)
            .where(market_schema.nodes.c.node_id.in_(nodes))
            .values(preempt_us=at_us, next_us=at_us)
        )
    drive([plane], clock, 10)
    for i in ids:
        j = plane.get_job(i)
        assert j is not None and j.preemptions >= 1, j
    run_until(plane, clock, ids, {"SUCCEEDED"}, limit_s=1800)
    result = audit(db_url, plane.settings.controller)
    assert result.states() == {"SUCCEEDED": 2}
    for i in ids:
        rec = result.controller.state.jobs[i]
        assert rec.preemptions >= 1 and not (set(rec.placements) & nodes)
