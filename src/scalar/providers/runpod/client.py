"""The RunPod client: GPU prices from GraphQL ``gpuTypes``, and serverless endpoints saved and deleted.

Endpoints (``POST https://api.runpod.io/graphql``, ``Authorization: Bearer``):

- ``query gpuTypes { ... lowestPrice(input: {gpuCount, secureCloud}) }``, once per GPU count and cloud;
- ``mutation saveEndpoint(input: EndpointInput!)`` (create, or update with ``id``) and
  ``mutation deleteEndpoint(id)``;
- the serverless data plane (``https://api.runpod.ai/v2``, ``SCALAR_RUNPOD_DATA_URL``):
  ``GET /{endpoint_id}/health``.

GraphQL answers errors with HTTP 200 and ``errors[].message``: those are ``ProviderError``s carrying the
message, retryable only when RunPod says the caller is rate limited. Pods are not bought through this
client yet: ``buy`` raises (RunPod capacity is bought per pod with ``podFindAndDeployOnDemand``, which
Scalar does not call), so RunPod offers are prices to compare, and endpoints are how Scalar uses RunPod.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from scalar.domain.market import CapacityRequest, NodeEvent, Order
from scalar.domain.offers import RUNPOD, Offer
from scalar.providers.base import Book, ProviderError
from scalar.providers.config import ProviderSettings, settings_from_env
from scalar.providers.http import HttpClient, RetryPolicy
from scalar.providers.payload import Fields
from scalar.providers.runpod.endpoints import (
    DELETE_ENDPOINT_MUTATION,
    SAVE_ENDPOINT_MUTATION,
    EndpointHealth,
    endpoint_input,
)
from scalar.providers.runpod.gpus import GPU_TYPES_QUERY, read_offers

DEFAULT_BASE_URL = "https://api.runpod.io"
DEFAULT_DATA_URL = "https://api.runpod.ai/v2"
GRAPHQL_PATH = "/graphql"
RATE_LIMIT_WORDS = ("rate limit", "rate-limit", "too many requests", "throttl")


class RunPodProvider:
    """RunPod behind ``scalar.providers.base.Provider``: offers and endpoints; no pod purchases yet."""

    name = RUNPOD

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        http: HttpClient | None = None,
        data_http: HttpClient | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        timeout_s: float = 10.0,
        gpu_counts: Sequence[int] = (1, 2, 4, 8),
        secure_cloud: bool = True,
        community_cloud: bool = False,
    ) -> None:
        if not gpu_counts or any(n < 1 for n in gpu_counts):
            raise ValueError(f"gpu_counts must be positive GPU counts, got {tuple(gpu_counts)}")
        if not (secure_cloud or community_cloud):
            raise ValueError("choose the secure cloud, the community cloud, or both")
        self.settings = settings
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self.http = http or HttpClient(
            self.name, settings.base_url, headers=headers, timeout_s=timeout_s, retry=retry, sleep=sleep
        )
        self.data_http = data_http or HttpClient(
            self.name,
            settings.data_url or DEFAULT_DATA_URL,
            headers=headers,
            timeout_s=timeout_s,
            retry=retry,
            sleep=sleep,
        )
        self.gpu_counts = tuple(gpu_counts)
        self.clouds = tuple(c for c, on in ((True, secure_cloud), (False, community_cloud)) if on)
        self.skipped: list[str] = []  # why gpuTypes entries of the last listing gave no offer

    @classmethod
    def from_env(cls, env: Mapping[str, str], **kwargs: Any) -> RunPodProvider:
        return cls(settings_from_env(env, "runpod", DEFAULT_BASE_URL, DEFAULT_DATA_URL), **kwargs)

    def close(self) -> None:
        self.http.close()
        self.data_http.close()

    # -- GraphQL --------------------------------------------------------------------------------------
    def graphql(self, operation: str, query: str, variables: Mapping[str, Any]) -> Fields:
        """POST one GraphQL operation; its ``data`` object, or ``ProviderError`` with RunPod's message."""
        where = f"GraphQL {operation}"
        payload = self.http.post_json(GRAPHQL_PATH, {"query": query, "variables": dict(variables)})
        answer = Fields.root(self.name, where, payload)
        errors = answer.raw("errors", optional=True)
        if errors:
            raise self._graphql_error(where, errors)
        data = answer.obj("data")
        assert data is not None
        return data

    def _graphql_error(self, where: str, errors: Any) -> ProviderError:
        if not isinstance(errors, list):
            return ProviderError(self.name, f"{where}: errors should be a list, got {errors!r}"[:300])
        messages, codes = [], []
        for error in errors:
            if isinstance(error, dict):
                messages.append(str(error.get("message") or error))
                ext = error.get("extensions")
                if isinstance(ext, dict) and ext.get("code"):
                    codes.append(str(ext["code"]))
            else:
                messages.append(str(error))
        text = "; ".join(messages) or "unspecified error"
        lowered = (text + " " + " ".join(codes)).lower()
        limited = any(word in lowered for word in RATE_LIMIT_WORDS)
        suffix = f" ({', '.join(codes)})" if codes else ""
        return ProviderError(self.name, f"{where} failed: {text}{suffix}", retryable=limited)

    # -- prices ---------------------------------------------------------------------------------------
    def list_offers(self, now: datetime) -> Sequence[Offer]:
        """On-demand and spot offers for each GPU type, GPU count and cloud (one query per count and cloud)."""
        offers: list[Offer] = []
        skipped: list[str] = []
        for secure in self.clouds:
            for count in self.gpu_counts:
                data = self.graphql(
                    "gpuTypes",
                    GPU_TYPES_QUERY,
                    {"lowestPriceInput": {"gpuCount": count, "secureCloud": secure}},
                )
                for gpu in data.objects("gpuTypes"):
                    read = read_offers(gpu, count, secure, now)
                    if isinstance(read, str):
                        skipped.append(read)
                    else:
                        offers.extend(read)
        self.skipped = skipped
        return offers

    def orderbook(self, instance_type: str, now: datetime) -> Book | None:
        return None  # fixed prices, no book

    # -- serverless endpoints -------------------------------------------------------------------------
    def save_endpoint(self, fields: Mapping[str, Any]) -> str:
        """Create (or, with ``id``, update) a serverless endpoint; returns its id."""
        variables = {"input": endpoint_input(fields)}
        data = self.graphql("saveEndpoint", SAVE_ENDPOINT_MUTATION, variables)
        saved = data.req_obj("saveEndpoint")
        return saved.text("id")

    def delete_endpoint(self, endpoint_id: str) -> None:
        if not endpoint_id:
            raise ProviderError(self.name, "deleteEndpoint needs an endpoint id", retryable=False)
        self.graphql("deleteEndpoint", DELETE_ENDPOINT_MUTATION, {"id": endpoint_id})

    def endpoint_health(self, endpoint_id: str) -> EndpointHealth:
        """``GET {data_url}/{endpoint_id}/health``: worker and job counts by state."""
        where = f"GET /{endpoint_id}/health"
        answer = Fields.root(self.name, where, self.data_http.get_json(f"/{endpoint_id}/health"))

        def counts(key: str) -> dict[str, int]:
            group = answer.req_obj(key)
            return {name: group.integer(name) for name in group.value}

        return EndpointHealth(workers=counts("workers"), jobs=counts("jobs"))

    # -- not covered ---------------------------------------------------------------------------------
    def buy(self, request: CapacityRequest, idempotency_key: str, now: datetime) -> Order:
        raise ProviderError(
            self.name,
            "RunPod capacity is bought per pod (podFindAndDeployOnDemand), which Scalar does not support "
            "yet; use RunPod through serverless endpoints (save_endpoint) or buy the shape elsewhere",
            retryable=False,
        )

    def get_order(self, idempotency_key: str, now: datetime) -> Order | None:
        return None  # nothing is ever bought here

    def release(self, block_id: str, now: datetime) -> None:
        raise ProviderError(
            self.name, f"RunPod holds no block {block_id!r} of Scalar's: pods are not bought here", False
        )

    def events_since(self, cursor: int, now: datetime) -> tuple[Sequence[NodeEvent], int]:
        return [], cursor  # no pods, no node events
