"""The Prime Intellect client: GPU availability (offers) and pods (create, get, list, status, delete).

Endpoints (base ``https://api.primeintellect.ai/api/v1``, ``Authorization: Bearer``):

- ``GET /availability/gpus?page&page_size=100`` -> ``{items, totalCount}``, followed until ``totalCount``
  items are read or a page comes back empty, at most ``max_pages`` pages;
- ``POST /pods``, ``GET /pods`` (``offset``/``limit``, ``total_count``), ``GET /pods/{id}``,
  ``GET /pods/status?pod_ids=...``, ``DELETE /pods/{id}``.

Buying: a ``CapacityRequest`` for ``node_count`` boxes of one instance type becomes ``node_count`` pods
named ``scalar-<key>-<i>`` (``<key>`` is the idempotency key). Prime's API takes no idempotency key, so
the names are the key: before creating, the client lists the caller's pods and creates only the missing
ones, so a buy asked again after a crash never buys twice; ``get_order`` and ``release`` find the block's
pods by the same names, also after a restart. The block id is ``scalar-<key>``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from scalar.domain.market import BlockGrant, CapacityRequest, NodeEvent, NodeState, Order, OrderState
from scalar.domain.money import usd_fixed_plain
from scalar.domain.offers import PRIME, Offer
from scalar.domain.tier import Tier
from scalar.providers.base import Book, ProviderError
from scalar.providers.config import ProviderSettings, settings_from_env
from scalar.providers.eventlog import EventLog
from scalar.providers.http import HttpClient, HttpStatusError, RetryPolicy
from scalar.providers.payload import DEFAULT_MAX_PAGES, Fields, collect_pages
from scalar.providers.primeintellect.listings import PrimeListing, Skipped, read_listing
from scalar.providers.primeintellect.pods import PrimePod, node_state, read_pod, read_pod_status

DEFAULT_BASE_URL = "https://api.primeintellect.ai/api/v1"
PAGE_SIZE = 100  # the API's page size
PODS_PAGE_SIZE = 100
DEFAULT_IMAGE = "ubuntu_22_cuda_12"
BLOCK_PREFIX = "scalar-"


def block_id_for(idempotency_key: str) -> str:
    return f"{BLOCK_PREFIX}{idempotency_key}"


def pod_name(block_id: str, index: int) -> str:
    return f"{block_id}-{index}"


class PrimeIntellectProvider:
    """Prime Intellect behind ``scalar.providers.base.Provider`` (a fixed-price seller: no orderbook)."""

    name = PRIME

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        http: HttpClient | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        timeout_s: float = 10.0,
        max_pages: int = DEFAULT_MAX_PAGES,
        image: str = DEFAULT_IMAGE,
    ) -> None:
        self.settings = settings
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self.http = http or HttpClient(
            self.name, settings.base_url, headers=headers, timeout_s=timeout_s, retry=retry, sleep=sleep
        )
        self.max_pages = max_pages
        self.image = image
        self._lock = threading.Lock()
        self._listings: dict[str, list[PrimeListing]] = {}  # instance type -> listings, last fetch
        self._requests: dict[str, CapacityRequest] = {}  # idempotency key -> request
        self._pods: dict[str, str] = {}  # pod id -> block id, pods whose status we follow
        self._events = EventLog()
        self.skipped: list[Skipped] = []  # items of the last listing that are not offers, and why

    @classmethod
    def from_env(cls, env: Mapping[str, str], **kwargs: Any) -> PrimeIntellectProvider:
        return cls(settings_from_env(env, "primeintellect", DEFAULT_BASE_URL), **kwargs)

    def close(self) -> None:
        self.http.close()

    # -- availability --------------------------------------------------------------------------------
    def listings(self, now: datetime, **filters: str | int) -> list[PrimeListing]:
        """Every item of ``/availability/gpus`` (all pages) that is an offer; the rest go to ``skipped``."""
        skipped: list[Skipped] = []

        def page(index: int) -> tuple[list[PrimeListing], bool]:
            where = f"GET /availability/gpus page {index + 1}"
            payload = self.http.get_json(
                "/availability/gpus", params={**filters, "page": index + 1, "page_size": PAGE_SIZE}
            )
            answer = Fields.root(self.name, where, payload)
            items = answer.objects("items")
            total = answer.integer("totalCount")
            found = []
            for item in items:
                read = read_listing(item, now)
                if isinstance(read, Skipped):
                    skipped.append(read)
                else:
                    found.append(read)
            page_state["seen"] += len(items)
            return found, bool(items) and page_state["seen"] < total

        page_state = {"seen": 0}
        listings = collect_pages(self.name, "GET /availability/gpus", self.max_pages, page)
        by_type: dict[str, list[PrimeListing]] = {}
        for listing in listings:
            by_type.setdefault(listing.offer.instance_type, []).append(listing)
        with self._lock:
            if not filters:
                self._listings = by_type
            else:
                self._listings.update(by_type)
            self.skipped = skipped
        return listings

    def list_offers(self, now: datetime) -> Sequence[Offer]:
        return [listing.offer for listing in self.listings(now)]

    def orderbook(self, instance_type: str, now: datetime) -> Book | None:
        return None  # fixed prices, no book

    # -- pods -----------------------------------------------------------------------------------------
    def list_pods(self) -> list[PrimePod]:
        """The caller's pods (``GET /pods``, ``offset``/``limit`` until ``total_count``)."""
        state = {"seen": 0}

        def page(index: int) -> tuple[list[PrimePod], bool]:
            where = f"GET /pods page {index + 1}"
            payload = self.http.get_json("/pods", params={"offset": state["seen"], "limit": PODS_PAGE_SIZE})
            answer = Fields.root(self.name, where, payload)
            pods = [read_pod(item) for item in answer.objects("data")]
            total = answer.integer("total_count")
            state["seen"] += len(pods)
            return pods, bool(pods) and state["seen"] < total

        return collect_pages(self.name, "GET /pods", self.max_pages, page)

    def get_pod(self, pod_id: str) -> PrimePod | None:
        try:
            payload = self.http.get_json(f"/pods/{pod_id}")
        except HttpStatusError as err:
            if err.status == 404:
                return None
            raise
        return read_pod(Fields.root(self.name, f"GET /pods/{pod_id}", payload))

    def create_pod(self, listing: PrimeListing, name: str) -> PrimePod:
        """``POST /pods`` for one box of ``listing``."""
        image = self.image if (not listing.images or self.image in listing.images) else listing.images[0]
        body = {
            "pod": {
                "name": name,
                "cloudId": listing.cloud_id,
                "gpuType": listing.gpu_type,
                "socket": listing.socket,
                "gpuCount": listing.gpu_count,
                "diskSize": listing.disk_gb,
                "vcpus": listing.vcpus,
                "memory": listing.memory_gb,
                "image": image,
                "dataCenterId": listing.data_center,
                "country": listing.country,
                "security": listing.security,
            },
            "provider": {"type": listing.upstream},
            "disks": None,
            "team": None,
        }
        payload = self.http.post_json("/pods", body)
        return read_pod(Fields.root(self.name, "POST /pods", payload))

    def delete_pod(self, pod_id: str) -> None:
        """``DELETE /pods/{id}``; a pod already gone is fine."""
        try:
            self.http.request("DELETE", f"/pods/{pod_id}")
        except HttpStatusError as err:
            if err.status != 404:
                raise

    def _block_pods(self, block_id: str) -> list[PrimePod]:
        prefix = block_id + "-"
        return [
            p
            for p in self.list_pods()
            if p.name and p.name.startswith(prefix) and p.name[len(prefix) :].isdigit()
        ]

    # -- buying ---------------------------------------------------------------------------------------
    def _choose(self, request: CapacityRequest, now: datetime) -> PrimeListing | None:
        with self._lock:
            known = self._listings.get(request.instance_type)
        if known is None:
            self.listings(now)
            with self._lock:
                known = self._listings.get(request.instance_type, [])
        fits = [
            listing
            for listing in known
            if listing.offer.spot == request.spot
            and (request.region is None or request.region in (listing.country, listing.data_center))
        ]
        return min(fits, key=lambda listing: listing.offer.price_per_hour, default=None)

    def buy(self, request: CapacityRequest, idempotency_key: str, now: datetime) -> Order:
        """Create ``node_count`` pods of the cheapest listing of the instance type (or find them again)."""
        if request.provider != self.name:
            raise ProviderError(
                self.name,
                f"this request is for provider {request.provider!r}; send it to that provider",
                retryable=False,
            )
        if not idempotency_key:
            raise ProviderError(self.name, "an idempotency key is required", retryable=False)
        if request.node_count < 1:
            raise ProviderError(self.name, f"node_count must be at least 1, got {request.node_count}", False)
        with self._lock:
            self._requests[idempotency_key] = request
        block_id = block_id_for(idempotency_key)
        existing = {p.name: p for p in self._block_pods(block_id)}
        missing = [i for i in range(request.node_count) if pod_name(block_id, i) not in existing]
        listing = None
        if missing:
            listing = self._choose(request, now)
            if listing is None:
                if existing:
                    raise ProviderError(
                        self.name,
                        f"block {block_id} has {len(existing)} of {request.node_count} pods and no listing "
                        f"of {request.instance_type} is left to create the rest",
                    )
                return self._rejected(
                    request,
                    idempotency_key,
                    f"Prime Intellect lists no {request.instance_type} now"
                    + (f" in {request.region}" if request.region else "")
                    + (" (spot)" if request.spot else ""),
                )
            limit = request.limit_price_per_gpu_hour
            if limit is not None and listing.price_per_gpu_hour > limit and not existing:
                return self._rejected(
                    request,
                    idempotency_key,
                    f"cheapest {request.instance_type} costs {usd_fixed_plain(listing.price_per_gpu_hour, 4)}/GPU-h, "
                    f"above the limit {usd_fixed_plain(limit, 4)}/GPU-h",
                )
            for index in missing:
                pod = self.create_pod(listing, pod_name(block_id, index))
                existing[pod_name(block_id, index)] = pod
        pods = [
            existing[pod_name(block_id, i)]
            for i in range(request.node_count)
            if pod_name(block_id, i) in existing
        ]
        listing = listing or self._listing_of(pods[0], request.instance_type)
        return self._filled(request, idempotency_key, pods, listing, now)

    def _rejected(self, request: CapacityRequest, key: str, reason: str) -> Order:
        return Order(
            order_id="", idempotency_key=key, state=OrderState.REJECTED, request=request, reason=reason
        )

    def _filled(
        self,
        request: CapacityRequest,
        key: str,
        pods: list[PrimePod],
        listing: PrimeListing | None,
        now: datetime,
    ) -> Order:
        block_id = block_id_for(key)
        with self._lock:
            for pod in pods:
                self._pods[pod.pod_id] = block_id
        first = pods[0]
        gpus = first.gpu_count
        region: str | None
        if listing is not None:
            per_gpu = listing.price_per_gpu_hour
            offer = listing.offer
            vram, vcpu, ram, region = offer.gpu_memory_gb, offer.vcpu, offer.memory_gb, offer.region
            model = offer.gpu_model
        else:
            # Found again without its listing: the pod's own price and GPUs (host size unknown).
            if first.price_per_hour is None:
                raise ProviderError(
                    self.name, f"pod {first.pod_id} has no priceHr; cannot price block {block_id}"
                )
            per_gpu = first.price_per_hour / gpus
            vram, vcpu, ram, region, model = first.vram_per_gpu_gb, 0.0, 0.0, request.region, first.gpu_model
        start = min((p.created_at for p in pods if p.created_at is not None), default=now)
        block = BlockGrant(
            block_id=block_id,
            provider=self.name,
            instance_type=request.instance_type,
            gpu_model=model,
            gpus_per_node=gpus,
            vram_per_gpu_gb=vram,
            cpu_per_node=vcpu,
            ram_per_node_gb=ram,
            start_time=start,
            end_time=start + timedelta(seconds=request.duration_s),
            price_per_gpu_hour=per_gpu,
            node_ids=tuple(p.pod_id for p in pods),
            spot=request.spot,
            region=region,
        )
        return Order(
            order_id=block_id, idempotency_key=key, state=OrderState.FILLED, request=request, block=block
        )

    def get_order(self, idempotency_key: str, now: datetime) -> Order | None:
        """The block bought with this key, found by its pods' names; ``None`` when no pod has it."""
        pods = sorted(self._block_pods(block_id_for(idempotency_key)), key=lambda p: p.name or "")
        if not pods:
            return None
        with self._lock:
            request = self._requests.get(idempotency_key)
        if request is None:
            first = pods[0]
            # Rebuilt after a restart: Prime pods run until released, so there is no planned end.
            request = CapacityRequest(
                provider=self.name,
                instance_type=first.instance_label,
                node_count=len(pods),
                duration_s=0,
                limit_price_per_gpu_hour=None,
                tier=Tier.FAST,
                gpu_model=first.gpu_model,
                gpus_per_node=first.gpu_count,
                spot=first.is_spot,
            )
        listing = self._listing_of(pods[0], request.instance_type)
        return self._filled(request, idempotency_key, pods, listing, now)

    def _listing_of(self, pod: PrimePod, instance_type: str) -> PrimeListing | None:
        """The listing a pod was most likely bought from: same upstream, GPUs and price."""
        with self._lock:
            own = list(self._listings.get(instance_type, []))
            others = [lst for group in self._listings.values() for lst in group]
        candidates = own + others
        for listing in candidates:
            if (
                listing.upstream == pod.provider_type
                and listing.gpu_count == pod.gpu_count
                and listing.gpu_type == pod.gpu_name
                and listing.offer.price_per_hour == pod.price_per_hour
            ):
                return listing
        return None

    def release(self, block_id: str, now: datetime) -> None:
        """Delete every pod of the block (``DELETE /pods/{id}``); a block with no pods left is fine."""
        for pod in self._block_pods(block_id):
            self.delete_pod(pod.pod_id)

    def release_nodes(self, block_id: str, node_ids: Sequence[str], now: datetime) -> None:
        """Delete some pods of the block (``DELETE /pods/{id}``; a node is a pod, billed while it runs);
        pods already gone are fine, a pod of another block is refused."""
        with self._lock:
            strangers = [n for n in node_ids if self._pods.get(n, block_id) != block_id]
        if strangers:
            raise ProviderError(
                self.name,
                f"pods {', '.join(strangers)} are not of block {block_id}; release them with their own block",
                retryable=False,
            )
        for pod_id in node_ids:
            self.delete_pod(pod_id)

    # -- node lifecycle ------------------------------------------------------------------------------
    def pod_statuses(self, pod_ids: Sequence[str]) -> dict[str, Fields]:
        """``GET /pods/status?pod_ids=..`` -> status rows by pod id."""
        if not pod_ids:
            return {}
        payload = self.http.get_json("/pods/status", params={"pod_ids": list(pod_ids)})
        answer = Fields.root(self.name, "GET /pods/status", payload)
        return {row.text("podId"): row for row in answer.objects("data")}

    def events_since(self, cursor: int, now: datetime) -> tuple[Sequence[NodeEvent], int]:
        """Moves of the pods this client bought or found, polled from ``GET /pods/status``.

        PROVISIONING/PENDING -> BOOTING; ACTIVE while installing -> INITIALIZING; ACTIVE and installed ->
        READY; ERROR or an installation failure -> FAILED; TERMINATED/STOPPED, or a pod the status call no
        longer returns -> TERMINATED.
        """
        with self._lock:
            followed = {pod: block for pod, block in self._pods.items()}
        live = [pod for pod in followed if self._events.state(pod) is not NodeState.TERMINATED]
        rows = self.pod_statuses(live)
        for pod_id in live:
            row = rows.get(pod_id)
            if row is None:
                state, why, details = NodeState.TERMINATED, "no longer listed by GET /pods/status", {}
            else:
                status = read_pod_status(row)
                moved = node_state(status)
                if moved is None:
                    continue
                state, why, details = moved, f"pod status {status.status}", status.details()
            self._events.observe(pod_id, followed[pod_id], state, now, f"Prime Intellect {why}", details)
        return self._events.since(cursor)
