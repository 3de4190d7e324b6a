"""Real providers faked on loopback: one FakeServer replays the sample payloads of all six real providers
(their paths do not collide: EC2's query/XML protocol is ``POST /``, GCP's Cloud Billing Catalog is
``GET /v1/services/.../skus``). ``live_env`` points SFCompute, Prime Intellect, RunPod and Azure at it;
``live_env_all`` adds AWS (botocore with ``AWS_ENDPOINT_URL_EC2``) and GCP."""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from collections.abc import Callable
from datetime import datetime
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


class FakeSFComputeNodes:
    """SFCompute's nodes API (``POST /v1/nodes``, ``node-api_CreateNodesRequest``) in memory, checking a create
    as SFCompute would: integer cents per node-hour, Unix-second times with ``end_at`` on the hour, ``names``
    matching ``desired_count``, base64 ``cloud_init_user_data``; 400 ``invalid_request_error`` otherwise.
    Creates are deduplicated by ``Idempotency-Key``. The samples hold no response shape: the answer,
    ``{object: "list", data: [{object: "node", id, name, status, ...}]}``, is designed from the request."""

    def __init__(self, server: FakeServer, now: Callable[[], datetime]) -> None:
        self.now = now
        self.creates: list[Request] = []  # the accepted ones
        self.nodes: dict[str, dict[str, Any]] = {}  # name -> node
        self.keys: dict[str, list[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        server.route("POST", "/v1/nodes", self.create)

    @staticmethod
    def _bad(message: str) -> Reply:
        return Reply.json({"error": {"type": "invalid_request_error", "message": message}}, 400)

    def create(self, req: Request) -> Reply:
        key = req.headers.get("idempotency-key")
        if key is not None and key in self.keys:
            return Reply.json({"object": "list", "data": self.keys[key]}, 201)
        body = req.json()
        if not isinstance(body, dict):
            return self._bad("body must be a JSON object")
        ints = ("desired_count", "max_price_per_node_hour", "start_at", "end_at")
        for name in ints:
            if not isinstance(body.get(name), int) or isinstance(body.get(name), bool):
                return self._bad(f"{name} must be an integer (cents per node-hour; unix seconds)")
        count, cap, start, end = (body[n] for n in ints)
        if count < 1 or cap < 1:
            return self._bad("desired_count and max_price_per_node_hour must be positive")
        now = int(self.now().timestamp())
        if abs(start - now) > 60 and (start < now or start % 3600):
            return self._bad("Start time must be within +/- 1 minute of now, or on a future hour")
        if end % 3600 or end <= start:
            return self._bad("end_at must be on the hour and after start_at")
        if body.get("node_type") not in ("autoreserved", "reserved"):
            return self._bad("node_type must be autoreserved or reserved")
        names = body.get("names")
        if not isinstance(names, list) or len(names) != count or any(n in self.nodes for n in names):
            return self._bad("names must be desired_count new node names")
        if not body.get("any_zone") and not isinstance(body.get("zone"), str):
            return self._bad("zone is required unless any_zone is true")
        try:
            base64.b64decode(body.get("cloud_init_user_data") or "", validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, TypeError):
            return self._bad("cloud_init_user_data must be base64")
        created = []
        for name in names:
            node = {
                "object": "node",
                "id": f"n_{next(self._ids)}",
                "name": name,
                "status": "pending",
                "zone": body.get("zone") or "hayesvalley",
                "node_type": body["node_type"],
                "start_at": start,
                "end_at": end,
                "max_price_per_node_hour": cap,
            }
            self.nodes[name] = node
            created.append(node)
        self.creates.append(req)
        if key is not None:
            self.keys[key] = created
        return Reply.json({"object": "list", "data": created}, 201)

    def user_data(self, name: str) -> str:
        """The decoded ``cloud_init_user_data`` the node ``name`` was created with."""
        for req in self.creates:
            body = req.json()
            if name in body["names"]:
                return base64.b64decode(body["cloud_init_user_data"]).decode()
        raise KeyError(name)
