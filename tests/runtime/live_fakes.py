"""Real providers faked on loopback: one FakeServer replays the sample payloads of all six real providers
(their paths do not collide: EC2's query/XML protocol is ``POST /``, GCP's Cloud Billing Catalog is
``GET /v1/services/.../skus``). ``live_env`` points SFCompute, Prime Intellect, RunPod and Azure at it;
``live_env_all`` adds AWS (botocore with ``AWS_ENDPOINT_URL_EC2``) and GCP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from scalar.providers.gcp import SKUS_PATH
from scalar.providers.http import RetryPolicy
from scalar.runtime.prices import RealProvider, real_providers
from tests.providers.fakeserver import FakeServer, Reply, Request
from tests.providers.test_gcp import with_hosts

SAMPLES = Path(__file__).parents[1] / "providers" / "samples"
LIVE = ("azure", "prime", "runpod", "sfcompute")
ALL_LIVE = ("aws", "azure", "gcp", "prime", "runpod", "sfcompute")
AWS_PAGE1_TOKEN = "eyJ2IjoiMiIsImMiOiJGeE1hQ2hJZ0FBQUEiLCJzIjoxfQ=="
GCP_KEY = "test-gcp-key"
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
    server.route(
        "GET",
        "/preview/v2/orderbook/depth",
        Reply.json(sample("sfcompute", "sfcompute_preview_v2_orderbook_depth_response.json")),
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
    serve_clouds(server)


def serve_clouds(server: FakeServer) -> None:
    """AWS's two DescribeSpotPriceHistory sample pages (page 2 when the form carries page 1's
    ``NextToken``), and GCP's two sample SKU pages plus a page of host vCPU/RAM SKUs (``pageToken``)."""
    pages = [(SAMPLES / "aws" / f"aws_describe_spot_price_history_page{n}.xml").read_text() for n in (1, 2)]

    def ec2(req: Request) -> Reply:
        form = parse_qs(req.body.decode())
        if form.get("Action") != ["DescribeSpotPriceHistory"]:
            return Reply.text(
                (SAMPLES / "aws" / "aws_error_response.xml").read_text(), 400, content_type="text/xml"
            )
        page = pages[1] if form.get("NextToken") == [AWS_PAGE1_TOKEN] else pages[0]
        return Reply.text(page, content_type="text/xml;charset=UTF-8")

    server.route("POST", "/", ec2)
    skus = with_hosts()
    server.route("GET", SKUS_PATH, lambda req: Reply.json(skus[req.param("pageToken", "") or ""]))


def break_gcp(server: FakeServer) -> None:
    server.route(
        "GET", SKUS_PATH, Reply.json({"error": {"code": 503, "message": "backend unavailable"}}, 503)
    )


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


def live_env_all(url: str, **extra: str) -> dict[str, str]:
    """All six real providers pointed at ``url`` (AWS with explicit test credentials, one region)."""
    return live_env(
        url,
        AWS_ENDPOINT_URL_EC2=url,
        AWS_ACCESS_KEY_ID="AKIDSCALARTEST",
        AWS_SECRET_ACCESS_KEY="not-a-secret",
        SCALAR_AWS_REGIONS="us-east-1",
        SCALAR_GCP_BASE_URL=url,
        SCALAR_GCP_API_KEY=GCP_KEY,
        SCALAR_GCP_REGIONS="us-central1,us-east4",
        **extra,
    )


def all_live_providers(url: str, **extra: str) -> list[RealProvider]:
    return real_providers(live_env_all(url, **extra), retry=FAST_RETRY, timeout_s=5.0)
