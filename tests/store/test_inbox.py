"""The inbox: any process inserts requests; the fenced leader consumes each exactly once, in the transaction
that appends the events they become. And runtime_state: cursors written with the events they describe."""

from __future__ import annotations

import threading

import pytest

from scalar.store import CANCEL, SUBMIT, InboxConflictError, NotLeaderError, Store
from tests.store.timeline import at, event


def consume(store: Store, fence: object, t: float) -> list[str]:
    """What a leader step does: take the unconsumed rows, append them as events, mark them consumed."""
    with store.write(fence) as tx:  # type: ignore[arg-type]
        items = tx.unconsumed_inbox()
        appended = tx.append_batch(at(t), [event(f"inbox:{i.id}", i.kind, t, **i.payload) for i in items])
        tx.mark_inbox_consumed([i.id for i in items], at=at(t), batch_id=appended.batch_id)
    return [i.entity_id for i in items]


def test_requests_are_consumed_once_in_order_with_the_events_they_become(store: Store) -> None:
    with store.write() as tx:
        first = tx.add_inbox(SUBMIT, "job-1", {"gpus": 1}, now=at(0))
        tx.add_inbox(SUBMIT, "job-2", {"gpus": 2}, now=at(1))
        tx.add_inbox(CANCEL, "job-1", {}, now=at(2))
    with store.read() as tx:
        assert [i.entity_id for i in tx.pending_inbox("job-1")] == ["job-1", "job-1"]
        assert tx.count_unconsumed_inbox() == 3
    lease = store.try_acquire("controller", "a", at(0), 10)
    assert consume(store, lease.fence, 3) == ["job-1", "job-2", "job-1"]
    assert consume(store, lease.fence, 4) == []  # nothing is consumed twice
    with store.read() as tx:
        consumed = tx.list_inbox(consumed=True)
        assert (consumed[0].id, consumed[0].kind, consumed[0].consumed_at) == (first, SUBMIT, at(3))
        assert len({i.batch_id for i in consumed}) == 1
        assert [e.stimulus_id for e in tx.read_events_page()] == [f"inbox:{i.id}" for i in consumed]
        assert tx.pending_inbox("job-1") == [] and tx.count_unconsumed_inbox() == 0


def test_a_deposed_leader_consumes_nothing_and_the_rows_wait_for_the_new_one(store: Store) -> None:
    old = store.try_acquire("controller", "a", at(0), 10)
    with store.write() as tx:
        tx.add_inbox(SUBMIT, "job-1", {}, now=at(1))
    new = store.try_acquire("controller", "b", at(11), 10)
    with pytest.raises(NotLeaderError):
        consume(store, old.fence, 12)
    with store.read() as tx:
        assert tx.count_unconsumed_inbox() == 1 and tx.last_seq() == 0
    assert consume(store, new.fence, 13) == ["job-1"]


def test_a_failed_step_rolls_the_consumption_back(store: Store) -> None:
    with store.write() as tx:
        tx.add_inbox(SUBMIT, "job-1", {}, now=at(0))
    with pytest.raises(RuntimeError), store.write() as tx:
        items = tx.unconsumed_inbox()
        tx.mark_inbox_consumed([i.id for i in items], at=at(1), batch_id=None)
        raise RuntimeError("the controller step failed")
    with store.read() as tx:
        assert [i.entity_id for i in tx.unconsumed_inbox()] == ["job-1"]


def test_marking_a_row_consumed_twice_is_refused(store: Store) -> None:
    with store.write() as tx:
        row = tx.add_inbox(SUBMIT, "job-1", {}, now=at(0))
        tx.mark_inbox_consumed([row], at=at(1), batch_id=None)
    with pytest.raises(InboxConflictError), store.write() as tx:
        tx.mark_inbox_consumed([row], at=at(2), batch_id=None)


def test_many_processes_insert_while_the_leader_consumes_and_none_is_lost_or_doubled(store: Store) -> None:
    lease = store.try_acquire("controller", "leader", at(0), 1000)
    done = threading.Event()
    seen: list[str] = []
    errors: list[BaseException] = []

    def submitter(n: int) -> None:
        try:
            for i in range(15):
                with store.write() as tx:
                    tx.add_inbox(SUBMIT, f"job-{n}-{i}", {"n": i}, now=at(1))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    def leader() -> None:
        t = 2.0
        try:
            while not done.is_set():
                seen.extend(consume(store, lease.fence, t))
                t += 1
            seen.extend(consume(store, lease.fence, t))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=submitter, args=(n,)) for n in range(3)]
    consumer = threading.Thread(target=leader)
    consumer.start()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    done.set()
    consumer.join()
    assert not errors
    assert sorted(seen) == sorted(f"job-{n}-{i}" for n in range(3) for i in range(15))


def test_runtime_state_is_written_with_the_events_and_rolled_back_with_them(store: Store) -> None:
    with store.write() as tx:
        tx.append_batch(at(1), [event("node:builtin:0-7:0")])
        tx.put_state("feed:builtin", {"cursor": 7}, at=at(1))
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.append_batch(at(2), [event("node:builtin:7-9:0")])
        tx.put_state("feed:builtin", {"cursor": 9}, at=at(2))
        raise RuntimeError("crash before commit")
    with store.write() as tx:
        tx.put_state("feed:other", {"cursor": 1})
    with store.read() as tx:
        assert tx.get_state("feed:builtin") == {"cursor": 7}
        assert tx.get_state("missing") is None
        assert tx.states_with_prefix("feed:") == {"feed:builtin": {"cursor": 7}, "feed:other": {"cursor": 1}}
        assert [e.stimulus_id for e in tx.read_events_page()] == ["node:builtin:0-7:0"]


def test_an_accepted_request_on_postgresql_does_not_wait_for_a_step_in_progress(pg_url: str) -> None:
    """``store.accept()`` commits an inbox row while a fenced step's write transaction is still open (it does
    not queue on the serialized writes' advisory lock); the step then consumes it on its next pass."""
    store = Store.open(pg_url)
    try:
        lease = store.try_acquire("controller", "a", at(0), 60)
        in_step = threading.Event()
        release = threading.Event()
        accepted_during_step: list[bool] = []

        def step() -> None:
            with store.write(lease.fence) as tx:
                tx.append_batch(at(1), [event("tick:1", "Tick", 1)])
                in_step.set()
                assert release.wait(30)

        thread = threading.Thread(target=step)
        thread.start()
        assert in_step.wait(30)
        with store.accept() as tx:
            tx.add_inbox(SUBMIT, "job-9", {"gpus": 1}, now=at(1))
        accepted_during_step.append(thread.is_alive())  # the step's transaction is still open
        release.set()
        thread.join(30)
        assert accepted_during_step == [True]
        assert consume(store, lease.fence, 2) == ["job-9"]
    finally:
        store.close()
