"""GET /orderbook answers in seed 000's response shape (plus insufficient_liquidity, fill, the scores), over
the built-in market's live book (a real control plane; the seed's own worked example is checked on its book
file by ``tests/cli/test_orderbook_cli.py``)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.test_jobs_api import problem_of

# Seed 000, "API Endpoints / GET /orderbook / Response".
SEED_KEYS = {
    "instance_type",
    "asks",
    "bids",
    "optimal_price",
    "optimal_index",
    "spread",
    "total_ask_liquidity",
    "total_bid_liquidity",
    "last_updated",
    "metadata",
}
ASK_KEYS = {"price", "quantity_gpus", "duration_hours", "cumulative_quantity"}
BID_KEYS = {"price", "quantity_gpus", "duration_hours"}
METADATA_KEYS = {"required_gpus", "node_count", "gpus_per_node"}
# What Scalar adds to the seed's shape: the fill estimate and the explanation of the choice.
ADDED_KEYS = {"insufficient_liquidity", "fill", "min_viable_index", "scores", "reason", "warnings"}


def assert_seed_shape(body: dict[str, Any]) -> None:
    assert set(body) == SEED_KEYS | ADDED_KEYS
    assert body["asks"] and all(set(a) == ASK_KEYS for a in body["asks"])
    assert all(set(b) == BID_KEYS for b in body["bids"])
    assert set(body["metadata"]) == METADATA_KEYS
    assert isinstance(body["instance_type"], str)
    assert isinstance(body["last_updated"], str) and body["last_updated"].endswith("Z")
    for key in ("total_ask_liquidity", "total_bid_liquidity"):
        assert isinstance(body[key], int)
    for ask in body["asks"]:
        assert isinstance(ask["price"], int | float) and isinstance(ask["cumulative_quantity"], int)
    assert isinstance(body["insufficient_liquidity"], bool)


def get_book(client: httpx.Client, **params: Any) -> dict[str, Any]:
    response = client.get("/orderbook", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    return body


def assert_consistent(body: dict[str, Any]) -> None:
    """The book's totals, running sums and chosen level agree with its own rows."""
    asks = body["asks"]
    quantities = [a["quantity_gpus"] for a in asks]
    assert [a["cumulative_quantity"] for a in asks] == [sum(quantities[: i + 1]) for i in range(len(asks))]
    assert body["total_ask_liquidity"] == sum(quantities)
    assert body["total_bid_liquidity"] == sum(b["quantity_gpus"] for b in body["bids"])
    assert [a["price"] for a in asks] == sorted(a["price"] for a in asks)
    assert body["optimal_price"] == asks[body["optimal_index"]]["price"]


def test_8_nodes_of_8xh100_bid_at_a_level_that_covers_64_gpus_in_the_seeds_shape(
    client: httpx.Client,
) -> None:
    body = get_book(client, instance_type="8xH100", node_count=8)

    assert_seed_shape(body)
    assert_consistent(body)
    assert body["metadata"] == {"required_gpus": 64, "node_count": 8, "gpus_per_node": 8}
    assert body["total_ask_liquidity"] >= 64  # the built-in market's book is deep enough
    assert body["insufficient_liquidity"] is False
    viable = body["min_viable_index"]
    cumulative = [a["cumulative_quantity"] for a in body["asks"]]
    assert cumulative[viable] >= 64 and (viable == 0 or cumulative[viable - 1] < 64)
    assert body["optimal_index"] >= viable  # the chosen level covers the need
    assert body["fill"]["filled_gpus"] == 64
    assert body["reason"]["code"] == "optimal_level" and body["reason"]["need"] == 64


def test_node_count_defaults_to_one_and_gpus_per_node_comes_from_the_instance_type(
    client: httpx.Client,
) -> None:
    body = get_book(client, instance_type="8xH100")

    assert body["metadata"] == {"required_gpus": 8, "node_count": 1, "gpus_per_node": 8}


def test_more_gpus_than_the_book_holds_is_flagged_insufficient_liquidity_at_the_lowest_ask(
    client: httpx.Client,
) -> None:
    body = get_book(client, instance_type="8xH100", node_count=1000)

    assert_seed_shape(body)
    assert_consistent(body)
    assert body["metadata"]["required_gpus"] == 8000 > body["total_ask_liquidity"]
    assert body["insufficient_liquidity"] is True
    assert (body["optimal_price"], body["optimal_index"]) == (body["asks"][0]["price"], 0)
    assert body["fill"]["filled_gpus"] == body["total_ask_liquidity"]
    assert body["reason"]["code"] == "insufficient_liquidity"
    assert [w["code"] for w in body["warnings"]] == ["insufficient_liquidity"]


def test_an_unknown_instance_type_is_a_404_problem_naming_it(client: httpx.Client) -> None:
    body = problem_of(client.get("/orderbook", params={"instance_type": "8xA100"}), 404)

    assert (body["type"], body["title"]) == ("urn:scalar:problem:not-found", "Not found")
    assert [e["field"] for e in body["errors"]] == ["instance_type"]
    assert "8xA100" in body["detail"]  # the value given is named


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "instance_type"),
        ({"instance_type": ""}, "instance_type"),
        ({"instance_type": "8xH100", "node_count": 0}, "node_count"),
        ({"instance_type": "8xH100", "node_count": "two"}, "node_count"),
        ({"instance_type": "8xH100", "gpus_per_node": 0}, "gpus_per_node"),
    ],
)
def test_bad_parameters_are_422_problems_naming_them(
    client: httpx.Client, params: dict[str, Any], field: str
) -> None:
    body = problem_of(client.get("/orderbook", params=params), 422)

    assert [e["field"] for e in body["errors"]] == [field]
