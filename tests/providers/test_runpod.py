"""The RunPod client against a loopback GraphQL server replaying RunPod's real payloads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from scalar.domain.market import CapacityRequest
from scalar.domain.tier import Tier
from scalar.providers.base import Provider, ProviderError
from scalar.providers.config import ProviderSettings
from scalar.providers.http import HttpStatusError, RetryPolicy
from scalar.providers.runpod import RunPodProvider
from tests.providers.fakeserver import FakeServer, Reply, Request

SAMPLES = Path(__file__).parent / "samples" / "runpod"
NOW = datetime(2025, 7, 1, 12, 0, tzinfo=UTC)


def sample(name: str) -> Any:
    return json.loads((SAMPLES / f"runpod_{name}.json").read_text())


@pytest.fixture(scope="module")
def shared_server() -> Iterator[FakeServer]:
    with FakeServer() as fake:  # one per module: shutting a server down costs its 0.5 s poll interval
        yield fake


@pytest.fixture
def server(shared_server: FakeServer) -> FakeServer:
    shared_server.requests.clear()
    shared_server._routes.clear()
    return shared_server


def client(server: FakeServer, sleeps: list[float] | None = None, **kw: Any) -> RunPodProvider:
    settings = ProviderSettings("runpod", server.url, "rp-test", data_url=server.url + "/v2", enabled=True)
    sink = sleeps if sleeps is not None else []
    return RunPodProvider(
        settings, retry=RetryPolicy(attempts=3, base_delay_s=0.001), sleep=sink.append, **kw
    )


def graphql_gpu_types(req: Request) -> Reply:
    """Answer gpuTypes as the sample does for 1 GPU; more GPUs cost the same per GPU."""
    return Reply.json(sample("graphql_gpuTypes_response"))


# -- offers -----------------------------------------------------------------------------------------
def test_gpu_prices_become_per_instance_offers(server: FakeServer) -> None:
    server.route("POST", "/graphql", graphql_gpu_types)
    offers = client(server, gpu_counts=(1, 8)).list_offers(NOW)
    by_key = {(o.instance_type, o.spot): o for o in offers}
    # H100 SXM: $2.99/GPU-h on demand, $2.69 spot bid; a pod of 8 costs 8x.
    assert by_key[("1x_H100-SXM_SECURE", False)].price_per_hour == Decimal("2.99")
    assert by_key[("8x_H100-SXM_SECURE", False)].price_per_hour == Decimal("23.92")
    assert by_key[("8x_H100-SXM_SECURE", True)].price_per_hour == Decimal("21.52")
    assert by_key[("8x_H100-SXM_SECURE", False)].price_per_gpu_hour == Decimal("2.99")
    a100 = by_key[("8x_A100-80GB_SECURE", False)]
    assert (a100.gpu_model, a100.gpu_count, a100.gpu_memory_gb) == ("A100-80GB", 8.0, 80.0)
    assert a100.price_per_hour == Decimal("13.12")  # 1.64 x 8
    assert (a100.vcpu, a100.memory_gb) == (8.0, 117.0)  # lowestPrice minVcpu / minMemory as answered
    # L4 has no spot bid; H200 has no stock (stockStatus null): no offers.
    assert ("1x_L4_SECURE", True) not in by_key and ("1x_L4_SECURE", False) in by_key
    assert not any("H200" in o.instance_type for o in offers)
    assert len(offers) == 2 * 5  # per count: H100 x2, A100 x2, L4 x1


def test_the_query_asks_lowest_price_per_gpu_count_and_cloud(server: FakeServer) -> None:
    server.route("POST", "/graphql", graphql_gpu_types)
    client(server, gpu_counts=(1, 2), community_cloud=True).list_offers(NOW)
    variables = [r.json()["variables"] for r in server.requests]
    assert variables == [
        {"lowestPriceInput": {"gpuCount": 1, "secureCloud": True}},
        {"lowestPriceInput": {"gpuCount": 2, "secureCloud": True}},
        {"lowestPriceInput": {"gpuCount": 1, "secureCloud": False}},
        {"lowestPriceInput": {"gpuCount": 2, "secureCloud": False}},
    ]
    sent = server.requests[0]
    assert sent.json()["variables"] == sample("graphql_gpuTypes_request")["variables"]
    assert "lowestPrice(input: $lowestPriceInput)" in sent.json()["query"]
    assert sent.headers["authorization"] == "Bearer rp-test"


def test_community_offers_are_named_community(server: FakeServer) -> None:
    server.route("POST", "/graphql", graphql_gpu_types)
    offers = client(server, gpu_counts=(1,), secure_cloud=False, community_cloud=True).list_offers(NOW)
    # L4 is not in the community cloud in the sample.
    assert sorted({o.instance_type for o in offers}) == ["1x_A100-80GB_COMMUNITY", "1x_H100-SXM_COMMUNITY"]


def test_graphql_errors_with_http_200_raise_with_the_message(server: FakeServer) -> None:
    server.route("POST", "/graphql", Reply.json(sample("graphql_error_response"), 200))
    with pytest.raises(ProviderError, match=r"Something went wrong\. Please try again later") as err:
        client(server).list_offers(NOW)
    assert not err.value.retryable and "INTERNAL_SERVER_ERROR" in str(err.value)


def test_a_rate_limit_graphql_error_is_retryable(server: FakeServer) -> None:
    limited = {"errors": [{"message": "You have been rate limited. Slow down."}], "data": None}
    server.route("POST", "/graphql", Reply.json(limited))
    with pytest.raises(ProviderError, match="rate limited") as err:
        client(server).list_offers(NOW)
    assert err.value.retryable


def test_401_fails_fast_with_runpods_message(server: FakeServer) -> None:
    sleeps: list[float] = []
    server.route(
        "POST",
        "/graphql",
        Reply.json({"errors": [{"message": "Unauthorized request, please check your API key."}]}, 401),
    )
    with pytest.raises(HttpStatusError, match="Unauthorized request") as err:
        client(server, sleeps).list_offers(NOW)
    assert err.value.status == 401 and sleeps == [] and len(server.requests) == 1


def test_429_then_200_succeeds(server: FakeServer) -> None:
    sleeps: list[float] = []
    server.route(
        "POST",
        "/graphql",
        [
            Reply.text("Too Many Requests", 429, headers={"Retry-After": "3"}),
            Reply.json(sample("graphql_gpuTypes_response")),
        ],
    )
    assert len(client(server, sleeps, gpu_counts=(1,)).list_offers(NOW)) == 5 and sleeps == [3.0]


def test_500s_exhaust_retries(server: FakeServer) -> None:
    sleeps: list[float] = []
    server.route("POST", "/graphql", Reply.text("upstream error", 502))
    with pytest.raises(HttpStatusError, match="upstream error") as err:
        client(server, sleeps).list_offers(NOW)
    assert err.value.retryable and len(server.requests) == 3


def test_a_timeout_is_a_retryable_error(server: FakeServer) -> None:
    server.route("POST", "/graphql", Reply.json(sample("graphql_gpuTypes_response"), delay_s=0.3))
    with pytest.raises(ProviderError, match="timed out"):
        client(server, timeout_s=0.05).list_offers(NOW)


def test_malformed_json_is_an_error(server: FakeServer) -> None:
    server.route("POST", "/graphql", Reply.text('{"data": {"gpuTypes": [', content_type="application/json"))
    with pytest.raises(ProviderError, match="malformed JSON"):
        client(server).list_offers(NOW)


def test_a_gpu_missing_its_memory_names_the_field(server: FakeServer) -> None:
    answer = sample("graphql_gpuTypes_response")
    del answer["data"]["gpuTypes"][1]["memoryInGb"]
    server.route("POST", "/graphql", Reply.json(answer))
    with pytest.raises(ProviderError, match=r"GraphQL gpuTypes: data\.gpuTypes\[1\]\.memoryInGb is missing"):
        client(server).list_offers(NOW)


def test_a_price_of_the_wrong_type_names_the_field(server: FakeServer) -> None:
    answer = sample("graphql_gpuTypes_response")
    answer["data"]["gpuTypes"][0]["lowestPrice"]["uninterruptablePrice"] = [2.99]
    server.route("POST", "/graphql", Reply.json(answer))
    with pytest.raises(
        ProviderError, match=r"gpuTypes\[0\]\.lowestPrice\.uninterruptablePrice should be a number"
    ):
        client(server).list_offers(NOW)


def test_data_null_without_errors_is_an_error(server: FakeServer) -> None:
    server.route("POST", "/graphql", Reply.json({"data": None}))
    with pytest.raises(ProviderError, match="data is null"):
        client(server).list_offers(NOW)


def test_an_empty_gpu_list_has_no_offers(server: FakeServer) -> None:
    server.route("POST", "/graphql", Reply.json({"data": {"gpuTypes": []}}))
    assert client(server).list_offers(NOW) == []


# -- serverless endpoints ---------------------------------------------------------------------------
def test_save_endpoint_sends_the_endpoint_input_as_variables(server: FakeServer) -> None:
    example = sample("example_payloads")["saveEndpoint_input_example_gpu"]
    server.route(
        "POST", "/graphql", Reply.json({"data": {"saveEndpoint": {"id": "ep-9xk2", "name": example["name"]}}})
    )
    endpoint_id = client(server).save_endpoint(example)
    assert endpoint_id == "ep-9xk2"
    sent = server.requests[0].json()
    assert sent["variables"] == {"input": example}
    assert sent["query"].startswith("mutation saveEndpoint($input: EndpointInput!)")


def test_save_endpoint_joins_lists_into_runpods_comma_strings(server: FakeServer) -> None:
    server.route("POST", "/graphql", Reply.json({"data": {"saveEndpoint": {"id": "ep-1"}}}))
    client(server).save_endpoint(
        {
            "name": "llm",
            "gpuIds": ["AMPERE_80", "ADA_80_PRO"],
            "allowedCudaVersions": ["12.4", "12.1"],
            "workersMin": 0,
            "workersMax": 4,
            "scalerType": "REQUEST_COUNT",
            "scalerValue": 2,
            "templateId": "tpl-1",
        }
    )
    sent = server.requests[0].json()["variables"]["input"]
    assert sent["gpuIds"] == "AMPERE_80,ADA_80_PRO" and sent["allowedCudaVersions"] == "12.4,12.1"
    assert (sent["workersMin"], sent["workersMax"], sent["scalerType"]) == (0, 4, "REQUEST_COUNT")


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"name": "x", "gpuIds": "AMPERE_80", "scalerType": "CPU"}, "scalerType is 'CPU'"),
        (
            {"name": "x", "gpuIds": "AMPERE_80", "workersMin": 3, "workersMax": 1},
            r"workersMin \(3\) is above workersMax \(1\)",
        ),
        ({"name": "x", "gpuIds": "AMPERE_80", "workersMax": -1}, "workersMax should be a whole number"),
        ({"name": "x"}, "gpuIds is required"),
        ({"name": "x", "gpuIds": "AMPERE_80", "gpuType": "H100"}, "gpuType is not an EndpointInput field"),
    ],
)
def test_a_bad_endpoint_input_is_refused_before_sending(
    server: FakeServer, fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ProviderError, match=problem) as err:
        client(server).save_endpoint(fields)
    assert not err.value.retryable and server.requests == []


def test_update_needs_only_the_id(server: FakeServer) -> None:
    server.route("POST", "/graphql", Reply.json({"data": {"saveEndpoint": {"id": "ep-1"}}}))
    assert client(server).save_endpoint({"id": "ep-1", "workersMax": 0}) == "ep-1"


def test_save_endpoint_errors_with_http_200_raise(server: FakeServer) -> None:
    answer = {
        "errors": [{"message": "Template not found", "path": ["saveEndpoint"]}],
        "data": {"saveEndpoint": None},
    }
    server.route("POST", "/graphql", Reply.json(answer))
    with pytest.raises(ProviderError, match="saveEndpoint failed: Template not found"):
        client(server).save_endpoint({"name": "x", "gpuIds": "AMPERE_80", "templateId": "missing"})


def test_delete_endpoint_sends_the_id(server: FakeServer) -> None:
    server.route("POST", "/graphql", Reply.json({"data": {"deleteEndpoint": None}}))
    client(server).delete_endpoint("ep-9xk2")
    sent = server.requests[0].json()
    assert sent["variables"] == {"id": "ep-9xk2"} and "deleteEndpoint(id: $id)" in sent["query"]


def test_endpoint_health_reads_the_data_plane(server: FakeServer) -> None:
    health = sample("example_payloads")["health_response (GET https://api.runpod.ai/v2/{id}/health)"]
    server.route("GET", "/v2/ep-9xk2/health", Reply.json(health))
    answer = client(server).endpoint_health("ep-9xk2")
    assert answer.workers["initializing"] == 1 and answer.jobs["inQueue"] == 1


# -- what RunPod does not do here -------------------------------------------------------------------
def test_buying_pods_is_not_supported_yet(server: FakeServer) -> None:
    runpod = client(server)
    req = CapacityRequest("runpod", "1x_H100-SXM_SECURE", 1, 3600, Decimal("3"), Tier.FAST)
    with pytest.raises(ProviderError, match="bought per pod") as err:
        runpod.buy(req, "k", NOW)
    assert not err.value.retryable
    assert runpod.get_order("k", NOW) is None and runpod.events_since(5, NOW) == ([], 5)
    assert isinstance(runpod, Provider) and runpod.orderbook("1x_H100-SXM_SECURE", NOW) is None
