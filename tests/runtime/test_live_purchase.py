"""The control plane buying through real clients (faked over HTTP on loopback) mixed with the built-in market.

An enabled real provider that can buy (SFCompute, Prime Intellect) replaces the built-in market's seller of
its name: the controller sees its offers and books, buys through its client and releases through it; the
built-in market keeps selling under the other names. Time is injected; the tests drive the leader and the
executor themselves.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from scalar.engine import ControllerConfig
from scalar.engine.codec import event_to_dict
from scalar.engine.events import AgentRegistered
from scalar.providers.sfcompute import order_total_cents
from scalar.runtime import ControlPlane
from scalar.runtime.live_sellers import choose_sellers
from scalar.runtime.prices import real_providers
from tests.providers.fakeserver import FakeServer, Reply, Request
from tests.providers.test_primeintellect import FakePods
from tests.runtime.helpers import Clock, drive, job, settings_for
from tests.runtime.live_fakes import FAST_RETRY, sample, serve_samples

HOUR = 3600
DAY = 24 * HOUR


class FakeOrders:
    """SFCompute's orders API in memory: a create rests (``pending``), and fills on the next look."""

    def __init__(self, server: FakeServer, clock: Clock) -> None:
        self.clock = clock
        self.orders: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, str] = {}  # Idempotency-Key -> order id
        self.creates: list[Request] = []
        self._ids = itertools.count(1)
        server.route("POST", "/v0/orders", self.create)
        server.route("GET", "/v0/orders/*", self.get)
        server.route("DELETE", "/v0/orders/*", self.cancel)

    def create(self, req: Request) -> Reply:
        self.creates.append(req)
        key = req.headers.get("idempotency-key", "")
        if key in self.keys:  # SFCompute deduplicates creates by Idempotency-Key
            return Reply.json({"object": "order", "status": "pending", "id": self.keys[key]}, 201)
        body = req.json()
        order_id = f"ordr_{next(self._ids)}"
        start = body["start_at"]
        if start == "NOW":  # SFCompute starts a NOW order at the next whole minute
            start = self.clock.now.replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.keys[key] = order_id
        self.orders[order_id] = {
            **sample("sfcompute", "sfcompute_v0_list_orders_response.json")["data"][0],
            "id": order_id,
            "status": "open",
            "instance_type": body["instance_type"],
            "quantity": body["quantity"],
            "start_at": start,
            "end_at": body["end_at"],
            "price": body["price"],
            "execution_price": None,
            "executed": False,
        }
        return Reply.json({"object": "order", "status": "pending", "id": order_id}, 201)

    def get(self, req: Request) -> Reply:
        order = self.orders.get(req.path.rsplit("/", 1)[1])
        if order is None:
            return Reply.json({"error": {"type": "not_found", "message": "no such order"}}, 404)
        if order["status"] == "open":  # matched on the next look: filled at the asked price
            order.update(status="filled", executed=True, execution_price=order["price"])
        return Reply.json(order)

    def cancel(self, req: Request) -> Reply:
        order = self.orders.get(req.path.rsplit("/", 1)[1])
        if order is None:
            return Reply.json({"error": {"type": "not_found", "message": "no such order"}}, 404)
        order["status"] = "cancelled"
        return Reply.json({"object": "pending"})


@pytest.fixture(scope="module")
def shared_server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def server(shared_server: FakeServer) -> FakeServer:
    shared_server.requests.clear()
    shared_server._routes.clear()
    serve_samples(shared_server)
    # A deep book: 20 nodes at $16.00/node-hour ($2.00/GPU-h), enough for a 16-node order.
    depth = sample("sfcompute", "sfcompute_preview_v2_orderbook_depth_response.json")
    depth["asks"] = [{"dollars_per_node_hour": "16.000000", "node_count": 20}]
    quote = sample("sfcompute", "sfcompute_preview_v2_orderbook_quote_response.json")
    quote["best_ask"] = {"dollars_per_node_hour": "16.000000", "node_count": 20}
    shared_server.route("GET", "/preview/v2/orderbook/depth", Reply.json(depth))
    shared_server.route("GET", "/preview/v2/orderbook/quote", Reply.json(quote))
    return shared_server


def plane(
    server: FakeServer, db_url: str, tmp_path: Path, clock: Clock, env: dict[str, str], **config: Any
) -> ControlPlane:
    controller = {"idle_release_s": 120, "flex_batch_wait_s": 30, **config}
    settings = settings_for(
        db_url,
        tmp_path,
        enabled=("sfcompute", "prime", "runpod"),
        controller=ControllerConfig.from_dict(controller),
    )
    specs = real_providers(env, retry=FAST_RETRY, timeout_s=5.0)
    return ControlPlane(settings, clock=clock, live_providers=specs)


def actions(cp: ControlPlane, kind: str) -> list[Any]:
    assert cp.store is not None
    with cp.store.read() as tx:
        return [a for a in tx.list_actions() if a.kind == kind]


def register_agents(cp: ControlPlane, clock: Clock, node_ids: list[str]) -> None:
    """The node agent of each node registers (as ``POST /agent/register`` records it): the node is READY.
    Real sellers' nodes run work only through the agent, so until then they are held INITIALIZING."""
    assert cp.store is not None
    with cp.store.write() as tx:
        for node_id in node_ids:
            tx.add_inbox("agent", node_id, event_to_dict(AgentRegistered("inbox", node_id)), now=clock.now)


def run_until(cp: ControlPlane, clock: Clock, done: Any, seconds: int = 120) -> None:
    for _ in range(seconds):
        if done():
            return
        drive([cp], clock, 1)
    assert done(), "the expected moment never came"


def pods_created_now(server: FakeServer, clock: Clock) -> FakePods:
    """Prime's pods API faked in memory, each pod created at the test's clock time."""
    pods = FakePods(server)
    create = pods.create

    def created_now(req: Request) -> Reply:
        reply = create(req)
        pod = json.loads(reply.body)
        pods.pods[pod["id"]]["createdAt"] = clock.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        return Reply.json(pods.pods[pod["id"]])

    server.route("POST", "/pods", created_now)
    return pods


def test_the_rule_replaces_only_purchasable_builtin_sellers() -> None:
    env = {"SCALAR_SFCOMPUTE_BASE_URL": "http://127.0.0.1:9", "SCALAR_RUNPOD_API_KEY": "k"}
    sellers = choose_sellers(real_providers(env), ("sfcompute", "prime", "runpod", "aws"))
    try:
        assert set(sellers.live) == {"sfcompute"}
        assert sellers.builtin_names == ("prime", "runpod", "aws")
        roles = sellers.roles()
        assert roles["sfcompute"]["sells"] == "live" and roles["runpod"]["sells"] == "builtin"
        assert "prices only" in roles["runpod"]["sells_note"] and roles["gcp"]["sells"] == "none"
        assert [s.name for s in sellers.sources()] == ["live-sfcompute"]
        # price collection shares the very client the controller buys through
        spec = next(s for s in sellers.specs if s.name == "sfcompute")
        assert spec.build is not None and spec.build() is sellers.live["sfcompute"]
    finally:
        sellers.close()


def test_a_16_node_job_becomes_one_sfcompute_order_with_its_key_and_exact_total_cents(
    server: FakeServer, db_url: str, tmp_path: Path
) -> None:
    clock = Clock()
    orders = FakeOrders(server, clock)
    group = {"name": "sf", "providers": ["sfcompute"], "instance_types": ["8xH100"], "max_slices": 16}
    cp = plane(
        server,
        db_url,
        tmp_path,
        clock,
        {"SCALAR_SFCOMPUTE_BASE_URL": server.url, "SCALAR_SFCOMPUTE_API_KEY": "sf-test"},
        scale_groups=[group],
        contract_length_s=DAY,
    )
    try:
        cp.run_once()
        assert cp.providers["sfcompute"] is not None and cp.sellers is not None
        assert cp.sellers.sells("sfcompute") == "live" and cp.sellers.sells("prime") == "builtin"
        submitted = cp.submit_job(job(128, 1800))
        for _ in range(30):  # leader steps only: the purchase is decided, not executed yet
            if actions(cp, "BuyCapacity"):
                break
            clock.advance(1)
            cp.run_once()
        (buy,) = actions(cp, "BuyCapacity")
        # Work on SFCompute nodes starts through the node agent; cancelled now, the job never needs it.
        cp.cancel_job(submitted.id)
        request = buy.payload["action"]["request"]
        assert (request["provider"], request["instance_type"], request["node_count"]) == (
            "sfcompute",
            "8xH100",
            16,
        )
        assert Decimal(str(request["limit_price_per_gpu_hour"])) == Decimal("2")  # the live book's level
        # The contract is sized to the demand (whole hours the 30-minute job and the forecast fill, not the
        # configured day): hourly-aligned, at most the configured length.
        duration_s = int(request["duration_s"])
        assert duration_s % 3600 == 0 and 3600 <= duration_s <= DAY
        hours = duration_s // 3600
        # Execute on the hour, so the CLI-style window is exactly the contract.
        clock.now = clock.now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        while cp.run_executor_once():
            pass
        (create,) = orders.creates
        body = create.json()
        assert create.headers["idempotency-key"] == buy.action_id
        assert create.headers["authorization"] == "Bearer sf-test"
        assert (body["side"], body["instance_type"], body["quantity"]) == ("buy", "h100i", 16)
        # 16 nodes x 8 GPUs x the hours x $2.00 in cents for the whole order (not 8x that).
        assert body["price"] == 16 * 8 * hours * 200
        assert body["price"] == order_total_cents(Decimal("2.00"), 16, duration_s)
        assert body["start_at"] == "NOW" and body["end_at"] == (
            clock.now + timedelta(seconds=duration_s)
        ).strftime("%Y-%m-%dT%H:%M:%SZ")
        # The order rested (pending): the action is asked again with the same key, which finds it filled.
        clock.advance(5)
        run_until(cp, clock, lambda: actions(cp, "BuyCapacity")[0].status == "done", 30)
        assert (
            len(orders.orders) == len(orders.creates) == 1
        )  # asked again: found by its key, not bought twice
        assert buy.action_id in orders.keys and orders.orders["ordr_1"]["status"] == "filled"
        assert cp.get_job(submitted.id).state == "CANCELLED"  # type: ignore[union-attr]
        assert cp.settings.controller.agent_providers == ("sfcompute",)  # real nodes run work via the agent
        register_agents(cp, clock, [f"ordr_1-n{i}" for i in range(16)])
        # The block is idle: released through the client, which looks the order up. A filled SFCompute
        # contract ends early only by selling it back, which Scalar does not do: the refusal is recorded.
        run_until(cp, clock, lambda: bool(actions(cp, "ReleaseBlock")), 600)
        run_until(cp, clock, lambda: actions(cp, "ReleaseBlock")[0].status != "pending", 30)
        (release,) = actions(cp, "ReleaseBlock")
        assert (
            release.payload["provider"] == "sfcompute" and release.payload["action"]["block_id"] == "ordr_1"
        )
        assert release.status == "failed" and "sell" in (release.error or "")
        assert any(r.method == "GET" and r.path == "/v0/orders/ordr_1" for r in server.requests)
    finally:
        cp.stop()


def test_prime_pods_are_bought_and_released_through_the_client_beside_builtin_sellers(
    server: FakeServer, db_url: str, tmp_path: Path
) -> None:
    clock = Clock()
    pods = pods_created_now(server, clock)
    group = {"name": "prime", "providers": ["prime"], "gpu_models": ["H100"], "max_slices": 2}
    env = {"SCALAR_PRIMEINTELLECT_BASE_URL": server.url, "SCALAR_RUNPOD_BASE_URL": server.url}
    cp = plane(server, db_url, tmp_path, clock, env, scale_groups=[group])
    try:
        cp.run_once()
        assert cp.sellers is not None
        assert cp.sellers.sells("prime") == "live" and cp.sellers.sells("sfcompute") == "builtin"
        assert cp.sellers.sells("runpod") == "builtin"  # RunPod gives prices only; the built-in sells
        submitted = cp.submit_job(job(1, 60))
        run_until(cp, clock, lambda: bool(pods.pods))
        cp.cancel_job(submitted.id)  # work starts through the node agent: the job does not wait for it
        (pod,) = pods.pods.values()
        assert pod["name"].startswith("scalar-") and pod["gpuName"].startswith("H100")
        (buy,) = [a for a in actions(cp, "BuyCapacity") if a.payload["provider"] == "prime"]
        assert buy.status == "done" and pod["name"] == f"scalar-{buy.action_id}-0"
        pods.statuses[pod["id"]] = {"status": "ACTIVE", "installationProgress": 100}
        drive([cp], clock, 2)
        register_agents(cp, clock, [pod["id"]])
        # Nothing runs there (work starts through the node agent): the idle block is released by its client.
        run_until(cp, clock, lambda: bool(actions(cp, "ReleaseBlock")), 600)
        run_until(cp, clock, lambda: actions(cp, "ReleaseBlock")[0].status == "done", 60)
        assert pods.pods == {}  # DELETE /pods/{id}
        assert any(r.method == "DELETE" and r.path == f"/pods/{pod['id']}" for r in server.requests)
    finally:
        cp.stop()
