"""The outbox: exclusive claims, completion with the result's events in one transaction, stale reclaims."""

from __future__ import annotations

import threading

import pytest

from scalar.store import (
    ActionNotClaimedError,
    DuplicateActionError,
    NewAction,
    Store,
    UnknownActionError,
)
from tests.store.timeline import action, at, event


def add(store: Store, *ids: str, t: float = 0.0) -> None:
    with store.write() as tx:
        appended = tx.append_batch(at(t), [event(f"decided:{ids[0]}")])
        tx.add_actions([action(i, order=i) for i in ids], now=at(t), created_seq=appended.last_seq)


def test_claim_moves_pending_to_in_flight_oldest_first(store: Store) -> None:
    add(store, "buy:1", "buy:2", "buy:3")
    with store.write() as tx:
        claimed = tx.claim_actions(worker="w1", now=at(5), limit=2)
    assert [(a.action_id, a.status, a.attempts, a.claimed_by, a.claimed_at) for a in claimed] == [
        ("buy:1", "in_flight", 1, "w1", at(5)),
        ("buy:2", "in_flight", 1, "w1", at(5)),
    ]
    with store.write() as tx:
        assert [a.action_id for a in tx.claim_actions(worker="w2", now=at(6), limit=5)] == ["buy:3"]
        assert tx.claim_actions(worker="w2", now=at(6), limit=5) == []
        assert tx.count_actions() == {"pending": 0, "in_flight": 3, "done": 0, "failed": 0}


def test_two_concurrent_claimers_never_get_the_same_action(store: Store) -> None:
    ids = [f"buy:{i}" for i in range(40)]
    add(store, *ids)
    got: dict[str, list[str]] = {"w1": [], "w2": []}
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def claimer(worker: str) -> None:
        try:
            barrier.wait()
            while True:
                with store.write() as tx:
                    batch = tx.claim_actions(worker=worker, now=at(1), limit=3)
                if not batch:
                    return
                got[worker].extend(a.action_id for a in batch)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(w,)) for w in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert not set(got["w1"]) & set(got["w2"])
    assert sorted(got["w1"] + got["w2"]) == sorted(ids)
    with store.read() as tx:
        assert {a.attempts for a in tx.list_actions(limit=100)} == {1}


def test_complete_records_the_result_and_its_events_atomically(store: Store) -> None:
    add(store, "buy:1")
    with store.write() as tx:
        (claim,) = tx.claim_actions(worker="w1", now=at(1))

    # A crash (exception) after the provider answered: neither the result nor its events are kept,
    # the action stays in flight and is executed again with the same key.
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.complete_action("buy:1", attempt=claim.attempts, now=at(2), result={"order": "o-77"})
        tx.append_batch(at(2), [event("filled:buy:1", "order_filled", order="o-77")])
        raise RuntimeError("crash")
    with store.read() as tx:
        assert tx.get_action("buy:1").status == "in_flight"  # type: ignore[union-attr]
        assert tx.get_event("filled:buy:1") is None

    with store.write() as tx:
        done = tx.complete_action("buy:1", attempt=claim.attempts, now=at(3), result={"order": "o-77"})
        tx.append_batch(at(3), [event("filled:buy:1", "order_filled", order="o-77")])
    assert (done.status, done.result, done.completed_at) == ("done", {"order": "o-77"}, at(3))
    with store.read() as tx:
        assert tx.get_event("filled:buy:1").payload == {"order": "o-77"}  # type: ignore[union-attr]


def test_an_action_completes_at_most_once(store: Store) -> None:
    add(store, "buy:1")
    with store.write() as tx:
        (claim,) = tx.claim_actions(worker="w1", now=at(1))
        tx.complete_action("buy:1", attempt=claim.attempts, now=at(2), result={})
    with pytest.raises(ActionNotClaimedError, match="it is done"), store.write() as tx:
        tx.complete_action("buy:1", attempt=claim.attempts, now=at(3), result={})
    with pytest.raises(UnknownActionError), store.write() as tx:
        tx.complete_action("buy:404", attempt=1, now=at(3))


def test_a_stale_claim_is_reclaimed_and_the_old_claimer_cannot_complete(store: Store) -> None:
    add(store, "buy:1")
    with store.write() as tx:
        (dead,) = tx.claim_actions(worker="dead", now=at(0))
    with store.write() as tx:
        assert tx.claim_actions(worker="w2", now=at(20), stale_after_s=30) == []  # not stale yet
        (retry,) = tx.claim_actions(worker="w2", now=at(30), stale_after_s=30)
    assert (retry.attempts, retry.claimed_by, retry.payload) == (2, "w2", {"order": "buy:1"})

    with pytest.raises(ActionNotClaimedError, match="attempt 2"), store.write() as tx:
        tx.complete_action("buy:1", attempt=dead.attempts, now=at(31), result={"from": "dead"})
    with store.write() as tx:
        done = tx.complete_action("buy:1", attempt=retry.attempts, now=at(32), result={"from": "w2"})
    assert done.result == {"from": "w2"}


def test_release_returns_an_action_to_pending_after_a_backoff(store: Store) -> None:
    add(store, "buy:1")
    with store.write() as tx:
        (claim,) = tx.claim_actions(worker="w1", now=at(0))
        released = tx.release_action(
            "buy:1", attempt=claim.attempts, now=at(1), error="503 from seller", not_before=at(60)
        )
    assert (released.status, released.error, released.claimed_by) == ("pending", "503 from seller", None)
    with store.write() as tx:
        assert tx.claim_actions(worker="w1", now=at(59)) == []
        (again,) = tx.claim_actions(worker="w1", now=at(60))
    assert again.attempts == 2


def test_failed_is_final(store: Store) -> None:
    add(store, "buy:1")
    with store.write() as tx:
        (claim,) = tx.claim_actions(worker="w1", now=at(0))
        failed = tx.complete_action(
            "buy:1", attempt=claim.attempts, now=at(1), failed=True, error="no capacity"
        )
        assert (failed.status, failed.error) == ("failed", "no capacity")
        assert tx.claim_actions(worker="w1", now=at(1000), stale_after_s=1) == []


def test_claims_can_be_limited_to_kinds(store: Store) -> None:
    with store.write() as tx:
        tx.add_actions([NewAction("boot:1", "boot", {}), NewAction("buy:1", "buy", {})], now=at(0))
        assert [a.action_id for a in tx.claim_actions(worker="w", now=at(0), kinds=["buy"])] == ["buy:1"]


def test_re_adding_the_same_action_is_a_noop_but_a_different_one_under_its_id_is_refused(
    store: Store,
) -> None:
    with store.write() as tx:
        assert tx.add_actions([action("buy:1", gpus=8)], now=at(0)) == [True]
        assert tx.add_actions([action("buy:1", gpus=8), action("buy:2")], now=at(1)) == [False, True]
    with pytest.raises(DuplicateActionError, match="buy:1"), store.write() as tx:
        tx.add_actions([action("buy:1", gpus=16)], now=at(2))
    with store.read() as tx:
        assert [a.payload for a in tx.list_actions()] == [{"gpus": 8}, {}]
