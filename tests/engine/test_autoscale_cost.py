"""Procurement's ranking is recomputed only when the offers or the demand changed, and routing is skipped
when there is nothing to route; neither changes a decision (an idle control plane steps every second)."""

from __future__ import annotations

from typing import Any

import pytest

from scalar.engine import Controller, autoscaler
from tests.engine.builders import at, market, prime_offer, sf_offer, spec, submit, tick
from tests.engine.test_workloads import snapshot
from tests.engine.world import World


def test_the_ranking_is_kept_while_offers_and_demand_stay_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = autoscaler.rank_offers

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(autoscaler, "rank_offers", counting)
    c = Controller()
    c.step(at(0), [market(sf_offer("2.00"), prime_offer("2.50"))])
    ranked = len(calls)
    priorities = {g.name: g.priority for g in c.scale_groups()}
    assert ranked > 0 and all(p is not None for p in priorities.values())
    c.step(at(1), [tick()])
    c.step(at(2), [tick()])
    assert len(calls) == ranked  # nothing changed: no re-ranking, same priorities
    assert {g.name: g.priority for g in c.scale_groups()} == priorities
    c.step(at(3), submit(spec("j1", 16)))
    assert len(calls) > ranked  # the demand changed
    ranked = len(calls)
    c.step(at(4), [market(sf_offer("2.40"), prime_offer("2.50"))])
    assert len(calls) > ranked  # the offers changed


def test_a_run_with_the_shortcuts_equals_a_run_that_ranks_every_step() -> None:
    world = World(seed=21, steps=150)
    fast = Controller()
    world.run(fast)
    assert sum(len(a) for a in world.actions) > 30
    slow = Controller()
    actions = []
    for now, events in world.log:
        slow.state.priorities_key = None  # forget the memo: rank again
        actions.append(slow.step(now, events))
    assert actions == world.actions
    assert snapshot(slow)[:5] == snapshot(fast)[:5]
