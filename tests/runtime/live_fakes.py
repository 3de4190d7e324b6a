"""Real providers faked on loopback: one FakeServer replays the sample payloads of SFCompute, Prime
Intellect, RunPod and Azure (their paths do not collide), and ``live_env`` points their base URLs at it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scalar.providers.http import RetryPolicy
from scalar.runtime.prices import RealProvider, real_providers
from tests.providers.fakeserver import FakeServer, Reply, Request

SAMPLES = Path(__file__).parents[1] / "providers" / "samples"
LIVE = ("azure", "prime", "runpod", "sfcompute")
FAST_RETRY = RetryPolicy(attempts=2, base_delay_s=0.001, max_delay_s=0.01)


def sample(provider: str, name: str) -> Any:
    return json.loads((SAMPLES / provider / name).read_text())


def serve_samples(server: FakeServer) -> None:
    """Routes answering as the real APIs do with the sample payloads."""
    server.route(
        "GET",
        "/preview/v2/orderbook/quote",
        Reply.json(sample("sfcompute", "sfcompute_preview_v2_orderbook_quote_response.json")),
    )
    prime = [sample("primeintellect", f"primeintellect_availability_gpus_page{n}.json") for n in (1, 2)]

    def prime_pages(req: Request) -> Reply:
        number = int(req.param("page") or 1)
        return Reply.json(prime[number - 1] if number <= len(prime) else {"items": [], "totalCount": 0})

    server.route("GET", "/availability/gpus", prime_pages)
    server.route("POST", "/graphql", Reply.json(sample("runpod", "runpod_graphql_gpuTypes_response.json")))
    azure = {
        "": sample("azure", "azure_retail_prices_page1.json"),
        "1000": sample("azure", "azure_retail_prices_page2.json"),
    }
    server.route("GET", "/api/retail/prices", lambda req: Reply.json(azure[req.param("$skip", "") or ""]))


def break_runpod(server: FakeServer) -> None:
    server.route("POST", "/graphql", Reply.text("upstream exploded", 500))


def live_env(url: str, **extra: str) -> dict[str, str]:
    """SFCompute, Prime Intellect, RunPod and Azure pointed at ``url``; AWS and GCP left off."""
    return {
        "SCALAR_SFCOMPUTE_BASE_URL": url,
        "SCALAR_PRIMEINTELLECT_BASE_URL": url,
        "SCALAR_RUNPOD_BASE_URL": url,
        "SCALAR_AZURE_BASE_URL": url,
        **extra,
    }


def live_providers(url: str, **extra: str) -> list[RealProvider]:
    return real_providers(live_env(url, **extra), retry=FAST_RETRY, timeout_s=5.0)
