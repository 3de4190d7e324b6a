"""The action executor: provider errors, retries with backoff, failures told to the controller in its own
terms, and node events about a purchase not yet recorded (parked until it is)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from scalar.domain.market import CapacityRequest
from scalar.domain.tier import Tier
from scalar.providers.base import ProviderError
from scalar.providers.sim import BuiltinMarket
from scalar.runtime import ControlPlane
from scalar.runtime.feed import FEED_PREFIX
from tests.runtime.helpers import PROVIDERS, Clock, Crash, Seller, audit, drive, job, settings_for


@pytest.fixture
def setup(db_url: str, tmp_path: Path) -> Iterator[tuple[Clock, ControlPlane, dict[str, Seller]]]:
    clock = Clock()
    settings = settings_for(db_url, tmp_path, retry_backoff_s=4.0, park_ttl_s=60.0, action_stale_after_s=30.0)
    market = BuiltinMarket(db_url, settings.market_config(), providers=PROVIDERS)
    sellers = {name: Seller(p) for name, p in market.providers().items()}
    plane = ControlPlane(settings, clock=clock, providers=sellers)  # type: ignore[arg-type]
    yield clock, plane, sellers
    plane.stop()
    market.close()


def fail_every_buy(sellers: dict[str, Seller], why: str, *, retryable: bool) -> None:
    """The next purchase fails wherever the engine sends it (a short 8-GPU job goes to an hourly seller, a
    block-filling one to SFCompute: engine/cost_band.py)."""
    for name, seller in sellers.items():
        seller.fail_buy = ProviderError(name, why, retryable=retryable)


def buy_actions(plane: ControlPlane) -> list[Any]:
    with plane.store.read() as tx:  # type: ignore[union-attr]
        return [a for a in tx.list_actions() if a.kind == "BuyCapacity"]


def test_a_retryable_error_puts_the_action_back_with_a_backoff(setup: Any, db_url: str) -> None:
    clock, plane, sellers = setup
    plane.run_once()
    plane.submit_job(job(8, 20))
    fail_every_buy(sellers, "503 try later", retryable=True)
    clock.advance(1)
    plane.run_once()
    assert plane.run_executor_once() == 1
    (action,) = buy_actions(plane)
    assert (action.status, action.attempts) == ("pending", 1)
    assert action.error in {f"{name}: 503 try later" for name in sellers}
    assert action.not_before == clock.now + timedelta(seconds=4)
    assert plane.run_executor_once() == 0  # not before the backoff
    clock.advance(4)
    assert plane.run_executor_once() == 1
    (action,) = buy_actions(plane)
    assert (action.status, action.attempts, action.result["state"]) == ("done", 2, "filled")
    drive([plane], clock, 40)
    assert audit(db_url, plane.settings.controller).states() == {"SUCCEEDED": 1}


def test_a_refused_purchase_becomes_a_rejected_order_and_the_group_backs_off(setup: Any) -> None:
    clock, plane, sellers = setup
    plane.run_once()
    submitted = plane.submit_job(job(8, 20))
    fail_every_buy(sellers, "account suspended", retryable=False)
    clock.advance(1)
    plane.run_once()
    plane.run_executor_once()
    first, *_ = buy_actions(plane)
    assert first.status == "failed" and first.error in {f"{name}: account suspended" for name in sellers}
    with plane.store.read() as tx:  # type: ignore[union-attr]
        order = tx.get_projection("orders", first.action_id)
        group = tx.get_projection("scale_groups", order.data["group"])  # type: ignore[union-attr]
    assert order is not None and order.state == "rejected"
    assert any("account suspended" in d.message for d in plane.story(first.action_id))
    assert group is not None and group.state == "backoff"
    drive([plane], clock, 40)  # routed elsewhere (or retried after the backoff): it still gets done
    assert plane.get_job(submitted.id).state in ("RUNNING", "SUCCEEDED")  # type: ignore[union-attr]


def test_a_start_that_cannot_happen_sends_the_job_back_to_pending(setup: Any) -> None:
    clock, plane, sellers = setup
    plane.run_once()
    submitted = plane.submit_job(job(1, 20))
    for seller in sellers.values():
        seller.fail_start = ProviderError(seller.name, "node is gone", retryable=False)
    for _ in range(30):
        drive([plane], clock, 1)
        if plane.get_job(submitted.id).preemptions:  # type: ignore[union-attr]
            break
    story = [d.code for d in plane.story(submitted.id)]
    assert "preempted" in story
    drive([plane], clock, 40)
    assert plane.get_job(submitted.id).state == "SUCCEEDED"  # type: ignore[union-attr]


def test_node_events_of_an_unrecorded_purchase_wait_for_it(setup: Any, db_url: str) -> None:
    clock, plane, sellers = setup
    plane.run_once()
    plane.submit_job(job(8, 20))
    for s in sellers.values():
        s.crash_after_buy = True
    clock.advance(1)
    plane.run_once()
    with pytest.raises(Crash):  # bought; the result was never recorded
        plane.run_executor_once()
    for s in sellers.values():
        s.crash_after_buy = False
    [seller] = [name for name, s in sellers.items() if s.buys]
    drive([plane], clock, 5)  # the market reports the new nodes booting: the controller does not know them
    with plane.store.read() as tx:  # type: ignore[union-attr]
        parked = tx.get_state(FEED_PREFIX + seller)
        node_events = [e for e in tx.read_events_page() if e.kind == "NodeReported"]
    assert parked is not None and parked["parked"] and not node_events

    plane.run_once()
    clock.advance(plane.settings.action_stale_after_s)  # the stale claim is taken again, same key
    drive([plane], clock, 40)
    with plane.store.read() as tx:  # type: ignore[union-attr]
        assert tx.get_state(FEED_PREFIX + seller)["parked"] == []  # type: ignore[index]
        nodes = tx.list_projection("nodes")
    assert nodes and {n.state for n in nodes} <= {"ready", "terminated"}  # known; an idle hourly node goes
    result = audit(db_url, plane.settings.controller)
    assert result.states() == {"SUCCEEDED": 1}
    assert sellers[seller].buys[0] == sellers[seller].buys[1]  # asked twice, bought once


def test_events_about_a_node_nobody_bought_are_delivered_after_the_park_ttl(setup: Any) -> None:
    clock, plane, sellers = setup
    market = sellers["prime"].inner.market
    plane.run_once()
    # A purchase made behind the controller's back (another system on the same account).
    offer = next(o for o in sellers["prime"].list_offers(clock.now) if o.gpu_count == 1)
    request = CapacityRequest("prime", offer.instance_type, 1, 3600 * 24, None, Tier.FAST, offer.gpu_model, 1)
    order = market.buy(request, "someone-else", clock.now)
    assert order.block is not None
    drive([plane], clock, 30)
    with plane.store.read() as tx:  # type: ignore[union-attr]
        assert tx.get_state(FEED_PREFIX + "prime")["parked"]  # type: ignore[index]
    drive([plane], clock, 35)
    with plane.store.read() as tx:  # type: ignore[union-attr]
        assert tx.get_state(FEED_PREFIX + "prime")["parked"] == []  # type: ignore[index]
        notes = tx.story(order.block.node_ids[0])
    assert notes and notes[0].code == "unknown_node"
