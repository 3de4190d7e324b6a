"""The published decision state stored in parts (``runtime/snapshot_store.py``): after every step, what a
reader assembles from the header and the rows the writer changed is the whole ``snapshot`` of the
controller, on SQLite and PostgreSQL; a reader's transaction sees one step whole while the next is written;
a writer that failed or is new writes every row afresh."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from scalar.domain.market import BlockGrant, CapacityRequest, NodeEvent, NodeState, Order, OrderState
from scalar.domain.tier import Tier
from scalar.engine import (
    Controller,
    ControllerConfig,
    JobSpec,
    JobSubmitted,
    NodeReported,
    OrderUpdated,
    Tick,
)
from scalar.engine.snapshot import market_snapshot, restore, snapshot
from scalar.runtime.snapshot_store import (
    ARRIVED,
    JOB,
    MARKET_SNAPSHOT_KEY,
    SnapshotWriter,
    read_published,
)
from scalar.store import Store
from tests.engine.builders import at, cancel, market, prime_offer, sf_offer

NODES = ("a0", "a1", "a2")


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _controller() -> Controller:
    c = Controller(ControllerConfig.from_dict({"scale_groups": [{"name": "g", "max_slices": 4}]}))
    c.step(at(0), [market(sf_offer("2.00"), prime_offer("2.50", gpus=2))])
    request = CapacityRequest("sfcompute", "8xH100", 3, 7200, None, Tier.FAST, "H100", 8)
    grant = BlockGrant(
        "blk-a", "sfcompute", "8xH100", "H100", 8, 80, 96, 1024, at(1), at(7201), Decimal(2), NODES
    )
    c.step(
        at(1), [OrderUpdated("fill", "adopted", Order("o-a", "adopted", OrderState.FILLED, request, grant))]
    )
    c.step(at(1), [NodeReported(f"r-{n}", NodeEvent(n, "blk-a", at(1), NodeState.READY)) for n in NODES])
    return c


def _specs(first: int, count: int) -> list[JobSpec]:
    gpus = (1, 2, 4, 8, 1, 3)
    return [
        JobSpec(f"j{i:03d}", "FAST", gpus[i % len(gpus)], 40, 4, 32, 600.0 + 300 * (i % 4), i % 2)
        for i in range(first, first + count)
    ]


def _steps(c: Controller) -> list[tuple[Any, list[Any]]]:
    """A few steps of varied change: submissions (most wait), completions, a cancel, a node failure (its
    jobs preempted and queued again), and a quiet tick."""
    return [
        (at(2), [JobSubmitted(f"s{s.job_id}", s) for s in _specs(0, 40)]),
        (at(3), [Tick("t3")]),
        (at(4), "done"),
        (at(5), [cancel("j030"), *[JobSubmitted(f"s{s.job_id}", s) for s in _specs(40, 5)]]),
        (at(6), "fail"),
        (at(7), [Tick("t7")]),
        (at(8), "done"),
    ]


def _events(c: Controller, now: Any, what: Any) -> list[Any]:
    running = [
        (j, r) for j, r in c.state.jobs.items() if r.placements and str(r.state) in ("SCHEDULED", "RUNNING")
    ]
    if what == "done":
        return [
            NodeReported(
                f"d-{j}-{now}",
                NodeEvent(next(iter(r.placements)), "blk-a", now, job_id=j, job_succeeded=True),
            )
            for j, r in running[:3]
        ]
    if what == "fail":
        return [NodeReported(f"f-{now}", NodeEvent("a1", "blk-a", now, NodeState.FAILED, reason="gone"))]
    assert isinstance(what, list)
    return what


def _publish(store: Store, writer: SnapshotWriter, c: Controller) -> None:
    pub = writer.prepare(c.state, c.config.budgets)
    with store.write() as tx:
        pub.write(tx, c.state.now or at(0))
        tx.put_state(MARKET_SNAPSHOT_KEY, market_snapshot(c.state))
    writer.committed(pub)


def _read(store: Store) -> tuple[dict[str, Any], dict[str, Any]]:
    with store.read() as tx:
        got = read_published(tx)
    assert got is not None
    return got


def test_every_step_reads_back_as_the_whole_snapshot(store: Store) -> None:
    c = _controller()
    writer = SnapshotWriter()
    _publish(store, writer, c)
    written: list[int] = []
    for now, what in _steps(c):
        c.step(now, _events(c, now, what))
        pub = writer.prepare(c.state, c.config.budgets)
        written.append(len(pub.rows))
        with store.write() as tx:
            pub.write(tx, now)
            tx.put_state(MARKET_SNAPSHOT_KEY, market_snapshot(c.state))
        writer.committed(pub)
        data, market = _read(store)
        assert data == _json(snapshot(c.state, c.config.budgets))
        copy = restore(data, market)  # and it restores into the same decision state
        assert _json(snapshot(copy)) == _json(snapshot(c.state))
    assert any(0 < n < 20 for n in written), written  # only what changed was written
    assert written[1] == 0 or written[1] < written[0], written


def test_a_job_that_leaves_and_a_restarted_writer(store: Store) -> None:
    c = _controller()
    writer = SnapshotWriter()
    _publish(store, writer, c)
    for now, what in _steps(c)[:5]:
        c.step(now, _events(c, now, what))
        _publish(store, writer, c)
    live = {k for k, _ in _read(store)[0]["jobs"]}
    assert "j030" not in live  # cancelled: its row deleted
    assert any(r.preemptions for r in c.state.jobs.values())  # the failed node's jobs queued again
    with store.write() as tx:  # rows a crashed writer left behind, of a job that is no more
        tx.put_snapshot_parts(JOB, [("ghost", 0, "{}")])
    writer.reset()  # a new leader: every row afresh
    pub = writer.prepare(c.state, c.config.budgets)
    assert pub.full and len(pub.rows) == len(live)
    with store.write() as tx:
        pub.write(tx, at(9))
    writer.committed(pub)
    assert _read(store)[0] == _json(snapshot(c.state, c.config.budgets))


def test_rows_not_matching_the_header_are_refused(store: Store) -> None:
    from scalar.engine.codec import CodecError

    c = _controller()
    c.step(at(2), [JobSubmitted(f"s{s.job_id}", s) for s in _specs(0, 5)])
    writer = SnapshotWriter()
    _publish(store, writer, c)
    with store.write() as tx:
        tx.put_snapshot_parts(ARRIVED, [], below=10**9)  # the forecast's rows lost
    with pytest.raises(CodecError, match="arrived_count"):
        _read(store)


def test_a_reader_sees_one_step_whole_while_the_next_is_written(store: Store) -> None:
    """The reader's transaction began before the next step's write transaction committed: it reads the
    previous step's header and rows, not the new header with old rows (or the reverse)."""
    c = _controller()
    c.step(at(2), [JobSubmitted(f"s{s.job_id}", s) for s in _specs(0, 30)])
    writer = SnapshotWriter()
    _publish(store, writer, c)
    before = _json(snapshot(c.state, c.config.budgets))
    c.step(at(3), [cancel("j025"), *_events(c, at(3), "done")])
    pub = writer.prepare(c.state, c.config.budgets)
    assert pub.rows or pub.removed
    read_started, written = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def reader() -> None:
        with store.read() as tx:
            first = tx.get_state("controller:snapshot")  # the transaction's snapshot is taken here
            read_started.set()
            written.wait(10)
            got = read_published(tx)
        assert got is not None
        seen["first"], seen["data"] = first, got[0]

    thread = threading.Thread(target=reader)
    thread.start()
    assert read_started.wait(10)
    with store.write() as tx:
        pub.write(tx, at(3))
    writer.committed(pub)
    written.set()
    thread.join(10)
    assert seen["data"] == before
    assert _read(store)[0] == _json(snapshot(c.state, c.config.budgets))


def test_a_record_is_stamped_when_a_field_takes_a_new_value() -> None:
    """A record copied with ``replace`` is a new value (stamped later than any mark taken before); an
    equal value assigned again changes nothing published and is not stamped; a new one is."""
    from scalar.domain.reasons import Reason
    from scalar.engine.state import change_mark

    c = _controller()
    c.step(at(2), [JobSubmitted("s", _specs(0, 1)[0])])
    rec = c.state.jobs["j000"]
    mark = change_mark()
    assert rec.changed < mark
    assert replace(rec, preemptions=1).changed > mark
    assert rec.reason is not None
    rec.reason = replace(rec.reason)  # equal
    assert rec.changed < mark
    rec.reason = Reason("other", "another reason")
    assert rec.changed > mark
