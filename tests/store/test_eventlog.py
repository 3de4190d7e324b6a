"""The event log and the one-transaction step: events, actions, projections and decisions together."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import event as sa_event

from scalar.store import NewDecision, NewEvent, Store
from tests.store.timeline import T0, action, at, event


class Boom(Exception):
    pass


def counts(store: Store) -> tuple[int, int, int, int]:
    with store.read() as tx:
        return (
            tx.last_seq(),
            sum(tx.count_actions().values()),
            tx.count_projection("jobs"),
            len(tx.list_decisions()),
        )


def test_one_step_writes_events_actions_projections_and_decisions_together(store: Store) -> None:
    with store.write() as tx:
        appended = tx.append_batch(at(1), [event("s1", job="j1", gpus=4), event("s2", job="j2", gpus=8)])
        tx.add_actions(
            [action("buy:o1", gpus=8, limit_price="2.31")],
            now=at(1),
            created_seq=appended.last_seq,
            batch_id=appended.batch_id,
        )
        tx.upsert_projection("jobs", "j1", "PENDING", {"gpus": 4}, at=at(1))
        tx.record_decision("job:j1", at(1), "NO_NODE_FITS", "needs 4 GPUs, has 0", {"need": 4, "have": 0})

    assert [(r.stimulus_id, r.seq, r.created) for r in appended.results] == [("s1", 1, True), ("s2", 2, True)]
    with store.read() as tx:
        stored = tx.read_events_page()
        buy = tx.get_action("buy:o1")
        job = tx.get_projection("jobs", "j1")
        story = tx.story("job:j1")
    assert [(e.seq, e.stimulus_id, e.kind, e.payload) for e in stored] == [
        (1, "s1", "job_submitted", {"gpus": 4, "job": "j1"}),
        (2, "s2", "job_submitted", {"gpus": 8, "job": "j2"}),
    ]
    assert all(e.batch_id == appended.batch_id for e in stored)
    assert buy is not None and (buy.status, buy.attempts, buy.created_seq) == ("pending", 0, 2)
    assert buy.payload == {"gpus": 8, "limit_price": "2.31"}
    assert job is not None and (job.state, job.data, job.updated_at) == ("PENDING", {"gpus": 4}, at(1))
    assert [(d.code, d.message, d.data, d.at) for d in story] == [
        ("NO_NODE_FITS", "needs 4 GPUs, has 0", {"have": 0, "need": 4}, at(1))
    ]


def test_an_exception_inside_the_step_leaves_nothing_behind(store: Store) -> None:
    with store.write() as tx:
        tx.append_batch(at(0), [event("before")])
    before = counts(store)

    with pytest.raises(Boom), store.write() as tx:
        appended = tx.append_batch(at(1), [event("s1"), event("s2")])
        tx.add_actions([action("buy:1")], now=at(1), created_seq=appended.last_seq)
        tx.upsert_projection("jobs", "j1", "PENDING", {})
        tx.record_decision("job:j1", at(1), "X", "x")
        raise Boom

    assert counts(store) == before
    # The rolled-back stimuli are not "already seen": delivering them again stores them.
    with store.write() as tx:
        again = tx.append_batch(at(2), [event("s1"), event("s2")])
    assert [r.created for r in again.results] == [True, True]


def test_a_duplicate_stimulus_is_a_noop_that_returns_the_stored_seq(store: Store) -> None:
    with store.write() as tx:
        first = tx.append_batch(at(1), [event("s1", n=1), event("s2", n=2)])
    with store.write() as tx:
        second = tx.append_batch(at(2), [event("s2", n=99), event("s3", n=3), event("s3", n=3)])
    with store.write() as tx:
        third = tx.append_batch(at(3), [event("s1"), event("s3")])

    assert [(r.stimulus_id, r.seq, r.created) for r in second.results] == [
        ("s2", 2, False),
        ("s3", 3, True),
        ("s3", 3, False),
    ]
    assert [e.stimulus_id for e in second.new_events] == ["s3"]
    assert third.batch_id is None and third.new_events == ()
    assert [(r.seq, r.created) for r in third.results] == [(1, False), (3, False)]
    with store.read() as tx:
        stored = tx.read_events_page()
    assert [(e.stimulus_id, e.payload) for e in stored] == [
        ("s1", {"n": 1}),
        ("s2", {"n": 2}),
        ("s3", {"n": 3}),
    ]
    assert first.batch_id is not None and second.batch_id is not None and second.batch_id > first.batch_id


def test_new_events_carry_the_payload_a_replay_will_see(store: Store) -> None:
    payload: dict[Any, Any] = {"b": (1, 2), "a": {"z": 1, "y": 2.5}, 3: "x"}  # a tuple, a key not a str
    original = NewEvent("s1", "price", payload, at(0))
    with store.write() as tx:
        live = tx.append_batch(at(0), [original]).new_events[0]
    replayed = next(store.read_events())
    assert live == replayed
    assert list(live.payload) == ["3", "a", "b"] and live.payload["b"] == [1, 2]


def test_payloads_must_be_json(store: Store) -> None:
    with pytest.raises(TypeError), store.write() as tx:
        tx.append_batch(at(0), [NewEvent("s1", "price", {"price": Decimal("2.31")}, at(0))])
    with pytest.raises(ValueError), store.write() as tx:
        tx.append_batch(at(0), [NewEvent("s1", "price", {"price": float("nan")}, at(0))])
    assert counts(store) == (0, 0, 0, 0)


def test_events_read_back_in_seq_order_page_by_page(store: Store) -> None:
    total, page_size = 1050, 100
    with store.write() as tx:
        tx.append_batch(at(0), [event(f"s{i}", i=i) for i in range(total)])

    selects: list[str] = []

    def spy(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("SELECT") and "FROM events" in statement:
            selects.append(statement)

    sa_event.listen(store.engine, "before_cursor_execute", spy)
    try:
        stream = store.read_events(after_seq=0, page_size=page_size)
        first = next(stream)
        assert first.seq == 1 and len(selects) == 1  # lazily: one page fetched so far
        rest = list(stream)
    finally:
        sa_event.remove(store.engine, "before_cursor_execute", spy)

    seqs = [first.seq, *(e.seq for e in rest)]
    assert seqs == list(range(1, total + 1))
    assert [e.payload["i"] for e in [first, *rest]] == list(range(total))
    assert len(selects) == total // page_size + 1
    assert [e.seq for e in store.read_events(after_seq=1040, page_size=page_size)] == list(range(1041, 1051))


def test_batches_replay_in_order_with_their_step_time(store: Store) -> None:
    steps = [(at(1), ["a", "b", "c"]), (at(2), ["d"]), (at(5), ["e", "f"])]
    for now, ids in steps:
        with store.write() as tx:
            tx.append_batch(now, [event(s) for s in ids])

    batches = list(store.read_batches(page_size=2))  # pages split batches; batches stay whole
    assert [(b.at, [e.stimulus_id for e in b.events]) for b in batches] == [(now, ids) for now, ids in steps]
    assert [b.id for b in store.read_batches(after_batch_id=batches[0].id)] == [b.id for b in batches[1:]]
    assert list(store.read_batches(after_batch_id=batches[-1].id)) == []


def test_record_decisions_in_bulk_and_read_a_story(store: Store) -> None:
    with store.write() as tx:
        appended = tx.append_batch(at(1), [event("s1")])
        tx.record_decisions(
            [
                NewDecision("job:a", at(1), "QUEUED", "waiting for capacity"),
                NewDecision("job:b", at(1), "QUEUED", "waiting for capacity"),
                NewDecision("job:a", at(2), "PLACED", "placed on node n1", {"node": "n1"}),
            ],
            batch_id=appended.batch_id,
        )
    with store.read() as tx:
        story = tx.story("job:a")
        last = tx.story("job:a", limit=1)
        feed = tx.list_decisions(after_id=1)
    assert [(d.code, d.at, d.batch_id) for d in story] == [
        ("QUEUED", at(1), appended.batch_id),
        ("PLACED", at(2), appended.batch_id),
    ]
    assert [d.code for d in last] == ["PLACED"]
    assert [d.entity_id for d in feed] == ["job:b", "job:a"]


def test_times_are_utc_aware_and_naive_times_are_refused(store: Store) -> None:
    from datetime import datetime, timedelta, timezone

    paris = T0.astimezone(timezone(timedelta(hours=1)))
    with store.write() as tx:
        tx.append_batch(paris, [NewEvent("s1", "k", {}, paris)])
    stored = next(store.read_events())
    assert stored.at == T0 and stored.at.utcoffset() == timedelta(0)
    with pytest.raises(ValueError, match="naive"), store.write() as tx:
        tx.append_batch(datetime(2026, 1, 1), [NewEvent("s2", "k", {}, datetime(2026, 1, 1))])


def test_read_transactions_refuse_writes(store: Store) -> None:
    with pytest.raises(RuntimeError, match="read transaction"), store.read() as tx:
        tx.append_batch(at(0), [event("s1")])
