"""Sell orders on a block's remaining time in the built-in market: partial fills against the seeded bids,
the sold nodes end at the cut, idempotency, and refusals that say what was wrong."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal

import pytest

from scalar.domain.market import NodeState
from scalar.domain.orderbook import optimal_ask
from scalar.providers.base import ProviderError
from scalar.providers.sim import BuiltinMarket, MarketConfig
from tests.providers.conftest_market import (
    T0,
    drain,
    market_url,
    open_market,
    open_sqlite_market,
    sfc_request,
)

__all__ = ["market_url", "open_market", "open_sqlite_market"]

Open = Callable[..., BuiltinMarket]


def _bought(market: BuiltinMarket, nodes: int, hours: int = 10) -> tuple[str, tuple[str, ...]]:
    order = market.provider("sfcompute").buy(sfc_request(nodes=nodes, hours=hours), f"buy-{nodes}", T0)
    assert order.block is not None
    return order.block.block_id, order.block.node_ids


def test_a_sale_fills_the_nodes_the_bids_take_and_those_nodes_end_at_the_cut(open_market: Open) -> None:
    market = open_market(MarketConfig(seed=6))
    sfc = market.provider("sfcompute")
    block_id, node_ids = _bought(market, nodes=4)
    at = T0 + timedelta(hours=2, minutes=30)
    _, cursor = drain(market, at)
    book = sfc.orderbook("8xH100", at)
    assert book is not None and book.bids
    cut = at.replace(minute=0) + timedelta(hours=1)
    # An ask at the second-highest bid: the bids at or above it take some of the 4 nodes, not necessarily all.
    bids = sorted(book.bids, key=lambda b: b.price_per_gpu_hour, reverse=True)
    price = bids[1].price_per_gpu_hour
    depth = sum(b.quantity_gpus for b in bids if b.price_per_gpu_hour >= price)
    fill = sfc.sell(block_id, node_ids, cut, price, "sell-1", at)

    assert fill.nodes_offered == 4
    assert len(fill.node_ids_sold) == min(4, depth // 8)
    assert set(fill.node_ids_sold) <= set(node_ids)
    assert fill.cut == cut and fill.price_per_gpu_hour == price
    bought = sfc.get_order("buy-4", at)
    assert bought is not None and bought.block is not None
    end = bought.block.end_time
    hours = int((end - cut).total_seconds() // 3600)
    assert fill.hours == hours
    assert fill.proceeds == price * 8 * len(fill.node_ids_sold) * hours
    assert sfc.sell(block_id, node_ids, cut, price, "sell-1", at) == fill  # the same key: the same answer
    assert sfc.get_sale("sell-1", at) == fill

    # The sold nodes terminate at the cut; the unsold ones run to the block's end.
    events, _ = sfc.events_since(cursor, end + timedelta(minutes=1))
    ended = {e.node_id: e.at for e in events if e.state is NodeState.TERMINATED}
    for node_id in node_ids:
        assert ended[node_id] == (cut if node_id in fill.node_ids_sold else end)


def test_bids_taken_by_one_sale_are_not_sold_twice_in_the_same_hour(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=3))
    sfc = market.provider("sfcompute")
    block_id, node_ids = _bought(market, nodes=8, hours=30)
    at = T0 + timedelta(minutes=20)
    book = sfc.orderbook("8xH100", at)
    assert book is not None and book.bids
    price = min(b.price_per_gpu_hour for b in book.bids)
    depth = sum(b.quantity_gpus for b in book.bids)
    cut = T0 + timedelta(hours=10)
    first = sfc.sell(block_id, node_ids[:4], cut, price, "a", at)
    second = sfc.sell(block_id, node_ids[4:], cut, price, "b", at)
    sold_gpus = first.gpus_sold + second.gpus_sold
    assert sold_gpus <= depth
    assert first.gpus_sold == min(32, depth // 8 * 8)
    assert second.gpus_sold == min(32, (depth - first.gpus_sold) // 8 * 8)
    # The mirror's ask never exceeds the best bid and the chosen level's depth covers the GPUs offered.
    ask = optimal_ask(book.bids, 8)
    assert ask.price_per_gpu_hour is not None
    assert ask.price_per_gpu_hour <= max(b.price_per_gpu_hour for b in book.bids)


def test_bad_sell_orders_are_refused_with_what_was_wrong(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=1))
    sfc = market.provider("sfcompute")
    block_id, node_ids = _bought(market, nodes=2)
    other_id, other_nodes = _bought(market, nodes=1)
    at = T0 + timedelta(minutes=30)
    cut = T0 + timedelta(hours=5)
    price = Decimal("1.00")
    with pytest.raises(ProviderError, match="not a node of block"):
        sfc.sell(block_id, other_nodes, cut, price, "x1", at)
    with pytest.raises(ProviderError, match="whole hours"):
        sfc.sell(block_id, node_ids, cut + timedelta(minutes=10), price, "x2", at)
    with pytest.raises(ProviderError, match="now or later"):
        sfc.sell(block_id, node_ids, T0, price, "x3", at)
    with pytest.raises(ProviderError, match="positive price"):
        sfc.sell(block_id, node_ids, cut, Decimal(0), "x4", at)
    with pytest.raises(ProviderError, match="no block 'nope'"):
        sfc.sell("nope", node_ids, cut, price, "x5", at)
    with pytest.raises(ProviderError, match="nothing to resell"):
        market.provider("aws").sell(block_id, node_ids, cut, price, "x6", at)
    low = Decimal("0.01")  # every bid takes it
    sfc.sell(other_id, other_nodes, cut, low, "x7", at)
    with pytest.raises(ProviderError, match="sold already"):
        sfc.sell(other_id, other_nodes, cut, low, "x8", at)
