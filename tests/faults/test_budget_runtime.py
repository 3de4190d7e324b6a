"""Spend limits in the runtime: checked again inside the transaction that records the purchase (two
controllers racing for the last dollar on PostgreSQL and SQLite), the admin API, and a limit the engine has
not heard of yet refusing a purchase without calling the seller."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import httpx
from sqlalchemy import select

from scalar.engine import BuyCapacity, Controller, ControllerConfig
from scalar.engine.budget import BudgetLimit
from scalar.engine.events import OrderUpdated
from scalar.providers.builtin import schema as market_schema
from scalar.runtime import ControlPlane, budgets
from scalar.store import Store, make_engine
from scalar.store import budget as ledger
from tests.api.real_control_plane import real_api
from tests.engine.builders import at, filled, grant, market, prime_offer, spec, submit
from tests.runtime.helpers import Clock, audit, drive, job, settings_for


def _a_purchase() -> tuple[Controller, BuyCapacity]:
    c = Controller(ControllerConfig())
    [buy] = c.step(at(0), [market(prime_offer("2.50", gpus=8), book=None), *submit(spec("a", 8))])
    assert isinstance(buy, BuyCapacity)
    return c, buy  # $20/h


def test_two_controllers_cannot_both_spend_the_last_dollar(db_url: str) -> None:
    from scalar.store import migrate

    migrate(db_url)
    stores = [Store.open(db_url), Store.open(db_url)]
    try:
        with stores[0].write() as tx:
            ledger.replace_limits(tx.conn, budgets.to_rows([BudgetLimit("global", Decimal(30))]), at(0))
        c, buy = _a_purchase()
        barrier = threading.Barrier(2)
        refused: dict[str, bool] = {}

        def spend(i: int) -> None:
            mine = replace(buy, action_id=f"race-{i}")
            barrier.wait()
            with stores[i].write() as tx:
                result = budgets.gate(tx, c.state, [mine], at(1))
                time.sleep(0.2)  # hold the transaction open: the other one must wait, then see this row
            refused[mine.action_id] = mine.action_id in result

        threads = [threading.Thread(target=spend, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(refused.values()) == [False, True], refused  # $20 + $20 > $30: exactly one bought
        with stores[0].read() as tx:
            rows = {r.action_id: r for r in ledger.spend_since(tx.conn, at(1))}
        winner = next(k for k, v in refused.items() if not v)
        assert set(rows) == {winner}  # the refused one spans nothing
    finally:
        for s in stores:
            s.close()


def test_a_refused_purchase_stays_refused_while_the_engine_still_holds_it_in_flight(db_url: str) -> None:
    """Between a refusal and its REJECTED result reaching the engine (or across a ``kill -9`` there), the
    engine holds the purchase as an order in flight. The next gate must not stretch the refused row back
    into a commitment: it would count money never spent against the limit."""
    from scalar.store import migrate

    migrate(db_url)
    with Store.open(db_url) as store:
        with store.write() as tx:
            ledger.replace_limits(tx.conn, budgets.to_rows([BudgetLimit("global", Decimal(30))]), at(0))
        c, buy = _a_purchase()
        assert buy.action_id in c.state.orders  # in flight in the engine
        with store.write() as tx:
            assert budgets.gate(tx, c.state, [replace(buy, action_id="first")], at(1)) == {}
        with store.write() as tx:
            assert buy.action_id in budgets.gate(tx, c.state, [buy], at(1))  # $20 + $20 > $30
        with store.write() as tx:
            budgets.gate(tx, c.state, [replace(buy, action_id="later")], at(2))
        with store.read() as tx:
            rows = {r.action_id: r for r in ledger.all_spend(tx.conn)}
        assert rows[buy.action_id].ends_at == rows[buy.action_id].starts_at
        assert rows["first"].ends_at > rows["first"].starts_at


def test_a_filled_purchase_counts_at_the_price_granted_not_its_limit(db_url: str) -> None:
    """A spot order's limit is over the price last seen (``spot_limit_headroom``); once the seller fills it,
    the recorded commitment is the block's granted rate, from the next check on."""
    from scalar.store import migrate

    migrate(db_url)
    with Store.open(db_url) as store:
        with store.write() as tx:
            ledger.replace_limits(tx.conn, budgets.to_rows([BudgetLimit("global", Decimal(100))]), at(0))
        c, buy = _a_purchase()
        with store.write() as tx:
            assert budgets.gate(tx, c.state, [buy], at(0)) == {}
        # The seller fills it at $2.00/GPU-h, under the $2.50 limit: 8 GPUs, $16/h.
        order = filled(buy, at(30)).order
        block = replace(grant(buy, at(30)), price_per_gpu_hour=Decimal("2.00"))
        c.step(at(30), [OrderUpdated("fill", buy.action_id, replace(order, block=block))])
        with store.write() as tx:
            budgets.gate(tx, c.state, [replace(buy, action_id="next")], at(31))
        with store.read() as tx:
            rows = {r.action_id: r for r in ledger.all_spend(tx.conn)}
        assert rows[buy.action_id].usd_per_hour == Decimal(16)
        assert rows["next"].usd_per_hour == Decimal(20)  # not filled yet: at its limit


def test_a_limit_the_engine_has_not_heard_of_refuses_in_the_transaction_and_nothing_is_bought(
    db_url: str, tmp_path: Path
) -> None:
    clock = Clock()
    plane = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    plane.open()
    try:
        assert plane.store is not None
        with plane.store.write() as tx:  # as another controller or a PUT not yet consumed would leave it
            ledger.replace_limits(tx.conn, budgets.to_rows([BudgetLimit("global", Decimal("0.01"))]), clock())
        plane.submit_job(job(gpus=1, duration=30))
        drive([plane], clock, 20)
        with plane.store.read() as tx:
            buys = [a for a in tx.list_actions(limit=1000) if a.kind == "BuyCapacity"]
        assert buys and all(budgets.REFUSED in a.payload for a in buys)
        assert all(a.payload[budgets.REFUSED]["code"] == "budget_exceeded" for a in buys)
        engine = make_engine(db_url)
        try:
            with engine.connect() as conn:
                assert conn.execute(select(market_schema.orders)).all() == []  # the seller was never called
        finally:
            engine.dispose()
        [only] = plane.list_jobs()
        assert only.state == "PENDING"
    finally:
        plane.stop()
    audit(db_url, plane.settings.controller, settled=True)


def test_admin_api_sets_limits_and_a_job_waits_with_budget_exceeded(sqlite_url: str, tmp_path: Path) -> None:
    with real_api(sqlite_url, tmp_path) as (url, _plane), httpx.Client(base_url=url, timeout=30) as client:
        first = client.get("/budgets")
        assert first.status_code == 200, first.text
        assert first.json()["limits"] == []
        bad = client.put("/budgets", json={"limits": [{"scope": "global", "usd_per_hour": "-5"}]})
        assert bad.status_code == 422 and "usd_per_hour" in bad.text
        bad = client.put("/budgets", json={"limits": [{"scope": "a"}, {"scope": "a"}]})
        assert bad.status_code == 422 and "limits[1].scope" in bad.text
        ok = client.put("/budgets", json={"limits": [{"scope": "global", "usd_per_hour": "0.5"}]})
        assert ok.status_code == 200, ok.text
        assert ok.json()["limits"] == [
            {"scope": "global", "usd_per_hour": "0.5", "usd_per_period": None, "period": "day"}
        ]
        job_id = client.post(
            "/jobs", json={"tier": "FAST", "gpu_count": 8, "expected_duration_sec": 60}
        ).json()["id"]
        deadline = time.monotonic() + 30
        while True:
            j = client.get(f"/jobs/{job_id}").json()
            if j.get("reason_code") == "budget_exceeded":
                break
            assert time.monotonic() < deadline, j
            time.sleep(0.2)
        assert "limit is $0.50/h" in j["reason"]
        usage = client.get("/budgets").json()["usage"]
        assert usage[0]["scope"] == "global" and usage[0]["committed_usd_per_hour"] == "0.00"
