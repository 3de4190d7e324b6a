"""Idle capacity is released after ``idle_release_s``, never below a group's ``min_slices``."""

from __future__ import annotations

from scalar.domain.market import NodeState
from scalar.domain.tier import Tier
from scalar.engine import Controller, ControllerConfig, ReleaseBlock, ScaleGroupConfig
from tests.engine.builders import (
    at,
    buys,
    cancel,
    filled,
    job_done,
    market,
    only,
    ready,
    sf_offer,
    spec,
    starts,
    submit,
    tick,
)

IDLE = 1800


def test_an_idle_block_is_released_after_the_threshold_and_not_before() -> None:
    c = Controller(ControllerConfig(idle_release_s=IDLE))
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4, duration=600))])
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(60), ready("blk-1-n0", when=at(60)))
    c.step(at(700), [job_done("blk-1-n0", "j", at(700))])
    assert c.step(at(700 + IDLE - 1), [tick()]) == []
    actions = c.step(at(700 + IDLE), [tick()])
    [release] = only(actions, ReleaseBlock)
    assert (release.action_id, release.block_id, release.provider, release.why) == (
        "act-000003",
        "blk-1",
        "sfcompute",
        "idle",
    )
    assert "idle for 1800 s (threshold 1800 s)" in release.reason.message
    assert [n.state for n in c.nodes()] == [NodeState.TERMINATED]
    assert [b.status for b in c.blocks()] == ["released"]
    # Released once: later steps do nothing.
    assert c.step(at(700 + 2 * IDLE), [tick()]) == []


def test_a_node_that_never_ran_anything_is_idle_from_when_it_became_ready() -> None:
    c = Controller(ControllerConfig(idle_release_s=IDLE))
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4))])
    c.step(at(1), [cancel("j")])
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(60), ready("blk-1-n0", when=at(60)))
    assert only(c.step(at(60 + IDLE - 1), [tick()]), ReleaseBlock) == []
    assert len(only(c.step(at(60 + IDLE), [tick()]), ReleaseBlock)) == 1


def test_idle_release_never_goes_below_min_slices() -> None:
    group = ScaleGroupConfig(
        name="sf", providers=("sfcompute",), tiers=(Tier.FAST,), min_slices=1, max_slices=4
    )
    c = Controller(ControllerConfig(scale_groups=(group,), idle_release_s=IDLE))
    # min_slices 1: one node is bought with no demand at all.
    [keep] = c.step(at(0), [market(sf_offer())])
    assert (keep.for_jobs, keep.request.node_count) == ((), 1)
    assert "min_slices" in keep.reason.message
    assert c.step(at(10), [tick()]) == []
    c.step(at(30), [filled(keep, at(30), block_id="b-min")])
    c.step(at(60), ready("b-min-n0", when=at(60), block_id="b-min"))
    # Two 8-GPU jobs: one runs on the min node, the other buys a second block.
    actions = c.step(at(70), submit(spec("a", 8, duration=600), spec("b", 8, duration=600)))
    [start] = starts(actions)
    [extra] = buys(actions)
    c.step(at(100), [filled(extra, at(100), block_id="b-2")])
    c.step(at(130), ready("b-2-n0", when=at(130), block_id="b-2"))
    c.step(at(700), [job_done(start.node_id, start.job_id, at(700), block_id="b-min")])
    c.step(at(800), [job_done("b-2-n0", "b", at(800), block_id="b-2")])
    # Both idle long enough: exactly one block goes, one node stays for min_slices.
    actions = c.step(at(800 + IDLE), [tick()])
    assert len(only(actions, ReleaseBlock)) == 1
    assert buys(actions) == []
    live = [n for n in c.nodes() if n.state is NodeState.READY]
    assert len(live) == 1
    # Forever after, the last one is kept, and said so once in its block's story.
    assert only(c.step(at(800 + 10 * IDLE), [tick()]), ReleaseBlock) == []
    assert only(c.step(at(800 + 20 * IDLE), [tick()]), ReleaseBlock) == []
    kept = [e for e in c.story(live[0].block_id) if e.reason.code == "kept_for_min_slices"]
    assert len(kept) == 1
