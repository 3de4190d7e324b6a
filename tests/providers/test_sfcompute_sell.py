"""Selling unused SFCompute contract time back: one immediate-or-cancel sell order per node in SFCompute's
``POST /v0/orders`` format against a local fake that fills some and cancels the rest; the sold nodes end
at the cut in the client's node events; the executor turns the answer into the controller's event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from scalar.domain.market import NodeState, Order, OrderState
from scalar.domain.orderbook import BookOrder
from scalar.domain.reasons import Reason
from scalar.engine import BuyCapacity, Controller, ControllerConfig, SaleUpdated, SellCapacity
from scalar.engine.events import MarketBook, MarketObserved, OrderUpdated
from scalar.providers.base import ProviderError, Reseller
from scalar.providers.config import ProviderSettings
from scalar.providers.http import RetryPolicy
from scalar.providers.payload import Fields
from scalar.providers.sfcompute import SFComputeProvider, order_total_cents
from scalar.providers.sfcompute.orders import request_of
from scalar.providers.sfcompute.wire import read_order
from scalar.runtime.executor import execute, outbox_payload
from tests.engine.builders import BOOK, grant, job_done, ready, sf_offer, sid, spec, starts, submit, tick
from tests.providers.fakeserver import FakeServer, Reply, Request

SAMPLES = Path(__file__).parent / "samples" / "sfcompute"
NOW = datetime(2025, 7, 1, 0, 0, tzinfo=UTC)
BLOCK = "ordr_contract1"
END = NOW + timedelta(hours=24)


def _listed() -> dict[str, Any]:
    listed = json.loads((SAMPLES / "sfcompute_v0_list_orders_response.json").read_text())["data"][0]
    return {
        **listed,
        "id": BLOCK,
        "side": "buy",
        "status": "filled",
        "quantity": 3,
        "start_at": NOW.isoformat().replace("+00:00", "Z"),
        "end_at": END.isoformat().replace("+00:00", "Z"),
    }


class FakeSellBook:
    """SFCompute's orders endpoint for sells: fills the first ``fills`` sell orders, cancels the rest."""

    def __init__(self, server: FakeServer, fills: int) -> None:
        self.fills = fills
        self.sells: list[dict[str, Any]] = []
        self.keys: list[str | None] = []
        self.states: dict[str, str] = {}
        server.route("POST", "/v0/orders", self.create)
        server.route("GET", f"/v0/orders/{BLOCK}", Reply.json(_listed()))
        server.route("GET", "/v0/orders/ordr_sell*", self.get)

    def create(self, req: Request) -> Reply:
        body = req.json()
        if body.get("side") != "sell" or body.get("quantity") != 1 or "contract_id" not in body:
            return Reply.json({"error": {"type": "invalid_request_error", "message": "bad sell"}}, 400)
        self.sells.append(body)
        self.keys.append(req.headers.get("idempotency-key"))
        order_id = f"ordr_sell{len(self.sells)}"
        self.states[order_id] = "filled" if len(self.sells) <= self.fills else "cancelled"
        return Reply.json(
            {"object": "order", "status": "pending", "id": order_id, "idempotency_key": None}, 201
        )

    def get(self, req: Request) -> Reply:
        order_id = req.path.rsplit("/", 1)[-1]
        if order_id not in self.states:
            return Reply.json({"error": {"type": "not_found", "message": "no such order"}}, 404)
        sell = self.sells[int(order_id.removeprefix("ordr_sell")) - 1]
        return Reply.json(
            {
                **_listed(),
                "id": order_id,
                "side": "sell",
                "status": self.states[order_id],
                "quantity": 1,
                "start_at": sell["start_at"] if sell["start_at"] != "NOW" else _listed()["start_at"],
                "price": sell["price"],
            }
        )


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


def _client(server: FakeServer) -> SFComputeProvider:
    settings = ProviderSettings("sfcompute", server.url, "sk-test", enabled=True)
    return SFComputeProvider(
        settings, retry=RetryPolicy(attempts=2, base_delay_s=0.001), sleep=lambda s: None
    )


def test_a_sell_order_per_node_is_placed_in_sfcomputes_format_and_partly_filled(server: FakeServer) -> None:
    book = FakeSellBook(server, fills=2)
    sfc = _client(server)
    assert isinstance(sfc, Reseller)
    nodes = tuple(f"{BLOCK}-n{i}" for i in range(3))
    cut = END - timedelta(hours=20)
    fill = sfc.sell(BLOCK, nodes, cut, Decimal("1.50"), "act-000009", NOW + timedelta(minutes=30))

    assert len(book.sells) == 3
    cents = order_total_cents(Decimal("1.50"), 1, 20 * 3600)
    assert cents == 150 * 8 * 20
    for i, body in enumerate(book.sells):
        assert body == {
            "side": "sell",
            "instance_type": _listed()["instance_type"],
            "quantity": 1,
            "start_at": "2025-07-01T04:00:00Z",
            "end_at": "2025-07-02T00:00:00Z",
            "price": cents,
            "contract_id": BLOCK,
            "flags": {"ioc": True},
        }
        assert book.keys[i] == f"act-000009:n{i}"
    assert fill.node_ids_sold == nodes[:2] and fill.nodes_offered == 3
    assert (fill.hours, fill.cut, fill.proceeds) == (20, cut, Decimal("1.50") * 16 * 20)
    # The same key answers from memory: nothing is placed twice.
    assert sfc.sell(BLOCK, nodes, cut, Decimal("1.50"), "act-000009", NOW) == fill
    assert len(book.sells) == 3 and sfc.get_sale("act-000009", NOW) == fill


def test_the_sold_nodes_end_at_the_cut_and_the_unsold_one_at_the_contracts_end(server: FakeServer) -> None:
    book = FakeSellBook(server, fills=1)
    sfc = _client(server)
    nodes = tuple(f"{BLOCK}-n{i}" for i in range(3))
    cut = END - timedelta(hours=10)
    # The client reports nodes of orders it placed: record the contract as one it bought.
    sfc._placed["buy-key"] = (BLOCK, request_of(read_order(Fields.root("sfcompute", "t", _listed()))))
    fill = sfc.sell(BLOCK, nodes, cut, Decimal("2.00"), "sale-1", NOW + timedelta(hours=1))
    assert fill.node_ids_sold == nodes[:1] and len(book.sells) == 3
    events, cursor = sfc.events_since(0, NOW + timedelta(hours=2))
    assert {e.node_id: e.state for e in events} == dict.fromkeys(nodes, NodeState.READY)
    events, cursor = sfc.events_since(cursor, cut + timedelta(minutes=1))
    assert [(e.node_id, e.state) for e in events] == [(nodes[0], NodeState.TERMINATED)]
    events, _ = sfc.events_since(cursor, END + timedelta(minutes=1))
    assert sorted(e.node_id for e in events if e.state is NodeState.TERMINATED) == list(nodes[1:])


def test_bad_sales_are_refused_before_anything_is_placed(server: FakeServer) -> None:
    book = FakeSellBook(server, fills=3)
    sfc = _client(server)
    nodes = (f"{BLOCK}-n0",)
    at = NOW + timedelta(minutes=5)
    with pytest.raises(ProviderError, match="not nodes of order"):
        sfc.sell(BLOCK, ("someone-elses-n0",), END - timedelta(hours=2), Decimal(1), "k1", at)
    with pytest.raises(ProviderError, match="whole hours"):
        sfc.sell(BLOCK, nodes, END - timedelta(minutes=90), Decimal(1), "k2", at)
    with pytest.raises(ProviderError, match="positive price"):
        sfc.sell(BLOCK, nodes, END - timedelta(hours=2), Decimal(0), "k3", at)
    with pytest.raises(ProviderError, match="no filled buy order"):
        sfc.sell("ordr_unknown", nodes, END - timedelta(hours=2), Decimal(1), "k4", at)
    assert book.sells == []


def test_the_executor_turns_a_sell_action_into_the_controllers_sale_event(server: FakeServer) -> None:
    FakeSellBook(server, fills=1)
    sfc = _client(server)
    nodes = (f"{BLOCK}-n0", f"{BLOCK}-n1")
    cut = END - timedelta(hours=3)
    action = SellCapacity(
        "act-000042",
        Reason("sell_unused_capacity", "test"),
        BLOCK,
        "sfcompute",
        nodes,
        cut,
        3,
        Decimal("1.25"),
        Decimal("1.25") * 16 * 3,
    )
    outcome = execute(outbox_payload(action, "sfcompute", {}), {"sfcompute": sfc}, NOW)
    [event] = outcome.events
    assert isinstance(event, SaleUpdated) and event.action_id == "act-000042"
    assert event.fill is not None and event.fill.node_ids_sold == nodes[:1]

    # A seller that takes no sell orders fails it for good, as a sale that sold nothing.
    class NoResale:
        name = "aws"

    failed = execute(outbox_payload(action, "aws", {}), {"aws": NoResale()}, NOW)  # type: ignore[dict-item]
    assert failed.failed and isinstance(failed.events[0], SaleUpdated) and failed.events[0].fill is None


def test_the_controllers_sell_order_through_the_client_stops_placing_on_the_sold_node_and_credits_it(
    server: FakeServer,
) -> None:
    """The controller's own ``SellCapacity``, placed by the executor through the SFCompute client against
    the fake book (one of three nodes fills): the engine records the fill, never places on the sold node
    past the cut, and credits the proceeds to the tenant the block was bought for."""
    FakeSellBook(server, fills=1)
    sfc = _client(server)
    c = Controller(ControllerConfig(idle_release_s=10**6))
    books = {"8xH100": MarketBook(BOOK, (BookOrder(Decimal("1.90"), 8, Decimal(24)),) * 4)}
    observed = MarketObserved(sid("m"), (sf_offer(),), NOW, books, ("sfcompute",))
    [buy] = c.step(NOW, [observed, *submit(spec("j", 24, duration=600))])
    assert isinstance(buy, BuyCapacity)
    nodes = tuple(f"{BLOCK}-n{i}" for i in range(3))
    block = replace(grant(buy, NOW, block_id=BLOCK, nodes=nodes), end_time=END)
    order = Order(f"ord-{buy.action_id}", buy.action_id, OrderState.FILLED, buy.request, block)
    c.step(NOW + timedelta(seconds=30), [OrderUpdated(sid("o"), buy.action_id, order)])
    [start] = starts(c.step(NOW + timedelta(seconds=60), ready(*nodes, when=NOW, block_id=BLOCK)))
    done = NOW + timedelta(seconds=700)
    c.step(done, [job_done(p.node_id, "j", done, block_id=BLOCK) for p in start.placements])

    now = NOW + timedelta(minutes=20)
    [offer] = [a for a in c.step(now, [tick()]) if isinstance(a, SellCapacity)]
    assert offer.block_id == BLOCK and offer.node_ids == nodes
    assert offer.cut == END - timedelta(hours=offer.hours) and offer.hours == 23
    outcome = execute(outbox_payload(offer, "sfcompute", {}), {"sfcompute": sfc}, now)
    [answer] = outcome.events
    c.step(now, [answer])

    rec = c.state.blocks[BLOCK]
    sold = nodes[0]
    assert c.state.nodes[sold].node.block.end_time == offer.cut
    assert all(c.state.nodes[n].node.block.end_time == END for n in nodes[1:])
    assert rec.sold_back_revenue == offer.price_per_gpu_hour * 8 * 23
    after = offer.cut + timedelta(minutes=1)
    placed = starts(c.step(after, submit(*(spec(f"late{i}", 8, duration=600) for i in range(3)))))
    used = {p.node_id for s in placed for p in s.placements}
    assert used == set(nodes[1:])  # the two unsold nodes take work; the sold one never does
    credited = {t.tenant: t.sold_back_revenue for t in c.costs().by_tenant if t.sold_back_revenue}
    assert credited == {"default": rec.sold_back_revenue}
