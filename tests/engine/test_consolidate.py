"""Consolidation in the controller: a restartable FLEX job leaves an hourly node for idle GPUs of a block
already paid for, as a StopWork + StartWork with the reason; the emptied node is released; a job without
``restartable`` stays where it is."""

from __future__ import annotations

from dataclasses import replace

from scalar.domain.consolidation import MOVE
from scalar.engine import Controller, ControllerConfig, ReleaseBlock
from scalar.engine.actions import StartWork, StopWork
from scalar.engine.lifecycle import JobState
from tests.engine.builders import (
    at,
    buys,
    filled,
    job_done,
    market,
    only,
    prime_offer,
    ready,
    sf_offer,
    spec,
    started,
    submit,
    tick,
)


def _scene(restartable: bool) -> tuple[Controller, list]:
    c = Controller(ControllerConfig(flex_batch_wait_s=0))
    x = replace(spec("x", 1, tier="FLEX", duration=10 * 3600), restartable=restartable)
    [buy_prime] = buys(c.step(at(0), [market(sf_offer("2.00"), prime_offer("4.00")), *submit(x)]))
    assert buy_prime.request.provider == "prime"
    c.step(at(10), [filled(buy_prime, at(10), block_id="blk-p")])
    c.step(at(20), [*ready("blk-p-n0", when=at(20), block_id="blk-p"), started("x", "blk-p-n0")])
    big = spec("big", 8, tier="FLEX", duration=600)
    [buy_sf] = buys(c.step(at(30), submit(big)))
    assert buy_sf.request.provider == "sfcompute"
    # the block is sold for a week (as when the book lists only week-long contracts): long enough for x,
    # where a contract sized to big alone (an hour) would end before x could finish on it
    week = replace(buy_sf, request=replace(buy_sf.request, duration_s=7 * 24 * 3600))
    c.step(at(40), [filled(week, at(40), block_id="blk-s")])
    c.step(at(50), [*ready("blk-s-n0", when=at(50), block_id="blk-s"), started("big", "blk-s-n0")])
    actions = c.step(at(700), [job_done("blk-s-n0", "big", at(700), block_id="blk-s")])
    return c, actions


def test_a_restartable_job_moves_to_paid_idle_gpus_and_the_hourly_node_is_released() -> None:
    c, actions = _scene(restartable=True)
    [stop] = only(actions, StopWork)
    [start] = only(actions, StartWork)
    assert (stop.job_id, stop.node_id) == ("x", "blk-p-n0")
    assert (start.job_id, start.node_id) == ("x", "blk-s-n0")
    assert start.reason.code == MOVE and "saves $" in start.reason.message
    rec = c.state.jobs["x"]
    assert rec.state is JobState.SCHEDULED and list(rec.placements) == ["blk-s-n0"]
    [(_, decision)] = list(c.state.consolidations)
    assert decision.block_id == "blk-p" and decision.saving > decision.restart_cost
    # nothing on the prime node any more: released after its short hold
    released = [a for s in range(1, 40) for a in only(c.step(at(700 + 60 * s), [tick()]), ReleaseBlock)]
    assert [r.block_id for r in released] == ["blk-p"]


def test_a_job_without_restartable_is_never_moved() -> None:
    c, actions = _scene(restartable=False)
    assert only(actions, StopWork) == [] and only(actions, StartWork) == []
    assert list(c.state.jobs["x"].placements) == ["blk-p-n0"]
    assert list(c.state.consolidations) == [] and c.state.restartable_held == {}
