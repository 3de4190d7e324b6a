"""A job larger than one node: whole nodes of one block, all or nothing, one coscheduled demand entry."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from scalar.domain.market import NodeState
from scalar.engine import Controller, ControllerConfig, JobState, StopWork, WorkPlacement
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
    sf_offer,
    spec,
    starts,
    submit,
)


def test_gang_of_16_gpus_buys_two_nodes_as_one_coscheduled_entry() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("g", 16))])
    assert (buy.group, buy.request.node_count, buy.for_jobs) == ("sfcompute/8xH100/FAST", 2, ("g",))
    # Priced for 16 GPUs: only the $2.20 level (cumulative 24) covers them.
    assert buy.request.limit_price_per_gpu_hour == Decimal("2.20")
    routing = c.autoscaler_status().last_routing
    assert routing is not None
    [entry] = [d.entry for d in routing.entry_decisions]
    assert (entry.coschedule_group_id, entry.task_ids, entry.resources.gpu_count) == ("g", ("g#0", "g#1"), 8)
    assert routing.group_to_launch == {"sfcompute/8xH100/FAST#gang2": 1}
    # In flight: the next tick buys nothing more.
    assert c.step(at(10), []) == []


def test_gang_starts_only_when_every_node_is_ready_and_on_whole_nodes_of_one_block() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("g", 16))])
    c.step(at(30), [filled(buy, at(30))])
    # One node READY: nothing starts (never half-started).
    assert c.step(at(60), ready("blk-1-n0", when=at(60))) == []
    assert c.job("g").state is JobState.PENDING
    actions = c.step(at(90), ready("blk-1-n1", when=at(90)))
    [start] = starts(actions)
    assert start.job_id == "g"
    assert start.placements == (
        WorkPlacement("blk-1-n0", tuple(range(8))),
        WorkPlacement("blk-1-n1", tuple(range(8))),
    )
    assert buys(actions) == []
    assert sorted(n.gpus_free for n in c.nodes()) == [0, 0]


def test_gang_never_takes_a_node_another_job_holds() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("small", 1))])
    big = replace(buy, request=replace(buy.request, node_count=2))  # the seller grants a 2-node block
    c.step(at(30), [filled(big, at(30))])
    actions = c.step(at(60), ready("blk-1-n0", "blk-1-n1", when=at(60)))
    assert [s.job_id for s in starts(actions)] == ["small"]
    # The gang needs 2 whole free nodes; one of the two holds "small": it waits and buys 2 more.
    actions = c.step(at(70), submit(spec("g", 16)))
    assert starts(actions) == []
    assert [(b.request.node_count, b.for_jobs) for b in buys(actions)] == [(2, ("g",))]
    why = c.explain("g")
    assert why is not None and why.placement is not None
    assert "no block has enough whole free nodes (best has 1)" in why.placement.message
    # "small" finishes: both nodes are whole and free, the gang starts there at once.
    actions = c.step(at(100), [job_done("blk-1-n0", "small", at(100))])
    [start] = starts(actions)
    assert (start.job_id, start.node_ids) == ("g", ("blk-1-n0", "blk-1-n1"))


def test_losing_one_node_of_a_gang_requeues_it_and_stops_the_other_node() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("g", 16))])
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(60), ready("blk-1-n0", "blk-1-n1", when=at(60)))
    actions = c.step(at(120), [node_state("blk-1-n1", NodeState.FAILED, at(120), why="GPU fell off the bus")])
    stops = only(actions, StopWork)
    assert [(s.job_id, s.node_id, s.why) for s in stops] == [("g", "blk-1-n0", "gang_broken")]
    job = c.job("g")
    assert job is not None and job.state is JobState.PENDING and job.preemptions == 1
    assert [n.gpus_free for n in c.nodes()] == [8, 8]
    states = [(e.from_state, e.to_state) for e in c.story("g") if e.kind == "job"]
    assert states[-2:] == [("SCHEDULED", "PREEMPTED"), ("PREEMPTED", "PENDING")]
    # One node left alive is not enough for the gang; it buys again (2 whole nodes, one block).
    assert [(b.request.node_count, b.for_jobs) for b in buys(actions)] == [(2, ("g",))]


def test_a_small_job_cannot_take_a_node_of_a_gang_whose_other_node_still_boots() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("g", 16))])
    c.step(at(30), [filled(buy, at(30))])
    # The first node is READY; a small, higher-priority job arrives in the same step.
    actions = c.step(at(60), [*ready("blk-1-n0", when=at(60)), *submit(spec("small", 1, priority=9))])
    assert starts(actions) == []
    assert [(b.for_jobs, b.request.node_count) for b in buys(actions)] == [(("small",), 1)]
    why = c.explain("small")
    assert why is not None and why.placement is not None and why.placement.kind == "REQUEST_MORE_CAPACITY"
    # The second node comes up: the gang starts on both, its block untouched.
    [start] = starts(c.step(at(90), ready("blk-1-n1", when=at(90))))
    assert (start.job_id, start.node_ids) == ("g", ("blk-1-n0", "blk-1-n1"))


def test_a_node_bought_for_a_job_that_went_away_is_open_to_others() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("a", 4))])
    c.step(at(10), [cancel("a")])
    c.step(at(30), [filled(buy, at(30))])
    actions = c.step(at(60), [*ready("blk-1-n0", when=at(60)), *submit(spec("b", 4))])
    assert [s.job_id for s in starts(actions)] == ["b"]


def test_the_hold_lapses_reservation_s_after_the_slice_is_ready() -> None:
    c = Controller(ControllerConfig(reservation_s=600))
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("a", 4, vram=60))])
    # The seller delivers 40 GB GPUs: "a" cannot use the node, which is held for it all the same.
    c.step(at(30), [filled(buy, at(30), vram=40)])
    c.step(at(60), ready("blk-1-n0", when=at(60)))
    assert starts(c.step(at(100), submit(spec("b", 1, vram=10)))) == []
    assert c.job("b").state is JobState.PENDING  # type: ignore[union-attr]
    assert starts(c.step(at(659), [])) == []
    # 600 s after the slice became READY the hold lapses and "b" goes there.
    assert [(s.job_id, s.node_id) for s in starts(c.step(at(660), []))] == [("b", "blk-1-n0")]
