"""Two controllers on one database, with injected time: exactly one acts; when it dies the other takes
over after the lease's TTL, rebuilds by replay, re-executes what was in flight with the same keys, and the
invariants hold. A deposed leader that wakes up is fenced and steps down.

Primary on PostgreSQL (the multi-controller deployment); the same tests run on SQLite too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from scalar.providers.sim import BuiltinMarket
from scalar.runtime import ControlPlane
from scalar.store import NotLeaderError
from scalar.store.schema import batches
from tests.runtime.helpers import PROVIDERS, Clock, Crash, Seller, audit, drive, job, settings_for


@pytest.fixture
def world(db_url: str, tmp_path: Path) -> Iterator[tuple[Clock, list[ControlPlane], list[dict[str, Seller]]]]:
    clock = Clock()
    planes, sellers, markets = [], [], []
    for _ in range(2):
        settings = settings_for(db_url, tmp_path)
        market = BuiltinMarket(db_url, settings.market_config(), providers=PROVIDERS)
        faces = {name: Seller(p) for name, p in market.providers().items()}
        planes.append(ControlPlane(settings, clock=clock, providers=faces))  # type: ignore[arg-type]
        sellers.append(faces)
        markets.append(market)
    yield clock, planes, sellers
    for plane in planes:
        plane.stop()
    for market in markets:
        market.close()


def writers(plane: ControlPlane) -> set[str | None]:
    with plane.store.read() as tx:  # type: ignore[union-attr]
        return {row.holder for row in tx.conn.execute(select(batches.c.holder).distinct())}


@pytest.mark.slow  # waits out a leader lease
def test_exactly_one_acts_and_the_standby_takes_over_after_the_ttl(world: Any, db_url: str) -> None:
    clock, (a, b), _ = world
    a.run_once()
    b.run_once()
    assert a.is_leader and not b.is_leader
    ids = [b.submit_job(job(2, 40)).id for _ in range(3)]  # the standby accepts submissions too
    for _ in range(20):
        drive([a, b], clock, 1)
        assert [a.is_leader, b.is_leader] == [True, False]
    assert writers(a) == {a.settings.holder}
    assert b.health().role == "follower" and b.health().lease_holder == a.settings.holder
    epoch = a.health().epoch

    # a dies: it stops renewing. Within the TTL b still waits; after it, b leads at the next epoch.
    drive([b], clock, 8)
    assert not b.is_leader
    drive([b], clock, 4)
    assert b.is_leader and b.health().epoch == epoch + 1
    more = [b.submit_job(job(1, 30)).id for _ in range(2)]
    drive([b], clock, 90)
    assert writers(b) == {a.settings.holder, b.settings.holder}
    result = audit(db_url, b.settings.controller)
    assert {result.jobs[i] for i in ids + more} == {"SUCCEEDED"}

    # a wakes up: it may not write under its old epoch, and it steps down.
    assert a.core.leader.controller is not None  # type: ignore[union-attr]  # still believes it leads
    with pytest.raises(NotLeaderError):
        a.core.leader.tick(clock.now)  # type: ignore[union-attr]
    assert a.core.leader.controller is None and not a.is_leader  # type: ignore[union-attr]
    a.run_once()
    assert not a.is_leader and b.is_leader


def test_a_purchase_made_just_before_the_leader_died_is_not_made_again(world: Any, db_url: str) -> None:
    clock, (a, b), (sellers_a, sellers_b) = world
    a.run_once()
    a.submit_job(job(8, 30))
    for seller in sellers_a.values():
        seller.crash_after_buy = True
    clock.advance(1)
    a.run_once()  # decides to buy (the action is in the outbox)
    with pytest.raises(Crash):
        a.run_executor_once()  # bought at the seller, died before recording it
    (key,) = [k for s in sellers_a.values() for k in s.buys]
    with a.store.read() as tx:  # type: ignore[union-attr]
        assert tx.get_action(key).status == "in_flight"  # type: ignore[union-attr]

    drive([b], clock, 12)  # b takes over and executes the same action with the same key
    assert b.is_leader
    assert [k for s in sellers_b.values() for k in s.buys] == [key]
    drive([b], clock, 60)
    result = audit(db_url, b.settings.controller)
    assert [n for (_, k), n in result.market_orders.items() if k == key] == [1]
    assert result.buy_actions[key] == "done"
    assert result.states() == {"SUCCEEDED": 1}


def test_a_clean_stop_hands_over_at_once(world: Any) -> None:
    clock, (a, b), _ = world
    a.run_once()
    b.run_once()
    assert a.is_leader
    a.stop()
    clock.advance(0.5)
    b.run_once()
    assert b.is_leader


def test_a_leader_replaying_a_long_log_keeps_its_lease(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import scalar.runtime.leader as leader_module

    clock = Clock()
    first = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    first.run_once()
    first.submit_job(job(1, 30))
    drive([first], clock, 40)  # a log of some 40 steps
    first.stop()
    replaying = ControlPlane(settings_for(db_url, tmp_path, lease_renew_s=1e-4), clock=clock)
    standby = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    real = leader_module.event_from_dict
    standby_led: list[bool] = []

    def slow_decode(payload: Any) -> Any:  # each replayed event takes a second of (injected) time
        clock.advance(1)
        standby.run_once()
        standby_led.append(standby.is_leader)
        return real(payload)

    try:
        replaying.open()
        standby.open()
        monkeypatch.setattr(leader_module, "event_from_dict", slow_decode)
        assert replaying.core.leader.acquire(clock.now)  # type: ignore[union-attr]  # acquire, then replay
        monkeypatch.setattr(leader_module, "event_from_dict", real)
        assert len(standby_led) > 30 and not any(standby_led)  # well past the 10 s TTL, never taken over
        replaying.run_once()
        assert replaying.is_leader
    finally:
        replaying.stop()
        standby.stop()
