"""Several buyers at once: threads and processes on one market database (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import func, select

from scalar.domain.market import Order, OrderState
from scalar.providers.builtin import schema
from scalar.providers.sim import BuiltinMarket, MarketConfig
from tests.conftest import REPO
from tests.providers.conftest_market import T0, market_url, open_market, sfc_request

__all__ = ["market_url", "open_market"]

Open = Callable[..., BuiltinMarket]


def _race(count: int, work: Callable[[int], object]) -> list[object]:
    barrier = threading.Barrier(count)
    results: list[object] = [None] * count

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = work(index)
        except Exception as error:  # reported by the assertions below
            results[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def _scalar(market: BuiltinMarket, query: object) -> int:
    with market.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())  # type: ignore[call-overload]


def test_threads_racing_with_one_key_make_one_order_and_one_block(open_market: Open, market_url: str) -> None:
    markets = [open_market(MarketConfig(seed=2))] + [open_market(url=market_url) for _ in range(3)]

    results = _race(4, lambda i: markets[i].provider("sfcompute").buy(sfc_request(nodes=2), "race-key", T0))

    assert all(isinstance(result, Order) for result in results), results
    first = results[0]
    assert isinstance(first, Order) and first.state is OrderState.FILLED
    assert all(result == first for result in results)
    market = markets[0]
    assert _scalar(market, select(func.count()).select_from(schema.orders)) == 1
    assert _scalar(market, select(func.count()).select_from(schema.blocks)) == 1
    assert _scalar(market, select(func.count()).select_from(schema.nodes)) == 2
    assert _scalar(market, select(func.sum(schema.fills.c.quantity_gpus))) == 16


def test_concurrent_buyers_never_oversell_the_book(open_market: Open, market_url: str) -> None:
    markets = [open_market(MarketConfig(seed=2))] + [open_market(url=market_url) for _ in range(3)]
    book = markets[0].provider("sfcompute").orderbook("8xH100", T0)
    assert book is not None
    total_nodes = sum(a.quantity_gpus for a in book.asks) // 8
    each = total_nodes // 3  # three of these fit, four do not

    results = _race(4, lambda i: markets[i].provider("sfcompute").buy(sfc_request(nodes=each), f"k{i}", T0))

    states = Counter(result.state for result in results if isinstance(result, Order))
    assert states == {OrderState.FILLED: 3, OrderState.REJECTED: 1}, results
    after = markets[0].provider("sfcompute").orderbook("8xH100", T0)
    assert after is not None
    assert sum(a.quantity_gpus for a in after.asks) == (total_nodes - 3 * each) * 8


def test_two_consumers_polling_at_once_see_each_move_exactly_once(open_market: Open, market_url: str) -> None:
    one = open_market(MarketConfig(seed=3))
    two = open_market(url=market_url)
    one.provider("sfcompute").buy(sfc_request(nodes=4), "poll", T0)

    def poll(index: int) -> list[object]:
        market = (one, two)[index]
        cursor, seen = 0, list[object]()
        for second in range(0, 20 * 60, 15):
            events, cursor = market.events_since(cursor, T0 + timedelta(seconds=second))
            seen.extend(events)
        return seen

    first, second = _race(2, poll)
    assert first == second
    assert isinstance(first, list) and len(first) == 16  # 4 nodes x 4 boot states
    assert len({(e.node_id, e.state) for e in first}) == 16


SECOND_PROCESS = """
import json, sys
from datetime import datetime
from decimal import Decimal
from scalar.domain.market import CapacityRequest
from scalar.domain.tier import Tier
from scalar.providers.sim import BuiltinMarket
market = BuiltinMarket(sys.argv[1])
request = CapacityRequest("sfcompute", "8xH100", 2, 4 * 3600, Decimal("9"), Tier.FAST)
order = market.provider("sfcompute").buy(request, "cross-process", datetime.fromisoformat(sys.argv[2]))
print(json.dumps({"order_id": order.order_id, "nodes": list(order.block.node_ids), "seed": market.seed}))
market.close()
"""


def test_another_process_buying_with_the_same_key_gets_the_same_order(
    open_market: Open, market_url: str
) -> None:
    market = open_market(MarketConfig(seed=17))
    order = market.provider("sfcompute").buy(sfc_request(nodes=2, limit="9"), "cross-process", T0)
    assert order.block is not None

    done = subprocess.run(
        [sys.executable, "-c", SECOND_PROCESS, market_url, (T0 + timedelta(minutes=1)).isoformat()],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"order_id": order.order_id, "nodes": list(order.block.node_ids), "seed": 17}
    assert _scalar(market, select(func.count()).select_from(schema.blocks)) == 1
