"""Idle capacity is released after ``idle_release_s``, never below a group's ``min_slices``."""

from __future__ import annotations

from decimal import Decimal

from scalar.domain.market import NodeState
from scalar.domain.tier import Tier
from scalar.engine import Controller, ControllerConfig, ReleaseBlock, ReleaseNodes, ScaleGroupConfig
from scalar.engine.budget import GLOBAL, commitments, rate_at
from scalar.engine.lifecycle import JobState
from tests.engine.builders import (
    at,
    buys,
    cancel,
    filled,
    job_done,
    market,
    node_state,
    only,
    prime_offer,
    ready,
    sf_offer,
    spec,
    started,
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


def _prime_node_done_at(c: Controller, done_s: int) -> None:
    """A 2-GPU Prime pod bought at 0, READY at 300 s (5 minutes from purchase), its job done at ``done_s``."""
    [buy] = buys(c.step(at(0), [market(prime_offer("2.50"), book=None), *submit(spec("j", 2, duration=600))]))
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(300), ready("blk-1-n0", when=at(300)))
    c.step(at(301), [started("j", "blk-1-n0")])
    c.step(at(done_s), [job_done("blk-1-n0", "j", at(done_s))])
    assert c.state.jobs["j"].state is JobState.SUCCEEDED


def test_an_hourly_node_nobody_is_expected_to_need_goes_after_a_minute_not_half_an_hour() -> None:
    c = Controller(ControllerConfig(idle_release_s=IDLE))
    _prime_node_done_at(c, 4_000)  # the one arrival is over an hour old by then: no job is expected
    assert only(c.step(at(4_000 + 59), [tick()]), ReleaseBlock) == []
    [release] = only(c.step(at(4_000 + 60), [tick()]), ReleaseBlock)
    assert release.provider == "prime" and "threshold 60 s" in release.reason.message
    assert "no job it could host arrived in the last hour" in release.reason.message


def test_an_hourly_node_is_held_while_jobs_keep_arriving_as_long_as_a_new_one_would_take() -> None:
    c = Controller(ControllerConfig(idle_release_s=IDLE))
    [buy] = buys(c.step(at(0), [market(prime_offer("2.50"), book=None), *submit(spec("j", 2, duration=600))]))
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(300), ready("blk-1-n0", when=at(300)))  # 300 s from purchase to READY
    c.step(at(301), [started("j", "blk-1-n0")])
    released: list[tuple[int, ReleaseBlock]] = []
    for t in range(360, 4_000, 60):
        events = [job_done("blk-1-n0", "j", at(t))] if t == 1_980 else [tick()]
        if t % 300 == 0:  # a FAST job the pod could host every 5 minutes (cancelled at once)
            events += [*submit(spec(f"x{t}", 2)), cancel(f"x{t}")]
        released += [(t, a) for a in only(c.step(at(t), events), ReleaseBlock)]
    assert c.state.jobs["j"].state is JobState.SUCCEEDED
    # 8 FAST jobs arrived in the hour before (j and seven others): one every 450 s, under twice the 300 s a
    # new pod takes: held 600 s, twice that.
    [(when, release)] = released
    assert when == 1_980 + 600 and "a job it could host every 450 s" in release.reason.message
    assert "takes 300 s to be READY: held 600 s" in release.reason.message


def test_arrivals_the_node_cannot_host_do_not_hold_it() -> None:
    # As above, but the jobs arriving every 5 minutes are 4-GPU jobs a 2-GPU pod cannot host: only j (at 0)
    # is a job it could serve, so it goes after the short hold (a billing minute), not after twice the
    # time a new pod takes.
    c = Controller(ControllerConfig(idle_release_s=IDLE))
    [buy] = buys(c.step(at(0), [market(prime_offer("2.50"), book=None), *submit(spec("j", 2, duration=600))]))
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(300), ready("blk-1-n0", when=at(300)))
    c.step(at(301), [started("j", "blk-1-n0")])
    released: list[tuple[int, ReleaseBlock]] = []
    for t in range(360, 4_000, 60):
        events = [job_done("blk-1-n0", "j", at(t))] if t == 1_980 else [tick()]
        if t % 300 == 0:
            events += [*submit(spec(f"x{t}", 4)), cancel(f"x{t}")]
        released += [(t, a) for a in only(c.step(at(t), events), ReleaseBlock)]
    [(when, release)] = released
    assert when == 1_980 + 60 and "a job it could host every 3600 s" in release.reason.message


def test_the_hold_follows_the_market_clock() -> None:
    # A market run 60x faster than the engine bills a minute every engine second: an idle pod nobody needs
    # goes after 1 s, not after 60 (an hour of its time).
    c = Controller(ControllerConfig(idle_release_s=IDLE, market_time_scales={"prime": 60.0}))
    _prime_node_done_at(c, 4_000)
    assert only(c.step(at(4_000), [tick()]), ReleaseBlock) == []
    [release] = only(c.step(at(4_001), [tick()]), ReleaseBlock)
    assert "threshold 1 s" in release.reason.message
    assert "60 of its seconds per engine second" in release.reason.message


def test_a_block_paid_whole_is_held_for_idle_release_s_whatever_the_forecast() -> None:
    c = Controller(ControllerConfig(idle_release_s=IDLE))
    # A 4,900 s job: its block is sized to 3 whole hours (with the allowances), still open when it idles.
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4, duration=4_900))])
    assert buy.request.duration_s == 3 * 3600
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(60), ready("blk-1-n0", when=at(60)))
    c.step(at(5_000), [job_done("blk-1-n0", "j", at(5_000))])
    assert only(c.step(at(5_000 + IDLE - 1), [tick()]), ReleaseBlock) == []
    [release] = only(c.step(at(5_000 + IDLE), [tick()]), ReleaseBlock)
    assert "paid whole when bought" in release.reason.message


# ---- single nodes of a block billed per node ----------------------------------------------------------


def two_pods_one_busy(c: Controller) -> None:
    """Two 2-GPU jobs bought together as one 2-node Prime block; ``short`` ends at 4,000 s, ``long`` runs on."""
    event = market(prime_offer("2.50"), book=None)
    jobs = submit(spec("short", 2, duration=600), spec("long", 2, duration=86_400))
    [buy] = buys(c.step(at(0), [event, *jobs]))
    assert buy.request.node_count == 2
    c.step(at(30), [filled(buy, at(30))])
    placed = {
        s.job_id: s.node_ids[0] for s in starts(c.step(at(300), ready("blk-1-n0", "blk-1-n1", when=at(300))))
    }
    assert set(placed) == {"short", "long"} and len(set(placed.values())) == 2
    c.step(at(301), [started(j, n) for j, n in placed.items()])
    c.step(at(4_000), [job_done(placed["short"], "short", at(4_000))])


def test_an_idle_pod_of_a_block_goes_alone_while_the_other_pod_works() -> None:
    c = Controller(ControllerConfig(idle_release_s=IDLE))
    two_pods_one_busy(c)
    [busy] = c.state.jobs["long"].placements
    idle = "blk-1-n1" if busy == "blk-1-n0" else "blk-1-n0"
    assert only(c.step(at(4_059), [tick()]), ReleaseNodes) == []
    actions = c.step(at(4_060), [tick()])
    assert only(actions, ReleaseBlock) == []
    [release] = only(actions, ReleaseNodes)
    assert (release.block_id, release.provider, release.node_ids, release.why) == (
        "blk-1",
        "prime",
        (idle,),
        "idle",
    )
    assert release.reason.code == "idle_nodes"
    assert "1 other node of it holds work" in release.reason.message
    assert "prime bills each node while it runs" in release.reason.message
    states = {n.node_id: n.state for n in c.nodes()}
    assert states == {idle: NodeState.TERMINATED, busy: NodeState.READY}
    assert c.state.jobs["long"].state is JobState.RUNNING
    [block] = c.blocks()
    assert block.status == "open" and block.paid_gpus == 2
    # From the release on, the block is paid for the working pod only: 2 GPUs a second, not 4.
    paid = block.paid_gpu_s
    c.step(at(5_060), [tick()])
    [block] = c.blocks()
    assert block.paid_gpu_s - paid == 2 * 1_000
    # Spend limits count the block at its full rate until it is released (docs/budgets.md, "Known limits").
    assert rate_at(commitments(c.state, at(5_060)), GLOBAL, at(5_060)) == Decimal("10.00")
    # Released once; the busy pod stays.
    assert only(c.step(at(6_000), [tick()]), ReleaseNodes) == []


def test_a_block_paid_whole_never_loses_single_nodes() -> None:
    # The same two jobs on an SFCompute block (a contract paid whole): the idle node stays with its block.
    c = Controller(ControllerConfig(idle_release_s=IDLE))
    [buy] = buys(
        c.step(
            at(0),
            [market(sf_offer()), *submit(spec("short", 8, duration=600), spec("long", 8, duration=86_400))],
        )
    )
    c.step(at(30), [filled(buy, at(30))])
    nodes = [f"blk-1-n{i}" for i in range(buy.request.node_count)]
    placed = {s.job_id: s.node_ids[0] for s in starts(c.step(at(60), ready(*nodes, when=at(60))))}
    assert set(placed) == {"short", "long"} and len(set(placed.values())) == 2
    c.step(at(61), [started(j, n) for j, n in placed.items()])
    c.step(at(700), [job_done(placed["short"], "short", at(700))])
    for t in range(760, 700 + 3 * IDLE, 300):
        actions = c.step(at(t), [tick()])
        assert only(actions, ReleaseNodes) == [] and only(actions, ReleaseBlock) == []


def test_a_preempted_pod_of_a_block_is_no_longer_paid_for() -> None:
    c = Controller(ControllerConfig(idle_release_s=IDLE))
    two_pods_one_busy(c)
    [busy] = c.state.jobs["long"].placements
    [block] = c.blocks()
    paid = block.paid_gpu_s
    # The working pod is preempted at 4,010 s and its job restarts on the idle pod: the block pays 4 GPUs
    # to 4,010, then 2 (the preempted pod is no longer billed).
    c.step(at(4_010), [node_state(busy, NodeState.TERMINATED, at(4_010), cause="preempted")])
    [other] = c.state.jobs["long"].placements
    assert other != busy
    c.step(at(5_000), [tick()])
    [block] = c.blocks()
    assert block.paid_gpu_s - paid == 4 * 10 + 2 * 990
    assert block.paid_gpus == 2
