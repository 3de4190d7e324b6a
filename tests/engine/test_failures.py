"""Things going wrong: timeouts, refusals, failures, expiry, stale reports. Nothing is lost, nothing bought twice."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from scalar.domain.market import NodeState
from scalar.domain.orderbook import BookOrder
from scalar.engine import Controller, ControllerConfig, JobState, OrderStatus, ReleaseBlock, StopWork
from scalar.engine.queries import GroupView
from tests.engine.builders import (
    at,
    buys,
    cancel,
    filled,
    job_done,
    market,
    node_state,
    only,
    ready,
    rejected,
    sf_offer,
    spec,
    started,
    starts,
    submit,
    tick,
)

CFG = ControllerConfig(request_timeout_s=600, backoff_s=300, boot_timeout_s=1200)


def running(c: Controller, job_id: str = "j", gpus: int = 4, **kw: object) -> None:
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec(job_id, gpus, **kw))])  # type: ignore[arg-type]
    c.step(at(30), [filled(buy, at(30))])
    [start] = starts(c.step(at(60), ready("blk-1-n0", when=at(60))))
    c.step(at(70), [started(job_id, start.node_id)])


def test_request_timeout_fails_the_slice_backs_off_the_group_then_buys_again() -> None:
    c = Controller(CFG)
    [first] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4))])
    assert c.step(at(599), [tick()]) == []
    # 600 s without a fill: the slice fails, the order expires, the group backs off for 300 s.
    assert c.step(at(600), [tick()]) == []
    [group] = [g for g in c.scale_groups() if g.name == first.group]
    assert (group.slices.failed, group.slices.requesting, group.availability) == (1, 0, "backoff")
    assert group.backoff_until == at(900)
    assert group.backoff_reason is not None and group.backoff_reason.code == "request_timeout"
    assert [o.status for o in c.orders()] == [OrderStatus.EXPIRED]
    [unmet] = c.autoscaler_status().unmet
    assert (unmet.job_ids, unmet.code) == (("j",), "group_unavailable")
    assert c.step(at(899), [tick()]) == []
    # Backoff over: one new purchase, with a new id.
    [again] = c.step(at(900), [tick()])
    assert (again.action_id, again.for_jobs) == ("act-000002", ("j",))
    assert c.step(at(901), [tick()]) == []


def test_late_fill_after_the_timeout_is_adopted_and_used() -> None:
    c = Controller(CFG)
    [first] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4))])
    c.step(at(600), [tick()])
    [second] = c.step(at(900), [tick()])
    # The first order fills after all: its node is ours, paid for and used.
    c.step(at(950), [filled(first, at(950), block_id="late")])
    assert [o.status for o in c.orders()] == [OrderStatus.FILLED, OrderStatus.PLACED]
    [start] = starts(c.step(at(980), ready("late-n0", when=at(980), block_id="late")))
    assert (start.job_id, start.node_id) == ("j", "late-n0")
    assert [b.block_id for b in c.blocks()] == ["late"]
    assert second.action_id != first.action_id


def test_rejected_order_backs_off_its_group() -> None:
    c = Controller(CFG)
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4))])
    assert c.step(at(10), [rejected(buy)]) == []
    group = fast_group(c)
    assert (group.availability, group.slices.failed) == ("backoff", 1)
    assert group.backoff_until == at(310)
    assert [b.action_id for b in buys(c.step(at(310), [tick()]))] == ["act-000002"]


def test_node_failure_preempts_its_jobs_back_to_pending_with_the_reason() -> None:
    c = Controller(CFG)
    running(c, "j")
    actions = c.step(at(500), [node_state("blk-1-n0", NodeState.FAILED, at(500), why="ECC errors")])
    job = c.job("j")
    assert job is not None and job.state is JobState.PENDING and job.preemptions == 1
    [preempted] = [e for e in c.story("j") if e.to_state == "PREEMPTED"]
    assert preempted.reason.code == "preempted" and "ECC errors" in preempted.reason.message
    assert job.placements == ()
    # The lost capacity is bought again for it; the failed block is released (no live node left).
    assert [b.for_jobs for b in buys(actions)] == [("j",)]
    assert [(r.block_id, r.why) for r in only(actions, ReleaseBlock)] == [("blk-1", "all_nodes_failed")]
    assert len(c.jobs()) == 1


def test_block_expiry_preempts_an_overrunning_job() -> None:
    c = Controller(CFG)
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4, duration=600))])
    one_hour = replace(buy, request=replace(buy.request, duration_s=3600))
    c.step(at(30), [filled(one_hour, at(30))])
    c.step(at(60), ready("blk-1-n0", when=at(60)))
    c.step(at(70), [started("j", "blk-1-n0")])
    # The job overruns its expected 600 s; the contract ends at 3630 s.
    actions = c.step(at(3630), [tick()])
    job = c.job("j")
    assert job is not None and job.state is JobState.PENDING
    assert any(e.reason.code == "preempted" and "ended" in e.reason.message for e in c.story("j"))
    assert [n.state for n in c.nodes()] == [NodeState.TERMINATED]
    assert [b.status for b in c.blocks()] == ["ended"]
    assert only(actions, ReleaseBlock) == []
    assert [b.for_jobs for b in buys(actions)] == [("j",)]


def test_cancel_a_running_job_stops_it_and_frees_its_gpus() -> None:
    c = Controller(CFG)
    running(c, "j")
    actions = c.step(at(100), [cancel("j")])
    assert [(s.job_id, s.node_id, s.why) for s in only(actions, StopWork)] == [("j", "blk-1-n0", "cancelled")]
    assert c.job("j").state is JobState.CANCELLED
    assert c.nodes()[0].gpus_free == 8
    # Cancelling again, or a late "finished" report, changes nothing and raises nothing.
    assert c.step(at(110), [cancel("j"), job_done("blk-1-n0", "j", at(110))]) == []
    assert c.job("j").state is JobState.CANCELLED


def test_cancel_a_pending_job() -> None:
    c = Controller(CFG)
    c.step(at(0), [market(sf_offer()), *submit(spec("j", 4))])
    assert c.step(at(5), [cancel("j")]) == []
    assert c.job("j").state is JobState.CANCELLED


def test_stale_and_unknown_reports_are_ignored_and_told_in_the_story() -> None:
    c = Controller(CFG)
    running(c, "j")
    events = [
        node_state("nope", NodeState.READY, at(200)),
        node_state("blk-1-n0", NodeState.BOOTING, at(200)),  # backwards
        job_done("blk-1-n0", "someone-else", at(200)),
        started("ghost", "blk-1-n0"),
        cancel("ghost"),
    ]
    assert c.step(at(200), events) == []
    assert c.nodes()[0].state is NodeState.READY
    assert c.job("j").state is JobState.RUNNING
    assert [e.reason.code for e in c.story("blk-1-n0")][-1] == "stale_report"
    assert [e.reason.code for e in c.story("nope")] == ["unknown_node"]


def test_a_duplicate_fill_changes_nothing_and_is_paid_once() -> None:
    c = Controller(CFG)
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4))])
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(40), [filled(buy, at(40))])
    assert len(c.blocks()) == 1 and len(c.nodes()) == 1
    c.step(at(3630), [tick()])
    # One node of 8 GPUs at $2.20 for its contract, paid once (whole: a block seller's contract is paid
    # to its end, released early or not).
    hours = Decimal(buy.request.duration_s) / 3600
    report = c.costs()
    assert report.accrued == report.committed == 8 * buy.request.limit_price_per_gpu_hour * hours  # type: ignore[operator]


def test_a_node_that_never_becomes_ready_fails_after_the_boot_timeout() -> None:
    c = Controller(CFG)
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4))])
    c.step(at(30), [filled(buy, at(30))])
    actions = c.step(at(1230), [tick()])
    assert [n.state for n in c.nodes()] == [NodeState.FAILED]
    assert [(r.block_id, r.why) for r in only(actions, ReleaseBlock)] == [("blk-1", "all_nodes_failed")]
    group = fast_group(c)
    assert group.availability == "backoff"
    assert buys(actions) == []


def fast_group(c: Controller) -> GroupView:
    [group] = [g for g in c.scale_groups() if g.name == "sfcompute/8xH100/FAST"]
    return group


def test_malformed_market_data_never_stops_the_loop() -> None:
    bad_book = (BookOrder(Decimal("-1"), 8, Decimal(168)), BookOrder(Decimal("2.0"), -3, Decimal(0)))
    broken = (
        replace(sf_offer(), instance_type="nan-price", price_per_hour=Decimal("NaN")),
        replace(sf_offer(), instance_type="quarter", gpu_count=0.25),
        replace(sf_offer(), instance_type="inf-vram", gpu_memory_gb=float("inf")),
    )
    c = Controller(CFG)
    actions = c.step(at(0), [market(sf_offer(), *broken, book=bad_book), *submit(spec("j", 4))])
    assert actions == []
    assert [g.name for g in c.scale_groups()] == ["sfcompute/8xH100/FAST", "sfcompute/8xH100/FLEX"]
    job = c.job("j")
    assert job is not None and job.state is JobState.PENDING
    assert job.reason is not None and job.reason.code == "bad_book"
    assert "price_per_gpu_hour" in job.reason.message
    # A sound book later: it buys.
    assert [b.for_jobs for b in buys(c.step(at(60), [market(sf_offer())]))] == [("j",)]


def test_a_job_id_that_could_collide_with_a_gang_task_is_refused() -> None:
    c = Controller(CFG)
    c.step(at(0), [market(sf_offer()), *submit(spec("g", 16), spec("g#0", 1))])
    assert c.job("g#0").state is JobState.REJECTED  # type: ignore[union-attr]
    assert c.job("g").state is JobState.PENDING  # type: ignore[union-attr]
