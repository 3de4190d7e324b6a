"""``kill -9`` of a real ``scalar controller`` during purchases, under a spend limit: after every kill and
at the end, from the database alone, nothing is lost or bought twice (``audit``), every purchase has exactly
one spend-ledger row written with it, and the committed rate never went over the limit."""

from __future__ import annotations

import random
import signal
import time
from decimal import Decimal
from pathlib import Path

import pytest

from scalar.engine.budget import GLOBAL, rate_at
from scalar.runtime import ControlPlane, budgets, load_settings
from scalar.store import Store
from scalar.store import budget as ledger
from tests.runtime.helpers import audit
from tests.runtime.test_crash import CONFIG, spawn

pytestmark = pytest.mark.slow  # kill -9 of real controller processes, many times

ROUNDS = 3
LIMIT = Decimal(60)  # USD per hour: about four 8-GPU nodes at the built-in market's prices
BUDGETS = f"""
[budgets]
[[budgets.limits]]
scope = "global"
usd_per_hour = {LIMIT}
"""


def check_ledger(db_url: str) -> int:
    """Every purchase stored has one ledger row, a refused one spans nothing, and at the moment each
    purchase was made the committed rate (over the ledger) was within the limit."""
    with Store.open(db_url) as store, store.read() as tx:
        buys = {a.action_id: a for a in tx.list_actions(limit=1_000_000) if a.kind == "BuyCapacity"}
        rows = {r.action_id: r for r in ledger.all_spend(tx.conn)}
    assert set(buys) == set(rows), "a purchase without its ledger row, or a row without a purchase"
    for action_id, action in buys.items():
        if budgets.REFUSED in action.payload:
            assert rows[action_id].ends_at == rows[action_id].starts_at
    spans = [budgets.commitment_of(r) for r in rows.values() if r.ends_at > r.starts_at]
    for r in rows.values():
        assert rate_at(spans, GLOBAL, r.starts_at) <= LIMIT, (
            r.action_id,
            rate_at(spans, GLOBAL, r.starts_at),
        )
    return len(buys)


def test_kill_9_during_purchases_keeps_the_ledger_and_the_limit(db_url: str, tmp_path: Path) -> None:
    config = tmp_path / "scalar.toml"
    config.write_text(CONFIG + BUDGETS)
    settings = load_settings(config, {"data_dir": tmp_path, "database_url": db_url}, {})
    client = ControlPlane(settings)  # submits only, as the API would
    rng = random.Random(5)
    submitted: list[str] = []
    with (tmp_path / "controller.log").open("ab") as log:
        try:
            for _ in range(ROUNDS):
                proc = spawn(config, db_url, tmp_path, log)
                deadline = time.monotonic() + rng.uniform(2.0, 4.0)
                while time.monotonic() < deadline:
                    fields = {
                        "tier": "FAST",
                        "gpu_count": rng.choice((1, 2, 8, 8)),
                        "expected_duration_sec": 2,
                    }
                    submitted.append(client.submit_job(fields).id)
                    time.sleep(rng.uniform(0.05, 0.2))
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
                # replayed with the config the controller steps with (the market's clock included)
                audit(db_url, client.settings.controller, settled=False)
                check_ledger(db_url)
            proc = spawn(config, db_url, tmp_path, log)
            try:
                waiting = set(submitted)
                deadline = time.monotonic() + 150
                while waiting and time.monotonic() < deadline:
                    time.sleep(0.5)
                    waiting -= {j.id for j in client.list_jobs(limit=100_000) if j.state == "SUCCEEDED"}
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
        finally:
            client.stop()
    tail = (tmp_path / "controller.log").read_text(errors="replace")[-3000:]
    assert not waiting, f"{len(waiting)} jobs never finished:\n{tail}"
    result = audit(db_url, client.settings.controller)
    assert result.states() == {"SUCCEEDED": len(submitted)}
    assert check_ledger(db_url) >= 2
