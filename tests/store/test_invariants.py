"""Invariants under random sequences of appends, claims, completions, releases and crashes:
seqs strictly increase, no event is lost or stored twice, every action is completed at most once, and the
outbox matches a model of its lifecycle exactly."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete

from scalar.store import ActionNotClaimedError, NewAction, Store
from scalar.store.schema import metadata
from tests.store.timeline import at, event

STALE_AFTER_S = 5.0
STIMULI = [f"s{i}" for i in range(8)]


class Crash(Exception):
    pass


append_op = st.tuples(
    st.just("append"), st.lists(st.sampled_from(STIMULI), min_size=1, max_size=4), st.booleans()
)
claim_op = st.tuples(st.just("claim"), st.integers(1, 3), st.booleans())
finish_op = st.tuples(st.just("finish"), st.integers(-3, 3), st.sampled_from(["done", "failed", "release"]))
tick_op = st.tuples(st.just("tick"), st.integers(1, 10))
operations = st.lists(st.one_of(append_op, claim_op, finish_op, tick_op), min_size=1, max_size=25)


@dataclass
class Model:
    now: float = 0.0
    seq_of: dict[str, int] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # action ids in creation order
    status: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    claimed_at: dict[str, float] = field(default_factory=dict)
    completions: dict[str, int] = field(default_factory=dict)
    tokens: list[tuple[str, int]] = field(default_factory=list)  # every claim ever handed out

    def claimable(self, limit: int, stale: bool) -> list[str]:
        def ok(a: str) -> bool:
            if self.status[a] == "pending":
                return True
            return stale and self.status[a] == "in_flight" and self.claimed_at[a] <= self.now - STALE_AFTER_S

        return [a for a in self.order if ok(a)][:limit]


def wipe(store: Store) -> None:
    with store.write() as tx:
        for table in reversed(metadata.sorted_tables):
            tx.conn.execute(delete(table))


def apply(store: Store, model: Model, op: tuple) -> None:  # type: ignore[type-arg]
    kind = op[0]
    now = at(model.now)
    if kind == "tick":
        model.now += op[1]
    elif kind == "append":
        stimuli, crash = op[1], op[2]
        try:
            with store.write() as tx:
                appended = tx.append_batch(now, [event(s, t=model.now) for s in stimuli])
                new = [e.stimulus_id for e in appended.new_events]
                tx.add_actions(
                    [NewAction(f"act:{s}", "buy", {"for": s}) for s in new],
                    now=now,
                    created_seq=appended.last_seq,
                    batch_id=appended.batch_id,
                )
                if crash:
                    raise Crash
        except Crash:
            return
        expected_new = [s for s in dict.fromkeys(stimuli) if s not in model.seq_of]
        assert new == expected_new
        for r in appended.results:
            if r.stimulus_id in model.seq_of:
                assert r.seq == model.seq_of[r.stimulus_id] and not r.created
        for s in new:
            model.seq_of[s] = next(r.seq for r in appended.results if r.stimulus_id == s)
            model.order.append(f"act:{s}")
            model.status[f"act:{s}"] = "pending"
            model.attempts[f"act:{s}"] = 0
    elif kind == "claim":
        limit, stale = op[1], op[2]
        expected = model.claimable(limit, stale)
        with store.write() as tx:
            claimed = tx.claim_actions(
                worker="w", now=now, limit=limit, stale_after_s=STALE_AFTER_S if stale else None
            )
        assert [a.action_id for a in claimed] == expected
        for a in claimed:
            model.attempts[a.action_id] += 1
            assert a.attempts == model.attempts[a.action_id]
            model.status[a.action_id] = "in_flight"
            model.claimed_at[a.action_id] = model.now
            model.tokens.append((a.action_id, a.attempts))
    elif kind == "finish":
        if not model.tokens:
            return
        action_id, attempt = model.tokens[op[1] % len(model.tokens)]
        how = op[2]
        valid = model.status[action_id] == "in_flight" and model.attempts[action_id] == attempt
        try:
            with store.write() as tx:
                if how == "release":
                    tx.release_action(action_id, attempt=attempt, now=now)
                else:
                    tx.complete_action(action_id, attempt=attempt, now=now, failed=how == "failed")
                    tx.append_batch(now, [event(f"result:{action_id}:{attempt}", "result", t=model.now)])
        except ActionNotClaimedError:
            assert not valid
            return
        assert valid
        if how == "release":
            model.status[action_id] = "pending"
        else:
            model.status[action_id] = how
            model.completions[action_id] = model.completions.get(action_id, 0) + 1
            model.seq_of[f"result:{action_id}:{attempt}"] = -1  # seq checked by order below


def check(store: Store, model: Model) -> None:
    stored = list(store.read_events(page_size=7))
    seqs = [e.seq for e in stored]
    assert seqs == sorted(set(seqs)), "seqs strictly increasing"
    assert sorted(e.stimulus_id for e in stored) == sorted(model.seq_of), "no event lost or duplicated"
    for e in stored:
        if model.seq_of[e.stimulus_id] != -1:
            assert e.seq == model.seq_of[e.stimulus_id]
    with store.read() as tx:
        actions = tx.list_actions(limit=1000)
    assert [a.action_id for a in actions] == model.order
    for a in actions:
        assert (a.status, a.attempts) == (model.status[a.action_id], model.attempts[a.action_id])
    assert all(n == 1 for n in model.completions.values()), "every action completed at most once"
    # Completed actions have exactly one result event recorded with them.
    results = [e.stimulus_id for e in stored if e.kind == "result"]
    assert sorted(r.rsplit(":", 1)[0].removeprefix("result:") for r in results) == sorted(model.completions)


@pytest.mark.slow
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_random_histories_keep_the_log_and_outbox_invariants(store: Store, ops: list[tuple]) -> None:  # type: ignore[type-arg]
    wipe(store)
    model = Model()
    for op in ops:
        apply(store, model, op)
        check(store, model)
