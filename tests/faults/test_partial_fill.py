"""A seller that fills an order partially (fewer nodes than asked): the nodes it granted are used, the
missing capacity is bought again, nothing is double-booked, and the budget counts what was granted."""

from __future__ import annotations

from decimal import Decimal

from scalar.engine import Controller, ControllerConfig, JobState
from scalar.engine.budget import GLOBAL, commitments, rate_at
from tests.engine.builders import (
    at,
    buys,
    filled,
    market,
    prime_offer,
    ready,
    spec,
    started,
    starts,
    submit,
    tick,
)
from tests.engine.invariants import check_bookings


def test_a_partial_fill_is_used_and_the_rest_bought_again() -> None:
    c = Controller(ControllerConfig(request_timeout_s=300, backoff_s=60))
    history = [
        c.step(at(0), [market(prime_offer("2.50", gpus=8), book=None), *submit(spec("a", 8), spec("b", 8))])
    ]
    bought = buys(history[0])
    assert sum(b.request.node_count for b in bought) == 2
    first = bought[0]
    # The seller grants one node of the two (or of the first order only).
    history.append(c.step(at(10), [filled(first, at(10), nodes=("blk-1-n0",))]))
    for other in bought[1:]:
        history.append(c.step(at(11), [filled(other, at(11), block_id="blk-2", nodes=())]))
    history.append(c.step(at(20), ready("blk-1-n0", when=at(20))))
    [start] = starts(history[-1])
    history.append(c.step(at(21), [started(start.job_id, "blk-1-n0")]))
    check_bookings(c)
    waiting = "b" if start.job_id == "a" else "a"
    # The granted node's worth is what is committed, not the two nodes asked for.
    assert rate_at(commitments(c.state, at(30)), GLOBAL, at(30)) <= Decimal(40)
    # The missing node is bought again once the rest of the order times out.
    again = []
    for t in range(60, 2000, 60):
        actions = c.step(at(t), [tick()])
        history.append(actions)
        again += [b for b in buys(actions) if waiting in b.for_jobs]
        if again:
            break
    assert again, c.explain(waiting)
    history.append(c.step(at(2001), [filled(again[0], at(2001), block_id="blk-3")]))
    node = c.state.blocks["blk-3"].node_ids[0]
    history.append(c.step(at(2010), ready(node, when=at(2010), block_id="blk-3")))
    assert [s.job_id for s in starts(history[-1])] == [waiting]
    check_bookings(c)
    assert {c.state.jobs[j].state for j in ("a", "b")} == {JobState.SCHEDULED, JobState.RUNNING}
    keys = [b.action_id for step in history for b in buys(step)]
    assert len(keys) == len(set(keys))  # nothing bought twice under one key
