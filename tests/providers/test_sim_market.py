"""The built-in market as a seller: orders, idempotency, liquidity, offers, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from scalar.domain.market import CapacityRequest, OrderState
from scalar.domain.orderbook import calculate_optimal_price
from scalar.domain.tier import Tier
from scalar.providers.base import Provider, ProviderError
from scalar.providers.builtin import schema
from scalar.providers.builtin.liquidity import anchor_price
from scalar.providers.catalog import load_catalog
from scalar.providers.sim import BuiltinMarket, MarketConfig, MarketConfigError
from tests.providers.conftest_market import T0, market_url, open_market, open_sqlite_market, sfc_request

__all__ = ["market_url", "open_market", "open_sqlite_market"]

Open = Callable[..., BuiltinMarket]


def _count(market: BuiltinMarket, table: object) -> int:
    with market.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


def _total(asks: tuple) -> int:  # type: ignore[type-arg]
    return sum(order.quantity_gpus for order in asks)


def test_every_provider_face_implements_the_protocol(open_sqlite_market: Open) -> None:
    market = open_sqlite_market()
    faces = market.providers()
    assert sorted(faces) == ["aws", "azure", "gcp", "prime", "runpod", "sfcompute"]
    for name, face in faces.items():
        assert isinstance(face, Provider)
        assert face.name == name
        assert {offer.provider for offer in face.list_offers(T0)} == {name}


def test_buy_with_a_seen_key_returns_the_same_order_and_buys_nothing_more(open_market: Open) -> None:
    market = open_market(MarketConfig(seed=3))
    sfc = market.provider("sfcompute")
    before = sfc.orderbook("8xH100", T0)
    assert before is not None

    first = sfc.buy(sfc_request(nodes=2), "order-key-1", T0)
    again = sfc.buy(sfc_request(nodes=2), "order-key-1", T0 + timedelta(seconds=5))

    assert first.state is OrderState.FILLED and first.block is not None
    assert again == first
    assert sfc.get_order("order-key-1", T0) == first
    assert sfc.get_order("never-used", T0) is None
    assert _count(market, schema.orders) == 1 and _count(market, schema.blocks) == 1
    after = sfc.orderbook("8xH100", T0 + timedelta(seconds=5))
    assert after is not None
    assert _total(before.asks) - _total(after.asks) == 16  # bought once: 2 nodes x 8 GPUs

    other = sfc.buy(sfc_request(nodes=2), "order-key-2", T0)
    assert other.order_id != first.order_id and other.block is not None
    assert set(other.block.node_ids).isdisjoint(first.block.node_ids)


def test_a_second_market_object_on_the_same_database_sees_the_same_orders(
    open_market: Open, market_url: str
) -> None:
    one = open_market(MarketConfig(seed=5))
    two = open_market(url=market_url)  # no config: takes the stored seed
    assert two.seed == 5

    order = one.provider("sfcompute").buy(sfc_request(), "shared-key", T0)
    assert two.provider("sfcompute").get_order("shared-key", T0) == order
    assert two.provider("sfcompute").buy(sfc_request(), "shared-key", T0) == order
    assert two.provider("sfcompute").orderbook("8xH100", T0) == one.provider("sfcompute").orderbook(
        "8xH100", T0
    )

    later = T0 + timedelta(minutes=30)
    events_one, cursor_one = one.events_since(0, later)
    events_two, cursor_two = two.events_since(0, later)
    assert events_one == events_two and cursor_one == cursor_two
    assert len(events_one) == 4  # one node: requesting, booting, initializing, ready


def test_the_stored_seed_wins_and_another_explicit_seed_is_refused(
    open_market: Open, market_url: str
) -> None:
    open_market(MarketConfig(seed=11))
    with pytest.raises(MarketConfigError, match="seed 11") as caught:
        BuiltinMarket(market_url, MarketConfig(seed=12))
    assert "use seed 11 (or leave it unset), or give the market a fresh database" in str(caught.value)
    faster = open_market(MarketConfig(time_scale=60), url=market_url)  # other settings may change
    assert faster.seed == 11


def test_buying_consumes_liquidity_until_the_next_hour_replenishes_the_book(
    open_market: Open, tmp_path: Path
) -> None:
    market = open_market(MarketConfig(seed=21))
    sfc = market.provider("sfcompute")
    book = sfc.orderbook("8xH100", T0)
    assert book is not None
    first, second = book.asks[0], book.asks[1]
    nodes = first.quantity_gpus // 8 + 1  # takes all of the best level and one node of the next

    order = sfc.buy(sfc_request(nodes=nodes), "big", T0 + timedelta(minutes=1))

    assert order.state is OrderState.FILLED and order.block is not None
    after = sfc.orderbook("8xH100", T0 + timedelta(minutes=2))
    assert after is not None
    assert after.asks[0].price_per_gpu_hour == second.price_per_gpu_hour
    assert after.asks[0].quantity_gpus == second.quantity_gpus - 8
    assert after.asks[1:] == book.asks[2:]
    paid = (first.price_per_gpu_hour * first.quantity_gpus + second.price_per_gpu_hour * 8) / (nodes * 8)
    assert order.block.price_per_gpu_hour == paid.quantize(Decimal("0.000001"))
    assert "filled" in (order.reason or "")

    next_hour = T0 + timedelta(hours=1)
    untouched = open_market(MarketConfig(seed=21), url=f"sqlite:///{tmp_path}/fresh.db")
    assert sfc.orderbook("8xH100", next_hour) == untouched.provider("sfcompute").orderbook(
        "8xH100", next_hour
    )


def test_the_price_the_orderbook_algorithm_picks_fills(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=8))
    sfc = market.provider("sfcompute")
    book = sfc.orderbook("8xH200", T0)
    assert book is not None
    price, _ = calculate_optimal_price(book.asks, 32)
    assert price is not None
    order = sfc.buy(sfc_request(nodes=4, limit=str(price), instance_type="8xH200"), "opt", T0)
    assert order.state is OrderState.FILLED and order.block is not None
    assert order.block.price_per_gpu_hour <= price
    assert order.block.gpu_model == "H200" and order.block.vram_per_gpu_gb == 141.0


def test_a_limit_below_the_asks_needed_is_rejected_with_the_numbers(open_market: Open) -> None:
    market = open_market(MarketConfig(seed=4))
    sfc = market.provider("sfcompute")
    book = sfc.orderbook("8xH100", T0)
    assert book is not None
    limit = book.asks[0].price_per_gpu_hour - Decimal("0.01")

    order = sfc.buy(sfc_request(nodes=1, limit=str(limit)), "cheap", T0)

    assert order.state is OrderState.REJECTED and order.block is None
    assert order.reason is not None
    assert f"limit price ${limit}/GPU-h is below the asks needed" in order.reason
    assert f"${book.asks[0].price_per_gpu_hour}/GPU-h" in order.reason
    assert "0 GPUs are offered at or below the limit" in order.reason
    assert sfc.orderbook("8xH100", T0) == book  # nothing consumed
    assert sfc.buy(sfc_request(nodes=1), "cheap", T0) == order  # the key stays rejected
    assert _count(market, schema.blocks) == 0


def test_more_than_the_book_holds_is_rejected_as_insufficient_liquidity(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=4))
    sfc = market.provider("sfcompute")
    book = sfc.orderbook("8xH100", T0)
    assert book is not None
    nodes = _total(book.asks) // 8 + 1
    order = sfc.buy(sfc_request(nodes=nodes), "huge", T0)
    assert order.state is OrderState.REJECTED
    assert order.reason == (
        f"insufficient liquidity: the book holds {_total(book.asks)} GPUs, the order needs {nodes * 8}"
    )


@pytest.mark.parametrize(
    ("request_kw", "hours", "fragment"),
    [
        ({"instance_type": "8xA100"}, 4, "sells 8xH100, 8xH200, not '8xA100'"),
        ({"spot": True}, 4, "not interruptible"),
        ({"gpus_per_node": 4}, 4, "nodes have 8 GPUs, the request says 4"),
        ({"gpu_model": "H200"}, 4, "carry H100, not H200"),
        ({}, 0, "contracts last 1 hour to 30 days"),
        ({}, 721, "contracts last 1 hour to 30 days"),
    ],
)
def test_bad_sfcompute_requests_are_rejected_with_a_reason(
    open_sqlite_market: Open, request_kw: dict[str, Any], hours: int, fragment: str
) -> None:
    market = open_sqlite_market()
    order = market.provider("sfcompute").buy(sfc_request(hours=hours, **request_kw), "bad", T0)
    assert order.state is OrderState.REJECTED
    assert fragment in (order.reason or "")


def test_sfcompute_contracts_start_on_the_next_minute_and_end_on_the_hour(open_sqlite_market: Open) -> None:
    market = open_sqlite_market()
    now = T0 + timedelta(minutes=7, seconds=20)
    order = market.provider("sfcompute").buy(sfc_request(hours=2), "round", now)
    assert order.block is not None
    assert order.block.start_time == T0 + timedelta(minutes=8)
    assert order.block.end_time == T0 + timedelta(hours=3)  # 14:08 rounded up to 15:00


def test_fixed_price_offers_come_from_the_catalog_and_spot_prices_drift_a_little(
    open_sqlite_market: Open,
) -> None:
    market = open_sqlite_market(MarketConfig(seed=2))
    catalog = load_catalog()
    published = {offer.key: offer for offer in catalog.trusted_offers()}
    for provider in ("aws", "azure", "gcp", "prime", "runpod"):
        offers = market.provider(provider).list_offers(T0)
        assert offers, provider
        assert market.provider(provider).orderbook("anything", T0) is None
        for offer in offers:
            source = published[offer.key]
            assert offer.observed_at == T0
            assert offer.interruption_rate == source.interruption_rate
            if offer.spot:
                ratio = offer.price_per_hour / source.price_per_hour
                assert Decimal("0.949") <= ratio <= Decimal("1.051")
            else:
                assert offer.price_per_hour == source.price_per_hour
    spot_now = {o.key: o.price_per_hour for o in market.list_offers(T0, "aws") if o.spot}
    spot_later = {
        o.key: o.price_per_hour for o in market.list_offers(T0 + timedelta(hours=1), "aws") if o.spot
    }
    assert spot_now.keys() == spot_later.keys() and spot_now != spot_later


def test_sfcompute_offers_are_the_best_asks_around_the_catalog_reference(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=9))
    sfc = market.provider("sfcompute")
    for offer in sfc.list_offers(T0):
        book = sfc.orderbook(offer.instance_type, T0)
        assert book is not None
        assert offer.price_per_hour == book.asks[0].price_per_gpu_hour * 8
        assert offer.gpu_count == 8 and not offer.spot
        reference = anchor_price(load_catalog(), offer.gpu_model or "")
        assert reference * Decimal("0.8") < book.asks[0].price_per_gpu_hour < reference * Decimal("1.1")
        assert book.bids[0].price_per_gpu_hour < book.asks[0].price_per_gpu_hour
    with pytest.raises(ProviderError, match=r"no orderbook for 'p5\.48xlarge'"):
        sfc.orderbook("p5.48xlarge", T0)


def test_fixed_price_buys_use_the_offer_shape_price_and_limit(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=2, shape_capacity_nodes=4))
    aws = market.provider("aws")
    offer = min(
        (o for o in aws.list_offers(T0) if o.instance_type == "p5.48xlarge" and not o.spot),
        key=lambda o: (o.price_per_hour, o.key),
    )
    request = CapacityRequest("aws", "p5.48xlarge", 2, 3600, None, Tier.FAST, region=offer.region)
    order = aws.buy(request, "aws-1", T0)
    assert order.state is OrderState.FILLED and order.block is not None
    assert order.block.price_per_gpu_hour == offer.price_per_hour / 8
    assert (order.block.gpus_per_node, order.block.vram_per_gpu_gb, order.block.cpu_per_node) == (
        8,
        80.0,
        192.0,
    )
    assert order.block.end_time - order.block.start_time == timedelta(hours=1)

    too_low = CapacityRequest("aws", "p5.48xlarge", 1, 3600, Decimal("1.00"), Tier.FLEX, region=offer.region)
    refused = aws.buy(too_low, "aws-2", T0)
    assert refused.state is OrderState.REJECTED
    assert "limit price $1.00/GPU-h is below aws's on-demand price" in (refused.reason or "")

    spot = CapacityRequest("aws", "p5.48xlarge", 1, 3600, None, Tier.FLEX, spot=True, region=offer.region)
    spot_order = aws.buy(spot, "aws-3", T0)
    assert spot_order.block is not None and spot_order.block.spot
    spot_offer = min(
        (o for o in aws.list_offers(T0) if o.key.endswith("/p5.48xlarge/spot") and o.region == offer.region),
        key=lambda o: (o.price_per_hour, o.key),
    )
    assert spot_order.block.price_per_gpu_hour == (spot_offer.price_per_hour / 8).quantize(
        Decimal("0.000001")
    )
    assert "has no on-demand offer of 'nope'" in (
        aws.buy(CapacityRequest("aws", "nope", 1, 3600, None, Tier.FAST), "aws-4", T0).reason or ""
    )
    with pytest.raises(ProviderError, match="send it to that provider"):
        market.provider("prime").buy(request, "wrong-face", T0)


def test_a_full_shape_is_rejected_as_out_of_capacity(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=2, shape_capacity_nodes=2))
    prime = market.provider("prime")
    offer = next(o for o in prime.list_offers(T0) if o.gpu_count == 8 and not o.spot)
    zones = [o for o in prime.list_offers(T0) if o.instance_type == offer.instance_type and not o.spot]
    request = CapacityRequest(
        "prime", offer.instance_type, 2, 3600, None, Tier.FAST, gpus_per_node=8, region=offer.region
    )
    same_region = [o for o in zones if o.region == offer.region]
    results = [prime.buy(request, f"cap-{i}", T0).state for i in range(len(same_region) + 1)]
    assert results[:-1] == [OrderState.FILLED] * len(same_region)
    last = prime.get_order(f"cap-{len(same_region)}", T0)
    assert last is not None and last.state is OrderState.REJECTED
    assert "out of capacity" in (last.reason or "")


def test_the_same_seed_and_calls_give_the_same_market_and_another_seed_another(
    open_market: Open, tmp_path: Path
) -> None:
    def run(market: BuiltinMarket) -> tuple[object, ...]:
        sfc = market.provider("sfcompute")
        book = sfc.orderbook("8xH100", T0)
        order = sfc.buy(sfc_request(nodes=3), "det", T0)
        spot = market.list_offers(T0 + timedelta(hours=3), "gcp")
        events = market.events_since(0, T0 + timedelta(hours=5))
        return book, order, spot, events

    first = run(open_market(MarketConfig(seed=42)))
    second = run(open_market(MarketConfig(seed=42), url=f"sqlite:///{tmp_path}/second.db"))
    third = run(open_market(MarketConfig(seed=43), url=f"sqlite:///{tmp_path}/third.db"))
    assert first == second
    assert first[0] != third[0]


def test_market_config_is_validated_with_hints() -> None:
    with pytest.raises(MarketConfigError, match="time_scale must be a positive number"):
        MarketConfig(time_scale=0)
    with pytest.raises(MarketConfigError, match="boot_failure_rate must be between 0 and 1"):
        MarketConfig(boot_failure_rate=1.5)
    with pytest.raises(MarketConfigError, match="cannot keep its state"):
        BuiltinMarket("mysql://localhost/x")


def test_times_without_a_zone_are_refused(open_sqlite_market: Open) -> None:
    market = open_sqlite_market()
    with pytest.raises(ProviderError, match="no time zone") as caught:
        market.provider("sfcompute").buy(sfc_request(), "naive", T0.replace(tzinfo=None))
    assert caught.value.retryable is False
