"""The leader lease: acquire, renew, refuse, take over with a new epoch, fence a deposed leader."""

from __future__ import annotations

import threading
import time

import pytest

from scalar.store import Lease, NotLeaderError, Store
from tests.store.timeline import at, event

NAME = "controller"
TTL_S = 10.0


def test_acquire_a_free_lease_then_renew_it(store: Store) -> None:
    first = store.try_acquire(NAME, "a", at(0), TTL_S)
    assert first == Lease(NAME, "a", 1, at(10), is_leader=True)
    renewed = store.try_acquire(NAME, "a", at(5), TTL_S)
    assert renewed == Lease(NAME, "a", 1, at(15), is_leader=True)
    # A holder whose lease lapsed but nobody took over keeps its epoch: nobody else wrote meanwhile.
    assert store.try_acquire(NAME, "a", at(100), TTL_S).epoch == 1


def test_a_held_lease_is_refused_to_others_until_it_expires(store: Store) -> None:
    store.try_acquire(NAME, "a", at(0), TTL_S)
    refused = store.try_acquire(NAME, "b", at(9.999), TTL_S)
    assert refused == Lease(NAME, "a", 1, at(10), is_leader=False)
    with pytest.raises(NotLeaderError):
        _ = refused.fence

    taken = store.try_acquire(NAME, "b", at(10), TTL_S)  # expires_at is exclusive
    assert taken == Lease(NAME, "b", 2, at(20), is_leader=True)
    assert store.try_acquire(NAME, "a", at(11), TTL_S) == Lease(NAME, "b", 2, at(20), is_leader=False)
    state = store.read_lease(NAME)
    assert state is not None and (state.holder, state.epoch) == ("b", 2)
    assert state.held_at(at(19)) and not state.held_at(at(20))


def test_release_lets_another_holder_take_over_at_once_with_a_new_epoch(store: Store) -> None:
    lease = store.try_acquire(NAME, "a", at(0), TTL_S)
    assert store.release(NAME, "b") is False
    assert store.release(NAME, "a") is True
    assert store.try_acquire(NAME, "b", at(1), TTL_S) == Lease(NAME, "b", 2, at(11), is_leader=True)
    with pytest.raises(NotLeaderError), store.write(lease.fence) as tx:
        tx.append_batch(at(2), [event("late")])


def test_leases_are_independent_by_name(store: Store) -> None:
    assert store.try_acquire("controller", "a", at(0), TTL_S).is_leader
    assert store.try_acquire("market", "b", at(0), TTL_S).is_leader


def test_fencing_rejects_a_deposed_leaders_append(store: Store) -> None:
    old = store.try_acquire(NAME, "a", at(0), TTL_S)
    with store.write(old.fence) as tx:
        tx.append_batch(at(1), [event("by-a")])
    new = store.try_acquire(NAME, "b", at(30), TTL_S)  # a stalled past its TTL
    assert new.epoch == old.epoch + 1

    with pytest.raises(NotLeaderError, match="held by 'b' at epoch 2") as err, store.write(old.fence) as tx:
        tx.append_batch(at(31), [event("by-a-late")])
        tx.upsert_projection("jobs", "j1", "RUNNING", {})
    assert "rebuild state" in str(err.value)
    # Re-acquiring gives "a" a new epoch; its old fence stays invalid.
    with store.write(new.fence) as tx:
        appended = tx.append_batch(at(32), [event("by-b")])
    assert [e.stimulus_id for e in store.read_events()] == ["by-a", "by-b"]
    batch = next(b for b in store.read_batches() if b.id == appended.batch_id)
    assert (batch.holder, batch.epoch) == ("b", 2)
    with store.read() as tx:
        assert tx.get_projection("jobs", "j1") is None


def test_two_threads_racing_for_an_expired_lease_exactly_one_wins(store: Store) -> None:
    for round_ in range(5):
        now = at(100 * (round_ + 1))  # the previous round's lease has expired
        barrier = threading.Barrier(2)
        results: dict[str, Lease] = {}

        def contend(holder: str, now=now, barrier=barrier, results=results) -> None:  # type: ignore[no-untyped-def]
            barrier.wait()
            results[holder] = store.try_acquire(NAME, holder, now, TTL_S)

        holders = [f"r{round_}-x", f"r{round_}-y"]
        threads = [threading.Thread(target=contend, args=(h,)) for h in holders]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        winners = [h for h in holders if results[h].is_leader]
        assert len(winners) == 1, results
        loser = next(h for h in holders if h not in winners)
        assert results[loser].holder == winners[0]
        assert results[winners[0]].epoch == round_ + 1


def test_a_takeover_waits_for_the_old_leaders_transaction_in_flight(store: Store) -> None:
    """No write of the old reign can land after the new reign began (the fence is checked at the start of
    the transaction; the takeover cannot commit until that transaction ends)."""
    old = store.try_acquire(NAME, "a", at(0), TTL_S)
    inside = threading.Event()
    may_commit = threading.Event()
    takeover: list[Lease] = []

    def old_leader() -> None:
        with store.write(old.fence) as tx:
            inside.set()
            may_commit.wait(timeout=30)
            tx.append_batch(at(1), [event("last-write-of-a")])

    def new_leader() -> None:
        takeover.append(store.try_acquire(NAME, "b", at(60), TTL_S))

    writer = threading.Thread(target=old_leader)
    writer.start()
    assert inside.wait(timeout=30)
    contender = threading.Thread(target=new_leader)
    contender.start()
    time.sleep(0.3)
    assert not takeover, "the takeover committed while the old leader's write was still open"
    may_commit.set()
    writer.join(timeout=30)
    contender.join(timeout=30)
    assert takeover and takeover[0].is_leader and takeover[0].epoch == 2
    assert [e.stimulus_id for e in store.read_events()] == ["last-write-of-a"]
    with pytest.raises(NotLeaderError), store.write(old.fence):
        pass


def test_bad_lease_arguments_are_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        store.try_acquire(NAME, "a", at(0), 0)
    with pytest.raises(ValueError, match="holder"):
        store.try_acquire(NAME, "", at(0), TTL_S)
