"""The SFCompute client against a loopback server replaying SFCompute's real payloads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from scalar.domain.market import CapacityRequest, NodeState, OrderState
from scalar.domain.orderbook import BookOrder
from scalar.domain.reasons import Reason
from scalar.domain.tier import Tier
from scalar.engine import StartWork, StopWork, WorkPlacement
from scalar.providers.base import Provider, ProviderError, WorkRunner
from scalar.providers.config import ProviderSettings
from scalar.providers.http import HttpStatusError, RetryPolicy
from scalar.providers.sfcompute import (
    TICKERS,
    SFComputeProvider,
    order_total_cents,
    order_window,
    price_per_gpu_hour_from_cents,
)
from scalar.runtime.executor import execute, outbox_payload
from tests.providers.fakeserver import FakeServer, Reply, Request

SAMPLES = Path(__file__).parent / "samples" / "sfcompute"
NOW = datetime(2025, 7, 1, 0, 0, tzinfo=UTC)  # on the hour: the CLI's window is exactly the duration
KEY = "act-7f3a-buy-8xH100"


def sample(name: str) -> Any:
    return json.loads((SAMPLES / f"sfcompute_{name}.json").read_text())


@pytest.fixture(scope="module")
def shared_server() -> Iterator[FakeServer]:
    with FakeServer() as fake:  # one per module: shutting a server down costs its 0.5 s poll interval
        yield fake


@pytest.fixture
def server(shared_server: FakeServer) -> FakeServer:
    shared_server.requests.clear()
    shared_server._routes.clear()
    return shared_server


def client(server: FakeServer, sleeps: list[float] | None = None, **kw: Any) -> SFComputeProvider:
    settings = ProviderSettings("sfcompute", server.url, "sk-test", enabled=True)
    sink = sleeps if sleeps is not None else []
    return SFComputeProvider(
        settings, retry=RetryPolicy(attempts=3, base_delay_s=0.001), sleep=sink.append, **kw
    )


def request(nodes: int = 2, hours: int = 24, limit: str | None = "1.90") -> CapacityRequest:
    return CapacityRequest(
        provider="sfcompute",
        instance_type="8xH100",
        node_count=nodes,
        duration_s=hours * 3600,
        limit_price_per_gpu_hour=None if limit is None else Decimal(limit),
        tier=Tier.FAST,
        gpu_model="H100",
    )


def filled_order(order_id: str = "ordr_k3R-nX9vLm7Qp2Yw5Jd8F") -> dict[str, Any]:
    listed = sample("v0_list_orders_response")["data"][0]
    return {**listed, "id": order_id}


# -- conversions ------------------------------------------------------------------------------------
def test_a_16_node_day_at_two_dollars_is_614400_cents_and_back() -> None:
    # 16 nodes x 8 GPUs x 24 h x 200 cents; the CLI once multiplied by the 8 GPUs twice (4,915,200).
    assert order_total_cents(Decimal("2.00"), 16, 24 * 3600) == 16 * 8 * 24 * 200 == 614_400
    assert price_per_gpu_hour_from_cents(614_400, 16, 24 * 3600) == Decimal("2")


def test_the_readme_example_4800_cents_for_one_node_four_hours_is_150_per_gpu_hour() -> None:
    assert price_per_gpu_hour_from_cents(4800, 1, 4 * 3600) == Decimal("1.5")
    assert order_total_cents(Decimal("1.5"), 1, 4 * 3600) == 4800


def test_totals_round_up_to_the_cent_as_the_cli_does() -> None:
    # $1.234/GPU-h x 8 GPUs x 1 node x 20 min = 329.0666.. cents -> 330.
    assert order_total_cents(Decimal("1.234"), 1, 1200) == 330


def test_order_window_starts_now_and_ends_on_the_hour() -> None:
    now = datetime(2025, 7, 1, 10, 17, 20, tzinfo=UTC)
    start, end = order_window(now, 3 * 3600)
    assert start == datetime(2025, 7, 1, 10, 18, tzinfo=UTC)  # NOW, priced from the next whole minute
    assert end == datetime(2025, 7, 1, 14, 0, tzinfo=UTC)  # 13:17:20 rounded up to the hour


def test_every_ticker_maps_to_a_scalar_instance_type() -> None:
    assert TICKERS == {"h100i": "8xH100", "h100v": "8xH100", "h200ki": "8xH200"}


# -- the public orderbook ---------------------------------------------------------------------------
def test_depth_becomes_a_book_per_gpu_hour(server: FakeServer) -> None:
    server.route(
        "GET", "/preview/v2/orderbook/depth", Reply.json(sample("preview_v2_orderbook_depth_response"))
    )
    book = client(server).orderbook("8xH100", NOW + timedelta(minutes=5))
    assert book is not None
    one_hour = Decimal(1)
    assert book.asks == (
        BookOrder(Decimal("1.9"), 32, one_hour),  # $15.20/node-h / 8, 4 nodes x 8 GPUs
        BookOrder(Decimal("2"), 128, one_hour),
    )
    assert book.bids == (BookOrder(Decimal("1.8"), 24, one_hour), BookOrder(Decimal("1.7"), 64, one_hour))
    sent = server.requests[0]
    assert sent.param("requirements") == "accelerator:H100"
    assert sent.param("start_at") == str(int((NOW + timedelta(hours=1)).timestamp()))
    assert sent.param("end_at") == str(int((NOW + timedelta(hours=2)).timestamp()))
    assert sent.headers["authorization"] == "Bearer sk-test"


def test_best_asks_become_offers_priced_per_node_hour(server: FakeServer) -> None:
    def quote(req: Request) -> Reply:
        if req.param("requirements") == "accelerator:H200":
            return Reply.json({**sample("preview_v2_orderbook_quote_response"), "best_ask": None})
        return Reply.json(sample("preview_v2_orderbook_quote_response"))

    server.route("GET", "/preview/v2/orderbook/quote", quote)
    offers = client(server).list_offers(NOW)
    assert [(o.instance_type, o.price_per_hour, o.price_per_gpu_hour) for o in offers] == [
        ("8xH100", Decimal("15.200000"), Decimal("1.9"))
    ]
    assert offers[0].gpu_model == "H100" and offers[0].gpu_count == 8 and offers[0].observed_at == NOW


def test_a_level_with_a_malformed_price_names_the_field(server: FakeServer) -> None:
    depth = sample("preview_v2_orderbook_depth_response")
    depth["asks"][1]["dollars_per_node_hour"] = "sixteen"
    server.route("GET", "/preview/v2/orderbook/depth", Reply.json(depth))
    with pytest.raises(ProviderError, match=r"asks\[1\]\.dollars_per_node_hour should be a number"):
        client(server).orderbook("8xH100", NOW)


def test_a_book_missing_its_bids_names_the_field(server: FakeServer) -> None:
    depth = sample("preview_v2_orderbook_depth_response")
    del depth["bids"]
    server.route("GET", "/preview/v2/orderbook/depth", Reply.json(depth))
    with pytest.raises(ProviderError, match="bids is missing"):
        client(server).orderbook("8xH100", NOW)


def test_unknown_instance_type_is_not_retryable(server: FakeServer) -> None:
    with pytest.raises(ProviderError, match="8xH100, 8xH200") as err:
        client(server).orderbook("8xB200", NOW)
    assert not err.value.retryable and server.requests == []


# -- quotes -----------------------------------------------------------------------------------------
def test_quote_total_cents_become_dollars_per_gpu_hour(server: FakeServer) -> None:
    server.route("GET", "/v0/quote", Reply.json(sample("v0_quote_response")))
    quote = client(server).quote("8xH100", 1, 24 * 3600, NOW)
    assert quote.total_cents == 36480 and quote.zone == "richmond"
    assert quote.price_per_gpu_hour == Decimal("1.9")  # 36480 / 100 / 8 / 1 / 24
    assert server.requests[0].param("instance_type") == "h100i"
    assert server.requests[0].param("min_duration") == "86400"


def test_no_quote_carries_the_reason(server: FakeServer) -> None:
    server.route("GET", "/v0/quote", Reply.json(sample("v0_quote_noquote_response")))
    quote = client(server).quote("8xH100", 1, 3600, NOW)
    assert not quote.available and quote.no_quote_reason == "no_availability"


# -- buying -----------------------------------------------------------------------------------------
def test_buy_places_the_sample_order_with_the_action_id_as_idempotency_key(server: FakeServer) -> None:
    server.route("POST", "/v0/orders", Reply.json(sample("v0_create_order_response_201"), 201))
    sf = client(server, ioc=True, tickers={"8xH100": "h100v"})
    order = sf.buy(request(nodes=2, limit="1.90"), KEY, NOW)
    sent = server.requests[0]
    assert sent.headers["idempotency-key"] == KEY
    assert sent.json() == sample("v0_create_order_request")  # 1.90 x 8 x 2 x 24 x 100 = 72,960 cents
    assert order.state is OrderState.PENDING and order.order_id == "ordr_k3R-nX9vLm7Qp2Yw5Jd8F"
    assert order.idempotency_key == KEY and order.block is None


def test_buy_of_16_nodes_for_a_day_sends_614400_cents(server: FakeServer) -> None:
    server.route("POST", "/v0/orders", Reply.json(sample("v0_create_order_response_201"), 201))
    client(server).buy(request(nodes=16, limit="2.00"), KEY, NOW)
    body = server.requests[0].json()
    assert body["price"] == 614_400 and body["quantity"] == 16 and body["end_at"] == "2025-07-02T00:00:00Z"


def test_buy_without_a_limit_places_at_the_quoted_price(server: FakeServer) -> None:
    server.route("GET", "/v0/quote", Reply.json(sample("v0_quote_response")))
    server.route("POST", "/v0/orders", Reply.json(sample("v0_create_order_response_201"), 201))
    client(server).buy(request(nodes=1, limit=None), KEY, NOW)
    body = server.requests[1].json()
    assert body["price"] == 36480 and body["end_at"] == "2025-07-02T00:00:00Z"


def test_a_quote_for_a_later_hour_is_placed_for_that_hour(server: FakeServer) -> None:
    later = sample("v0_quote_response")
    later["quote"] |= {"start_at": "2025-07-01T02:00:00Z", "end_at": "2025-07-02T02:00:00Z"}
    server.route("GET", "/v0/quote", Reply.json(later))
    server.route("POST", "/v0/orders", Reply.json(sample("v0_create_order_response_201"), 201))
    client(server).buy(request(nodes=1, limit=None), KEY, NOW)
    body = server.requests[1].json()
    assert (body["start_at"], body["end_at"], body["price"]) == (
        "2025-07-01T02:00:00Z",
        "2025-07-02T02:00:00Z",
        36480,
    )


def test_buy_without_a_limit_and_no_quote_is_rejected_without_an_order(server: FakeServer) -> None:
    server.route("GET", "/v0/quote", Reply.json(sample("v0_quote_noquote_response")))
    order = client(server).buy(request(limit=None), KEY, NOW)
    assert order.state is OrderState.REJECTED and "no_availability" in (order.reason or "")
    assert [r.method for r in server.requests] == ["GET"]


def test_a_filled_create_returns_the_block_priced_from_the_execution_price(server: FakeServer) -> None:
    server.route(
        "POST", "/v0/orders", Reply.json({**sample("v0_create_order_response_201"), "status": "filled"})
    )
    server.route("GET", "/v0/orders/ordr_k3R-nX9vLm7Qp2Yw5Jd8F", Reply.json(filled_order()))
    order = client(server).buy(request(), KEY, NOW)
    assert order.state is OrderState.FILLED and order.block is not None
    # execution_price 70,080 cents / 100 / 8 GPUs / 2 nodes / 24 h
    assert order.block.price_per_gpu_hour == Decimal("1.825")
    assert order.block.node_ids == ("ordr_k3R-nX9vLm7Qp2Yw5Jd8F-n0", "ordr_k3R-nX9vLm7Qp2Yw5Jd8F-n1")
    assert order.block.region == "richmond" and order.block.end_time == datetime(2025, 7, 2, tzinfo=UTC)


def test_the_400_error_surfaces_with_sfcomputes_message(server: FakeServer) -> None:
    server.route("POST", "/v0/orders", Reply.json(sample("v0_error_400"), 400))
    with pytest.raises(HttpStatusError, match="Start time must be within") as err:
        client(server).buy(request(), KEY, NOW)
    assert err.value.status == 400 and not err.value.retryable and len(server.requests) == 1


def test_401_fails_fast_with_the_message(server: FakeServer) -> None:
    sleeps: list[float] = []
    error = {"error": {"type": "authentication_error", "message": "Invalid API token", "details": []}}
    server.route("GET", "/v0/orders", Reply.json(error, 401))
    with pytest.raises(HttpStatusError, match="Invalid API token") as err:
        client(server, sleeps).list_orders()
    assert err.value.status == 401 and not err.value.retryable
    assert sleeps == [] and len(server.requests) == 1


def test_429_then_200_succeeds_after_retry_after(server: FakeServer) -> None:
    sleeps: list[float] = []
    limited = Reply.json(
        {"error": {"type": "api_error", "message": "slow down"}}, 429, headers={"Retry-After": "2"}
    )
    server.route("GET", "/v0/orders", [limited, Reply.json(sample("v0_list_orders_response"))])
    orders = client(server, sleeps).list_orders()
    assert [o.order_id for o in orders] == ["ordr_k3R-nX9vLm7Qp2Yw5Jd8F", "ordr_p7Q-aB1cDe2Fg3Hi4Jk5L"]
    assert sleeps == [2.0]


def test_500_is_retried_then_reported_retryable(server: FakeServer) -> None:
    sleeps: list[float] = []
    server.route("GET", "/v0/orders", Reply.json({"error": {"type": "api_error", "message": "boom"}}, 500))
    with pytest.raises(HttpStatusError, match="boom") as err:
        client(server, sleeps).list_orders()
    assert err.value.retryable and len(server.requests) == 3 and len(sleeps) == 2


def test_a_timeout_is_a_retryable_error(server: FakeServer) -> None:
    server.route("GET", "/v0/orders", Reply.json(sample("v0_list_orders_response"), delay_s=0.3))
    with pytest.raises(ProviderError, match="timed out") as err:
        client(server, timeout_s=0.05).list_orders()
    assert err.value.retryable


def test_malformed_json_is_an_error(server: FakeServer) -> None:
    server.route(
        "GET", "/v0/orders", Reply.text('{"object": "list", "data": [', content_type="application/json")
    )
    with pytest.raises(ProviderError, match="malformed JSON"):
        client(server).list_orders()


# -- orders: listing, paging, finding by key --------------------------------------------------------
def test_sample_orders_convert_to_dollars_per_gpu_hour(server: FakeServer) -> None:
    server.route("GET", "/v0/orders", Reply.json(sample("v0_list_orders_response")))
    filled, cancelled = client(server).list_orders()
    assert filled.instance_type == "8xH100" and filled.state is OrderState.FILLED
    assert price_per_gpu_hour_from_cents(filled.price_cents, 2, 86400) == Decimal("1.9")
    assert filled.price_per_gpu_hour == Decimal("1.825")  # execution price
    assert cancelled.state is OrderState.CANCELLED and cancelled.duration_s == 7 * 86400
    assert cancelled.price_per_gpu_hour == Decimal("1.6")  # 215,040 / 100 / 8 / 1 / 168


def _paged(server: FakeServer, pages: list[list[dict[str, Any]]], always_more: bool = False) -> None:
    template = sample("v0_list_orders_response")["data"][0]

    def handler(req: Request) -> Reply:
        offset = int(req.param("offset") or 0)
        index = sum(1 for r in server.requests if r.path == "/v0/orders") - 1
        page = pages[min(index, len(pages) - 1)]
        data = [{**template, **o} for o in page]
        more = always_more or index + 1 < len(pages)
        return Reply.json({"object": "list", "data": data, "has_more": more, "_offset": offset})

    server.route("GET", "/v0/orders", handler)


def test_listing_follows_has_more_across_pages_with_offsets(server: FakeServer) -> None:
    _paged(server, [[{"id": "a"}, {"id": "b"}], [{"id": "c"}], [{"id": "d"}, {"id": "e"}]])
    orders = client(server).list_orders()
    assert [o.order_id for o in orders] == ["a", "b", "c", "d", "e"]
    assert [r.param("offset") for r in server.requests] == ["0", "2", "3"]
    assert {r.param("limit") for r in server.requests} == {"100"}


def test_an_empty_page_ends_the_listing(server: FakeServer) -> None:
    _paged(server, [[{"id": "a"}], [], [{"id": "never"}]])
    assert [o.order_id for o in client(server).list_orders()] == ["a"]
    assert len(server.requests) == 2


def test_a_listing_past_the_page_cap_is_an_error_naming_the_cap(server: FakeServer) -> None:
    _paged(server, [[{"id": "x"}]], always_more=True)
    with pytest.raises(ProviderError, match="page cap of 3 pages") as err:
        client(server, max_pages=3).list_orders()
    assert len(server.requests) == 3 and not err.value.retryable


def test_a_page_missing_a_field_names_it(server: FakeServer) -> None:
    listing = sample("v0_list_orders_response")
    del listing["data"][1]["price"]
    server.route("GET", "/v0/orders", Reply.json(listing))
    with pytest.raises(ProviderError, match=r"GET /v0/orders page 1: data\[1\]\.price is missing"):
        client(server).list_orders()


def test_a_wrongly_typed_quantity_names_it(server: FakeServer) -> None:
    listing = sample("v0_list_orders_response")
    listing["data"][0]["quantity"] = "2"
    server.route("GET", "/v0/orders", Reply.json(listing))
    with pytest.raises(ProviderError, match=r"data\[0\]\.quantity should be an integer"):
        client(server).list_orders()


def test_get_order_finds_a_placed_order_by_key(server: FakeServer) -> None:
    server.route("POST", "/v0/orders", Reply.json(sample("v0_create_order_response_201"), 201))
    server.route("GET", "/v0/orders/ordr_k3R-nX9vLm7Qp2Yw5Jd8F", Reply.json(filled_order()))
    sf = client(server)
    sf.buy(request(), KEY, NOW)
    found = sf.get_order(KEY, NOW)
    assert found is not None and found.state is OrderState.FILLED and found.request == request()


def test_buying_again_with_the_same_key_places_nothing_new(server: FakeServer) -> None:
    server.route("POST", "/v0/orders", Reply.json(sample("v0_create_order_response_201"), 201))
    server.route("GET", "/v0/orders/ordr_k3R-nX9vLm7Qp2Yw5Jd8F", Reply.json(filled_order()))
    sf = client(server)
    sf.buy(request(), KEY, NOW)
    again = sf.buy(request(), KEY, NOW)
    assert again.order_id == "ordr_k3R-nX9vLm7Qp2Yw5Jd8F"
    assert [r.method for r in server.requests].count("POST") == 1


def test_get_order_after_a_restart_matches_an_echoed_key_in_the_listing(server: FakeServer) -> None:
    listing = sample("v0_list_orders_response")
    listing["data"][1]["idempotency_key"] = KEY
    server.route("GET", "/v0/orders", Reply.json(listing))
    found = client(server).get_order(KEY, NOW)
    assert found is not None and found.order_id == "ordr_p7Q-aB1cDe2Fg3Hi4Jk5L"
    assert found.state is OrderState.CANCELLED
    assert found.request.limit_price_per_gpu_hour == Decimal("1.6")


def test_get_order_for_an_unknown_key_is_none(server: FakeServer) -> None:
    server.route("GET", "/v0/orders", Reply.json(sample("v0_list_orders_response")))
    assert client(server).get_order("never-used", NOW) is None


def test_release_cancels_an_open_order(server: FakeServer) -> None:
    server.route("GET", "/v0/orders/ordr_open", Reply.json({**filled_order("ordr_open"), "status": "open"}))
    server.route("DELETE", "/v0/orders/ordr_open", Reply.json({"object": "pending"}))
    client(server).release("ordr_open", NOW)
    assert [(r.method, r.path) for r in server.requests][-1] == ("DELETE", "/v0/orders/ordr_open")


def test_release_of_a_running_filled_order_says_why_not(server: FakeServer) -> None:
    server.route("GET", "/v0/orders/ordr_k3R-nX9vLm7Qp2Yw5Jd8F", Reply.json(filled_order()))
    with pytest.raises(ProviderError, match="selling it back") as err:
        client(server).release("ordr_k3R-nX9vLm7Qp2Yw5Jd8F", NOW + timedelta(hours=1))
    assert not err.value.retryable


def test_events_follow_the_contract_window(server: FakeServer) -> None:
    server.route("POST", "/v0/orders", Reply.json(sample("v0_create_order_response_201"), 201))
    server.route("GET", "/v0/orders/ordr_k3R-nX9vLm7Qp2Yw5Jd8F", Reply.json(filled_order()))
    sf = client(server)
    sf.buy(request(), KEY, NOW - timedelta(minutes=1))
    events, cursor = sf.events_since(0, NOW + timedelta(minutes=5))
    assert [(e.node_id, e.state) for e in events] == [
        ("ordr_k3R-nX9vLm7Qp2Yw5Jd8F-n0", NodeState.READY),
        ("ordr_k3R-nX9vLm7Qp2Yw5Jd8F-n1", NodeState.READY),
    ]
    assert cursor == 2 and sf.events_since(cursor, NOW + timedelta(minutes=6)) == ([], 2)
    ended, cursor = sf.events_since(cursor, NOW + timedelta(days=1))
    assert [e.state for e in ended] == [NodeState.TERMINATED] * 2 and cursor == 4


def test_work_sent_to_sfcompute_fails_for_good_without_a_request(server: FakeServer) -> None:
    """SFCompute runs no jobs itself (work on its nodes runs through the node agent): a start or stop
    routed to it fails for good, naming the agent, and asks nothing of the API."""
    sfc = client(server)
    assert not isinstance(sfc, WorkRunner)
    place = (WorkPlacement("n", (0,)),)
    why = Reason("placed", "placed")
    for action in (StartWork("a1", why, "j", place, 60), StopWork("a2", why, "j", "n", "cancelled")):
        outcome = execute(outbox_payload(action, "sfcompute", {"n": "b"}), {"sfcompute": sfc}, NOW)
        assert outcome.failed and not outcome.retry
        assert outcome.error is not None and "node agent" in outcome.error
    assert server.requests == []


def test_it_is_a_provider(server: FakeServer) -> None:
    assert isinstance(client(server), Provider)


def test_tickers_name_the_same_instance_types() -> None:
    settings = ProviderSettings("sfcompute", "http://127.0.0.1:9", "k", enabled=True)
    sf = SFComputeProvider(settings)
    try:
        assert (sf.ticker("8xH100"), sf.ticker("h100v"), sf.ticker("H100I"), sf.ticker("h200ki")) == (
            "h100i",
            "h100v",
            "h100i",
            "h200ki",
        )
        with pytest.raises(ProviderError, match="sells no"):
            sf.ticker("a100")
    finally:
        sf.close()
