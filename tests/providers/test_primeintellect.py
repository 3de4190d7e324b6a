"""The Prime Intellect client against a loopback server replaying Prime Intellect's real payloads."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from scalar.domain.market import CapacityRequest, NodeState, OrderState
from scalar.domain.tier import Tier
from scalar.providers.base import Provider, ProviderError, WorkRunner
from scalar.providers.catalog import load_catalog
from scalar.providers.config import ProviderSettings
from scalar.providers.http import HttpStatusError, RetryPolicy
from scalar.providers.primeintellect import PrimeIntellectProvider, gpu_model_of
from tests.providers.fakeserver import FakeServer, Reply, Request

SAMPLES = Path(__file__).parent / "samples" / "primeintellect"
NOW = datetime(2025, 7, 1, 12, 0, tzinfo=UTC)
KEY = "act-42"
LAMBDA_8XH100 = "lambdalabs__8xH100_80GB__208__1800"


def page(n: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (SAMPLES / f"primeintellect_availability_gpus_page{n}.json").read_text()
    )
    return data


@pytest.fixture(scope="module")
def shared_server() -> Iterator[FakeServer]:
    with FakeServer() as fake:  # one per module: shutting a server down costs its 0.5 s poll interval
        yield fake


@pytest.fixture
def server(shared_server: FakeServer) -> FakeServer:
    shared_server.requests.clear()
    shared_server._routes.clear()
    return shared_server


def client(server: FakeServer, sleeps: list[float] | None = None, **kw: Any) -> PrimeIntellectProvider:
    settings = ProviderSettings("primeintellect", server.url, "pit-test", enabled=True)
    sink = sleeps if sleeps is not None else []
    return PrimeIntellectProvider(
        settings, retry=RetryPolicy(attempts=3, base_delay_s=0.001), sleep=sink.append, **kw
    )


def serve_pages(server: FakeServer, pages: list[dict[str, Any]]) -> None:
    def handler(req: Request) -> Reply:
        number = int(req.param("page") or 1)
        return Reply.json(pages[number - 1] if number <= len(pages) else {"items": [], "totalCount": 0})

    server.route("GET", "/availability/gpus", handler)


class FakePods:
    """Prime's pods API in memory: create, list (paged), get, status, delete."""

    def __init__(self, server: FakeServer, statuses: dict[str, dict[str, Any]] | None = None) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.statuses = statuses if statuses is not None else {}
        self._ids = itertools.count(1)
        server.route("POST", "/pods", self.create)
        server.route("GET", "/pods", self.list)
        server.route("GET", "/pods/status", self.status)
        server.route("DELETE", "/pods/*", self.delete)

    def create(self, req: Request) -> Reply:
        spec = req.json()["pod"]
        pod_id = f"pod-{next(self._ids)}"
        self.pods[pod_id] = {
            "id": pod_id,
            "name": spec["name"],
            "gpuName": spec["gpuType"],
            "gpuCount": spec["gpuCount"],
            "status": "PROVISIONING",
            "createdAt": "2025-07-01T12:00:05Z",
            "providerType": req.json()["provider"]["type"],
            "installationStatus": None,
            "priceHr": 23.92,
            "sshConnection": None,
            "ip": None,
            "isSpot": False,
            "teamId": None,
        }
        return Reply.json(self.pods[pod_id], 200)

    def list(self, req: Request) -> Reply:
        offset, limit = int(req.param("offset") or 0), int(req.param("limit") or 100)
        rows = list(self.pods.values())
        return Reply.json(
            {
                "total_count": len(rows),
                "offset": offset,
                "limit": limit,
                "data": rows[offset : offset + limit],
            }
        )

    def status(self, req: Request) -> Reply:
        ids = req.query.get("pod_ids", [])
        rows = [
            {"podId": i, "providerType": "lambdalabs", **self.statuses[i]} for i in ids if i in self.statuses
        ]
        return Reply.json({"data": rows})

    def delete(self, req: Request) -> Reply:
        pod_id = req.path.rsplit("/", 1)[1]
        if self.pods.pop(pod_id, None) is None:
            return Reply.json({"detail": "Pod not found"}, 404)
        return Reply.json({"status": "ok"})


def request(
    instance_type: str = LAMBDA_8XH100, nodes: int = 2, limit: str | None = "3.00"
) -> CapacityRequest:
    return CapacityRequest(
        provider="prime",
        instance_type=instance_type,
        node_count=nodes,
        duration_s=6 * 3600,
        limit_price_per_gpu_hour=None if limit is None else Decimal(limit),
        tier=Tier.FAST,
        gpus_per_node=8,
    )


# -- offers -----------------------------------------------------------------------------------------
def test_pages_are_followed_to_total_count_and_boxes_priced_per_gpu_hour(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    offers = {o.instance_type: o for o in client(server).list_offers(NOW)}
    assert [r.param("page") for r in server.requests] == ["1", "2"]
    assert {r.param("page_size") for r in server.requests} == {"100"}
    assert len(offers) == 5
    box = offers[LAMBDA_8XH100]
    assert (box.price_per_hour, box.price_per_gpu_hour) == (Decimal("23.92"), Decimal("2.99"))  # 23.92 / 8
    assert (box.gpu_model, box.gpu_count, box.gpu_memory_gb) == (
        "H100",
        8.0,
        80.0,
    )  # gpuMemory 640 is the box's
    assert (box.vcpu, box.memory_gb, box.region, box.availability_zone) == (208.0, 1800.0, "US", "us-west-3")
    assert not box.spot and box.observed_at == NOW
    spot = offers["datacrunch__8xH100_80GB__176__1480__SPOT"]
    assert spot.spot and spot.price_per_gpu_hour == Decimal("0.855")  # 6.84 / 8
    a100 = offers["crusoecloud__8xA100_80GB__96__960"]
    assert a100.gpu_model == "A100-80GB" and a100.price_per_gpu_hour == Decimal("1.65")  # 13.2 / 8


def test_instance_types_are_named_as_the_packaged_catalog_names_them(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    catalog = load_catalog()
    names = [o.instance_type for o in client(server).list_offers(NOW)]
    known = [n for n in names if catalog.spec("prime", n) is not None]
    assert LAMBDA_8XH100 in known and "datacrunch__8xH100_80GB__176__1480__SPOT" in known


def test_community_price_wins_over_on_demand(server: FakeServer) -> None:
    first = page(1)
    first["items"][0]["prices"]["communityPrice"] = 1.5
    serve_pages(server, [{"items": first["items"][:1], "totalCount": 1}])
    (offer,) = client(server).list_offers(NOW)
    assert offer.price_per_hour == Decimal("1.5")


def test_an_empty_listing_has_no_offers(server: FakeServer) -> None:
    serve_pages(server, [{"items": [], "totalCount": 0}])
    assert client(server).list_offers(NOW) == [] and len(server.requests) == 1


def test_an_empty_page_before_total_count_ends_the_listing(server: FakeServer) -> None:
    one = {"items": page(1)["items"][:2], "totalCount": 9}
    serve_pages(server, [one, one, {"items": [], "totalCount": 9}, one])
    assert len(client(server).list_offers(NOW)) == 4 and len(server.requests) == 3


def test_a_listing_past_the_page_cap_is_an_error_naming_the_cap(server: FakeServer) -> None:
    one = {"items": page(2)["items"], "totalCount": 10_000}
    server.route("GET", "/availability/gpus", Reply.json(one))
    with pytest.raises(ProviderError, match="page cap of 4 pages"):
        client(server, max_pages=4).list_offers(NOW)
    assert len(server.requests) == 4


def test_an_item_missing_gpu_count_names_the_page_and_field(server: FakeServer) -> None:
    second = page(2)
    del second["items"][0]["gpuCount"]
    serve_pages(server, [page(1), second])
    with pytest.raises(
        ProviderError, match=r"GET /availability/gpus page 2: items\[0\]\.gpuCount is missing"
    ):
        client(server).list_offers(NOW)


def test_a_price_of_the_wrong_type_names_the_field(server: FakeServer) -> None:
    first = page(1)
    first["items"][2]["prices"]["onDemand"] = {"usd": 6.84}
    serve_pages(server, [first, page(2)])
    with pytest.raises(ProviderError, match=r"items\[2\]\.prices\.onDemand should be a number"):
        client(server).list_offers(NOW)


def test_unknown_gpus_and_unpriced_boxes_are_skipped_with_reasons(server: FakeServer) -> None:
    items = [copy.deepcopy(page(2)["items"][0]) for _ in range(3)]
    items[0]["gpuType"] = "MI300X_192GB"
    items[1]["prices"]["onDemand"] = None
    serve_pages(server, [{"items": items, "totalCount": 3}])
    prime = client(server)
    assert len(prime.list_offers(NOW)) == 1
    reasons = [s.reason for s in prime.skipped]
    assert reasons == [
        "gpuType 'MI300X_192GB' has no canonical GPU model",
        "no price (communityPrice and onDemand are null)",
    ]


@pytest.mark.parametrize(
    ("gpu_type", "model", "vram"),
    [
        ("H100_80GB", "H100", 80.0),
        ("A100_40GB", "A100", 40.0),
        ("A6000_48GB", "RTXA6000", 48.0),
        ("V100_32GB", "V100-32GB", 32.0),
        ("A100_80GB", "A100-80GB", 80.0),
        ("V100_16GB", "V100", 16.0),
        ("H100_NVL", "H100", None),
        ("RTX_4090", "RTX4090", None),
    ],
)
def test_gpu_types_map_to_canonical_models(gpu_type: str, model: str, vram: float | None) -> None:
    assert gpu_model_of(gpu_type) == (model, vram)


def test_401_fails_fast_with_prime_intellects_message(server: FakeServer) -> None:
    sleeps: list[float] = []
    server.route("GET", "/availability/gpus", Reply.json({"detail": "Invalid API key"}, 401))
    with pytest.raises(HttpStatusError, match="Invalid API key") as err:
        client(server, sleeps).list_offers(NOW)
    assert not err.value.retryable and sleeps == [] and len(server.requests) == 1


def test_429_then_200_succeeds(server: FakeServer) -> None:
    sleeps: list[float] = []
    server.route(
        "GET",
        "/availability/gpus",
        [
            Reply.json({"detail": "Too many requests"}, 429, headers={"Retry-After": "1"}),
            Reply.json({"items": page(2)["items"], "totalCount": 1}),
        ],
    )
    assert len(client(server, sleeps).list_offers(NOW)) == 1 and sleeps == [1.0]


def test_a_500_then_timeouts_end_in_a_retryable_error(server: FakeServer) -> None:
    server.route(
        "GET",
        "/availability/gpus",
        [Reply.json({"detail": "boom"}, 500), Reply.json(page(2), delay_s=0.3)],
    )
    with pytest.raises(ProviderError, match="timed out") as err:
        client(server, timeout_s=0.05).list_offers(NOW)
    assert err.value.retryable


def test_malformed_json_is_an_error(server: FakeServer) -> None:
    server.route(
        "GET", "/availability/gpus", Reply.text("<html>502 Bad Gateway</html>", content_type="text/html")
    )
    with pytest.raises(ProviderError, match="malformed JSON"):
        client(server).list_offers(NOW)


# -- pods -------------------------------------------------------------------------------------------
def test_buy_creates_one_named_pod_per_node_from_the_listing(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    pods = FakePods(server)
    order = client(server).buy(request(nodes=2), KEY, NOW)
    created = [r.json() for r in server.requests if r.method == "POST"]
    assert [c["pod"]["name"] for c in created] == ["scalar-act-42-0", "scalar-act-42-1"]
    assert created[0]["pod"] | {"name": None} == {
        "name": None,
        "cloudId": "gpu_8x_h100_sxm5",
        "gpuType": "H100_80GB",
        "socket": "SXM5",
        "gpuCount": 8,
        "diskSize": 50,
        "vcpus": 208,
        "memory": 1800,
        "image": "ubuntu_22_cuda_12",
        "dataCenterId": "us-west-3",
        "country": "US",
        "security": "secure_cloud",
    }
    assert created[0]["provider"] == {"type": "lambdalabs"}
    assert order.state is OrderState.FILLED and order.block is not None
    assert order.block.node_ids == tuple(pods.pods) == ("pod-1", "pod-2")
    assert order.block.price_per_gpu_hour == Decimal("2.99") and order.block.block_id == "scalar-act-42"
    assert order.block.end_time - order.block.start_time == timedelta(hours=6)


def test_buying_again_creates_only_the_missing_pods(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    pods = FakePods(server)
    prime = client(server)
    prime.buy(request(nodes=1), KEY, NOW)
    again = prime.buy(request(nodes=2), KEY, NOW)  # a crash left one of two pods
    assert len(pods.pods) == 2 and again.block is not None and len(again.block.node_ids) == 2
    assert prime.buy(request(nodes=2), KEY, NOW).block == again.block
    assert sum(1 for r in server.requests if r.method == "POST") == 2


def test_a_box_above_the_limit_is_rejected_with_numbers(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    FakePods(server)
    order = client(server).buy(request(limit="2.50"), KEY, NOW)
    assert order.state is OrderState.REJECTED
    assert order.reason == f"cheapest {LAMBDA_8XH100} costs $2.9900/GPU-h, above the limit $2.5000/GPU-h"
    assert not any(r.method == "POST" for r in server.requests)


def test_an_unlisted_shape_is_rejected(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    FakePods(server)
    order = client(server).buy(request(instance_type="nebius__8xH200_141GB__128__1600"), KEY, NOW)
    assert order.state is OrderState.REJECTED and "lists no" in (order.reason or "")


def test_get_order_after_a_restart_finds_the_pods_by_name(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    FakePods(server)
    client(server).buy(request(nodes=2), KEY, NOW)
    found = client(server).get_order(KEY, NOW)  # a new process: nothing in memory
    assert found is not None and found.state is OrderState.FILLED and found.block is not None
    assert found.block.node_ids == ("pod-1", "pod-2")
    assert found.block.price_per_gpu_hour == Decimal("2.99")  # the pod's priceHr 23.92 / 8 GPUs
    assert client(server).get_order("never", NOW) is None


def test_release_deletes_every_pod_of_the_block(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    pods = FakePods(server)
    prime = client(server)
    prime.buy(request(nodes=2), KEY, NOW)
    prime.release("scalar-act-42", NOW)
    assert pods.pods == {}
    prime.release("scalar-act-42", NOW)  # nothing left: fine


def test_release_nodes_deletes_only_those_pods(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    pods = FakePods(server)
    prime = client(server)
    prime.buy(request(nodes=2), KEY, NOW)
    prime.release_nodes("scalar-act-42", ["pod-2"], NOW)
    assert sorted(pods.pods) == ["pod-1"]
    prime.release_nodes("scalar-act-42", ["pod-2"], NOW)  # already gone: fine
    other = client(server)
    other.buy(request(nodes=1), "scalar-act-43", NOW)
    with pytest.raises(ProviderError, match="pods pod-3 are not of block scalar-act-42"):
        other.release_nodes("scalar-act-42", ["pod-3"], NOW)
    assert sorted(pods.pods) == ["pod-1", "pod-3"]


def test_pod_statuses_become_node_events(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    statuses: dict[str, dict[str, Any]] = {}
    FakePods(server, statuses)
    prime = client(server)
    prime.buy(request(nodes=2), KEY, NOW)
    statuses["pod-1"] = {"status": "PROVISIONING"}
    statuses["pod-2"] = {"status": "ACTIVE", "installationProgress": 40}
    events, cursor = prime.events_since(0, NOW)
    assert [(e.node_id, e.state, e.block_id) for e in events] == [
        ("pod-1", NodeState.BOOTING, "scalar-act-42"),
        ("pod-2", NodeState.INITIALIZING, "scalar-act-42"),
    ]
    status_call = [r for r in server.requests if r.path == "/pods/status"][-1]
    assert status_call.query["pod_ids"] == ["pod-1", "pod-2"]
    statuses["pod-2"] = {
        "status": "ACTIVE",
        "installationProgress": 100,
        "sshConnection": ["root@1.2.3.4 -p 22"],
    }
    moved, cursor = prime.events_since(cursor, NOW + timedelta(minutes=2))
    assert [(e.node_id, e.state) for e in moved] == [("pod-2", NodeState.READY)]
    assert moved[0].details["ssh"] == "root@1.2.3.4 -p 22" and cursor == 3
    del statuses["pod-1"]
    gone, cursor = prime.events_since(cursor, NOW + timedelta(minutes=3))
    assert [(e.node_id, e.state) for e in gone] == [("pod-1", NodeState.TERMINATED)] and cursor == 4


def test_a_status_row_missing_its_status_names_it(server: FakeServer) -> None:
    serve_pages(server, [page(1), page(2)])
    statuses: dict[str, dict[str, Any]] = {}
    FakePods(server, statuses)
    prime = client(server)
    prime.buy(request(nodes=1), KEY, NOW)
    statuses["pod-1"] = {"installationProgress": 10}
    with pytest.raises(ProviderError, match=r"GET /pods/status: data\[0\]\.status is missing"):
        prime.events_since(0, NOW)


def test_it_is_a_provider_without_an_orderbook(server: FakeServer) -> None:
    prime = client(server)
    assert isinstance(prime, Provider) and prime.orderbook(LAMBDA_8XH100, NOW) is None
    assert not isinstance(prime, WorkRunner)  # work on its pods runs through the node agent
