"""The SFCompute client: the public orderbook, quotes, and the caller's orders (list, create, cancel).

Endpoints (base ``https://api.sfcompute.com``, ``Authorization: Bearer``):

- ``GET /preview/v2/orderbook/depth`` and ``/quote`` (``requirements=accelerator:H100``, Unix start/end):
  the public book, read into ``Book``s (per GPU-hour, quantities in GPUs) and best-ask ``Offer``s;
- ``GET /v0/quote``: the price to buy now, as total cents;
- ``GET /v0/orders`` (paged, ``has_more``), ``GET /v0/orders/{id}``, ``POST /v0/orders`` with
  ``Idempotency-Key`` = Scalar's action id, ``DELETE /v0/orders/{id}``.

Idempotency: SFCompute deduplicates a create by its ``Idempotency-Key`` header, so asking ``buy`` again
with the same key cannot buy twice. ``get_order(key)`` needs the order id: this client keeps a key -> id
map in memory, and after a restart looks the key up in the order listing (which finds it only where the
API echoes ``idempotency_key``; the published listing does not, so the runtime's retry of ``buy`` with the
same key, deduplicated by SFCompute, is what finds the order again).

With ``nodes`` set (``[providers.sfcompute] buy_via = "nodes"``), ``buy`` goes through the nodes API instead
(``scalar.providers.sfcompute.nodes``): ``POST /v1/nodes`` per node, with cloud-init user data that starts
Scalar's agent under a join token bound to that node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import ROUND_CEILING, Decimal
from typing import Any

from scalar.domain.market import (
    BlockGrant,
    CapacityRequest,
    NodeEvent,
    NodeState,
    Order,
    OrderState,
    SaleFill,
)
from scalar.domain.offers import SFCOMPUTE, Offer
from scalar.providers.base import Book, ProviderError
from scalar.providers.config import ProviderSettings, settings_from_env
from scalar.providers.eventlog import EventLog
from scalar.providers.http import HttpClient, HttpStatusError, RetryPolicy
from scalar.providers.payload import DEFAULT_MAX_PAGES, Fields, collect_pages
from scalar.providers.sfcompute.nodes import (
    NODES_PATH,
    NodesMode,
    block_id_for,
    cents_per_node_hour,
    create_body,
    created_node_id,
)
from scalar.providers.sfcompute.orders import node_ids, request_of, to_order
from scalar.providers.sfcompute.orders import node_ids as node_ids_of
from scalar.providers.sfcompute.pricing import (
    GPUS_PER_NODE,
    MIN_DURATION_S,
    SECONDS_PER_HOUR,
    SHAPES,
    TICKERS,
    Shape,
    ceil_to_hour,
    ceil_to_minute,
    iso_z,
    order_total_cents,
    order_window,
    price_per_gpu_hour_from_cents,
)
from scalar.providers.sfcompute.wire import (
    ORDER_STATES,
    SFComputeOrder,
    SFComputeQuote,
    book_level,
    read_order,
)

DEFAULT_BASE_URL = "https://api.sfcompute.com"
ORDERS_PAGE_SIZE = 100  # the API's maximum


class SFComputeProvider:
    """SFCompute behind ``scalar.providers.base.Provider``."""

    name = SFCOMPUTE

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        http: HttpClient | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        timeout_s: float = 10.0,
        max_pages: int = DEFAULT_MAX_PAGES,
        book_window_hours: int = 1,
        book_depth: int = 20,
        ioc: bool = False,
        tickers: Mapping[str, str] | None = None,
        nodes: NodesMode | None = None,
    ) -> None:
        if book_window_hours < 1:
            raise ValueError(f"book_window_hours must be at least 1, got {book_window_hours}")
        if not 1 <= book_depth <= 100:
            raise ValueError(f"book_depth must be within 1..100 (the API's clamp), got {book_depth}")
        self.settings = settings
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self.http = http or HttpClient(
            self.name, settings.base_url, headers=headers, timeout_s=timeout_s, retry=retry, sleep=sleep
        )
        self.max_pages = max_pages
        self.book_window_hours = book_window_hours
        self.book_depth = book_depth
        self.ioc = ioc
        self._tickers = {name: shape.tickers[0] for name, shape in SHAPES.items()}
        for instance_type, ticker in (tickers or {}).items():
            shape = self._shape(instance_type)
            if ticker not in shape.tickers:
                raise ValueError(
                    f"ticker {ticker!r} is not one of {instance_type}'s: {', '.join(shape.tickers)}"
                )
            self._tickers[instance_type] = ticker
        self._lock = threading.Lock()
        self._placed: dict[str, tuple[str, CapacityRequest]] = {}  # idempotency key -> (order id, request)
        self._events = EventLog()
        self.nodes = nodes  # None: buy through v0 orders; else through the nodes API (boots the agent)
        self._node_blocks: dict[str, Order] = {}  # idempotency key -> the filled nodes-API block
        self._sales: dict[str, SaleFill] = {}  # idempotency key -> what the sell orders filled
        self._sold_from: dict[str, datetime] = {}  # node id -> when its sold time starts (it ends then)

    @classmethod
    def from_env(cls, env: Mapping[str, str], **kwargs: Any) -> SFComputeProvider:
        return cls(settings_from_env(env, "sfcompute", DEFAULT_BASE_URL), **kwargs)

    def close(self) -> None:
        self.http.close()

    # -- shapes ---------------------------------------------------------------------------------------
    def _shape(self, instance_type: str) -> Shape:
        """Scalar's instance type (``8xH100``); SFCompute's own ticker (``h100i``) is accepted as well."""
        shape = SHAPES.get(instance_type) or SHAPES.get(TICKERS.get(instance_type.strip().lower(), ""))
        if shape is None:
            raise ProviderError(
                self.name,
                f"SFCompute sells no {instance_type!r}; its instance types are {', '.join(SHAPES)}",
                retryable=False,
            )
        return shape

    def ticker(self, instance_type: str) -> str:
        """SFCompute's ticker this client buys for a Scalar instance type (``8xH100`` -> ``h100i``); a ticker
        given by name is kept (``h100v`` -> ``h100v``)."""
        shape = self._shape(instance_type)
        named = instance_type.strip().lower()
        return named if named in shape.tickers else self._tickers[shape.instance_type]

    # -- the public orderbook -------------------------------------------------------------------------
    def _window(self, now: datetime) -> tuple[datetime, datetime]:
        start = ceil_to_hour(now)
        return start, start + timedelta(hours=self.book_window_hours)

    def book(self, instance_type: str, start: datetime, end: datetime, observed_at: datetime) -> Book:
        """The public book for capacity from ``start`` to ``end``: $/GPU-hour, quantities in GPUs."""
        shape = self._shape(instance_type)
        if end <= start:
            raise ValueError(f"end ({end.isoformat()}) must be after start ({start.isoformat()})")
        where = "GET /preview/v2/orderbook/depth"
        payload = self.http.get_json(
            "/preview/v2/orderbook/depth",
            params={
                "requirements": f"accelerator:{shape.accelerator}",
                "start_at": int(start.timestamp()),
                "end_at": int(end.timestamp()),
                "depth": self.book_depth,
            },
        )
        answer = Fields.root(self.name, where, payload)
        hours = Decimal(int((end - start).total_seconds())) / SECONDS_PER_HOUR
        return Book(
            instance_type=shape.instance_type,
            asks=tuple(book_level(level, hours) for level in answer.objects("asks")),
            bids=tuple(book_level(level, hours) for level in answer.objects("bids")),
            observed_at=observed_at,
        )

    def orderbook(self, instance_type: str, now: datetime) -> Book | None:
        """The book for the next ``book_window_hours`` hours from the coming whole hour."""
        start, end = self._window(now)
        return self.book(instance_type, start, end, now)

    def best_ask_per_node_hour(self, instance_type: str, now: datetime) -> tuple[Decimal, int] | None:
        """``(dollars per node-hour, nodes)`` of the best ask in the coming window, or ``None``."""
        shape = self._shape(instance_type)
        start, end = self._window(now)
        payload = self.http.get_json(
            "/preview/v2/orderbook/quote",
            params={
                "requirements": f"accelerator:{shape.accelerator}",
                "start_at": int(start.timestamp()),
                "end_at": int(end.timestamp()),
            },
        )
        answer = Fields.root(self.name, "GET /preview/v2/orderbook/quote", payload)
        ask = answer.obj("best_ask", optional=True)
        if ask is None:
            return None
        level = book_level(ask, Decimal(self.book_window_hours))
        return level.price_per_gpu_hour * GPUS_PER_NODE, level.quantity_gpus // GPUS_PER_NODE

    def list_offers(self, now: datetime) -> Sequence[Offer]:
        """One offer per instance type with a best ask: its price per node (instance) hour."""
        offers = []
        for shape in SHAPES.values():
            best = self.best_ask_per_node_hour(shape.instance_type, now)
            if best is None:
                continue
            offers.append(
                Offer(
                    provider=self.name,
                    instance_type=shape.instance_type,
                    region=shape.region,
                    price_per_hour=best[0],
                    gpu_model=shape.gpu_model,
                    gpu_count=float(GPUS_PER_NODE),
                    gpu_memory_gb=shape.vram_per_gpu_gb,
                    vcpu=shape.cpu_per_node,
                    memory_gb=shape.ram_per_node_gb,
                    spot=False,
                    interruption_rate=0.0,
                    observed_at=now,
                )
            )
        return offers

    # -- quotes ---------------------------------------------------------------------------------------
    def quote(self, instance_type: str, node_count: int, duration_s: int, now: datetime) -> SFComputeQuote:
        """``GET /v0/quote``: the total price to buy ``node_count`` nodes starting now."""
        duration = max(duration_s, MIN_DURATION_S)
        payload = self.http.get_json(
            "/v0/quote",
            params={
                "side": "buy",
                "instance_type": self.ticker(instance_type),
                "quantity": node_count,
                "min_start_date": "NOW",
                "max_start_date": "NOW",
                "min_duration": duration,
                "max_duration": duration,
            },
        )
        answer = Fields.root(self.name, "GET /v0/quote", payload)
        quote = answer.obj("quote", optional=True)
        if quote is None:
            return SFComputeQuote(
                instance_type, node_count, None, None, None, None, answer.opt_text("no_quote_reason"), None
            )
        start_text = quote.text("start_at")
        start = ceil_to_minute(now) if start_text == "NOW" else quote.time("start_at")
        end = quote.time("end_at")
        if end <= start:
            raise quote.error("end_at", f"({end.isoformat()}) is not after start_at ({start.isoformat()})")
        cents = quote.integer("price")
        nodes = quote.integer("quantity")
        if nodes < 1:
            raise quote.error("quantity", f"should be at least 1 node, got {nodes}")
        return SFComputeQuote(
            instance_type=instance_type,
            node_count=nodes,
            total_cents=cents,
            start_at=start,
            end_at=end,
            zone=quote.opt_text("zone"),
            no_quote_reason=None,
            price_per_gpu_hour=price_per_gpu_hour_from_cents(
                cents, nodes, int((end - start).total_seconds())
            ),
        )

    # -- orders ---------------------------------------------------------------------------------------
    def list_orders(self, **filters: str | int) -> list[SFComputeOrder]:
        """Every order of the caller (``GET /v0/orders``, 100 a page, until ``has_more`` is false)."""

        seen = [0]

        def page(index: int) -> tuple[list[SFComputeOrder], bool]:
            where = f"GET /v0/orders page {index + 1}"
            payload = self.http.get_json(
                "/v0/orders", params={**filters, "limit": ORDERS_PAGE_SIZE, "offset": seen[0]}
            )
            answer = Fields.root(self.name, where, payload)
            orders = [read_order(item) for item in answer.objects("data")]
            more = answer.flag("has_more")
            seen[0] += len(orders)
            return orders, more and bool(orders)  # an empty page ends the listing, whatever has_more says

        return collect_pages(self.name, "GET /v0/orders", self.max_pages, page)

    def fetch_order(self, order_id: str) -> SFComputeOrder | None:
        """``GET /v0/orders/{id}``; ``None`` when SFCompute does not know the id."""
        try:
            payload = self.http.get_json(f"/v0/orders/{order_id}")
        except HttpStatusError as err:
            if err.status == 404:
                return None
            raise
        return read_order(Fields.root(self.name, f"GET /v0/orders/{order_id}", payload))

    def cancel_order(self, order_id: str) -> None:
        """``DELETE /v0/orders/{id}``: cancel a resting order (SFCompute answers ``{object: "pending"}``)."""
        self.http.request("DELETE", f"/v0/orders/{order_id}")

    def buy(self, request: CapacityRequest, idempotency_key: str, now: datetime) -> Order:
        """Place a limit buy for whole nodes starting now (or find the one placed with this key).

        The limit $/GPU-hour becomes the order's total in cents over the window SFCompute's CLI uses
        (start ``NOW`` from the next whole minute, end rounded up to the hour). With no limit price,
        the order is placed at ``/v0/quote``'s price for the same window; with no quote, it is rejected.
        """
        if request.provider != self.name:
            raise ProviderError(
                self.name,
                f"this request is for provider {request.provider!r}; send it to that provider",
                retryable=False,
            )
        if not idempotency_key or len(idempotency_key) > 255:
            raise ProviderError(
                self.name, "an idempotency key of 1-255 characters is required", retryable=False
            )
        shape = self._shape(request.instance_type)
        if request.node_count < 1:
            raise ProviderError(self.name, f"node_count must be at least 1, got {request.node_count}", False)
        if request.gpus_per_node != GPUS_PER_NODE:
            raise ProviderError(
                self.name,
                f"SFCompute nodes have {GPUS_PER_NODE} GPUs; the request asks for {request.gpus_per_node}",
                retryable=False,
            )
        if self.nodes is not None:
            return self._buy_nodes(self.nodes, request, idempotency_key, shape, now)
        with self._lock:
            placed = self._placed.get(idempotency_key)
        if placed is not None:
            found = self.get_order(idempotency_key, now)
            if found is not None:
                return found
        ticker = self.ticker(shape.instance_type)
        start, end = order_window(now, request.duration_s)
        start_text = "NOW"
        if request.limit_price_per_gpu_hour is None:
            quote = self.quote(
                shape.instance_type, request.node_count, int((end - start).total_seconds()), now
            )
            if quote.total_cents is None or quote.end_at is None:
                return Order(
                    order_id="",
                    idempotency_key=idempotency_key,
                    state=OrderState.REJECTED,
                    request=request,
                    reason=f"SFCompute has no quote for {request.node_count}x{shape.instance_type} now "
                    f"({quote.no_quote_reason or 'no reason given'}); no order was placed",
                )
            cents, end = quote.total_cents, quote.end_at
            if quote.start_at is not None and quote.start_at > ceil_to_minute(now):
                start_text = iso_z(quote.start_at)  # a later hour the quote found
        else:
            cents = order_total_cents(
                request.limit_price_per_gpu_hour, request.node_count, int((end - start).total_seconds())
            )
        body = {
            "side": "buy",
            "instance_type": ticker,
            "quantity": request.node_count,
            "start_at": start_text,
            "end_at": iso_z(end),
            "price": cents,
            "flags": {"ioc": self.ioc},
        }
        payload = self.http.post_json("/v0/orders", body, headers={"Idempotency-Key": idempotency_key})
        answer = Fields.root(self.name, "POST /v0/orders", payload)
        order_id = answer.text("id")
        status = answer.text("status")
        echoed = answer.opt_text("idempotency_key")
        if echoed is not None and echoed != idempotency_key:
            raise ProviderError(
                self.name,
                f"POST /v0/orders answered order {order_id} for idempotency key {echoed!r}, "
                f"not {idempotency_key!r}",
                retryable=False,
            )
        with self._lock:
            self._placed[idempotency_key] = (order_id, request)
        state = ORDER_STATES.get(status)
        if state is None:
            raise answer.error("status", f"is {status!r}, not one of pending, filled, cancelled")
        if state is OrderState.FILLED:
            full = self.fetch_order(order_id)
            if full is not None:
                return to_order(full, idempotency_key, request)
        return Order(order_id=order_id, idempotency_key=idempotency_key, state=state, request=request)

    def _buy_nodes(
        self, mode: NodesMode, request: CapacityRequest, key: str, shape: Shape, now: datetime
    ) -> Order:
        """``POST /v1/nodes`` once per node (``Idempotency-Key`` = ``<key>:n<i>``, so a retried buy creates
        none twice), each with user data starting the agent under a join token bound to that node id. The
        block is filled once every node is created, priced at the cap; its nodes become READY when their
        agents register (the runtime holds them INITIALIZING until then)."""
        with self._lock:
            done = self._node_blocks.get(key)
        if done is not None:
            return done
        start, end = order_window(now, request.duration_s)
        hours = Decimal(int((end - start).total_seconds())) / SECONDS_PER_HOUR
        if request.limit_price_per_gpu_hour is not None:
            cap = cents_per_node_hour(request.limit_price_per_gpu_hour)
        else:
            quote = self.quote(shape.instance_type, request.node_count, int(hours * SECONDS_PER_HOUR), now)
            if quote.total_cents is None:
                return Order(
                    order_id="",
                    idempotency_key=key,
                    state=OrderState.REJECTED,
                    request=request,
                    reason=f"SFCompute has no quote for {request.node_count}x{shape.instance_type} now "
                    f"({quote.no_quote_reason or 'no reason given'}); no node was bought",
                )
            per_node_hour = Decimal(quote.total_cents) / request.node_count / hours
            cap = int(per_node_hour.to_integral_value(rounding=ROUND_CEILING))
        block_id = block_id_for(key)
        ids = node_ids(block_id, request.node_count)
        for i, node_id in enumerate(ids):
            body = create_body(mode, node_id, cap, start, end, mode.join_token(node_id))
            payload = self.http.post_json(NODES_PATH, body, headers={"Idempotency-Key": f"{key}:n{i}"})
            created_node_id(self.name, payload, node_id)
        grant = BlockGrant(
            block_id=block_id,
            provider=SFCOMPUTE,
            instance_type=shape.instance_type,
            gpu_model=shape.gpu_model,
            gpus_per_node=GPUS_PER_NODE,
            vram_per_gpu_gb=shape.vram_per_gpu_gb,
            cpu_per_node=shape.cpu_per_node,
            ram_per_node_gb=shape.ram_per_node_gb,
            start_time=start,
            end_time=end,
            price_per_gpu_hour=Decimal(cap) / 100 / GPUS_PER_NODE,
            node_ids=ids,
            spot=False,
            region=mode.zone or shape.region,
        )
        order = Order(block_id, key, OrderState.FILLED, request, block=grant)
        with self._lock:
            self._node_blocks[key] = order
        return order

    def get_order(self, idempotency_key: str, now: datetime) -> Order | None:
        with self._lock:
            if idempotency_key in self._node_blocks:
                return self._node_blocks[idempotency_key]
            placed = self._placed.get(idempotency_key)
        if placed is not None:
            order_id, request = placed
            found = self.fetch_order(order_id)
            return None if found is None else to_order(found, idempotency_key, request)
        for order in self.list_orders():
            if order.idempotency_key == idempotency_key:
                with self._lock:
                    self._placed[idempotency_key] = (order.order_id, request_of(order))
                return to_order(order, idempotency_key, request_of(order))
        return None

    def release(self, block_id: str, now: datetime) -> None:
        """Cancel the order ``block_id`` if it still rests on the book; a filled one cannot be released."""
        with self._lock:
            bought = [o.block for o in self._node_blocks.values() if o.order_id == block_id]
        if bought and bought[0] is not None and bought[0].end_time > now:
            raise ProviderError(
                self.name,
                f"block {block_id} was bought through the nodes API, which Scalar does not end early; its "
                f"nodes run until {iso_z(bought[0].end_time)}",
                retryable=False,
            )
        if bought:
            return
        order = self.fetch_order(block_id)
        if order is None:
            raise ProviderError(self.name, f"SFCompute knows no order {block_id!r}", retryable=False)
        if order.state is OrderState.PENDING:
            self.cancel_order(block_id)
            return
        if order.state is OrderState.FILLED and order.end_at > now:
            raise ProviderError(
                self.name,
                f"order {block_id} is filled: SFCompute ends a contract early only by selling it back "
                f"(a sell order on the contract), which Scalar does not place yet; it runs until "
                f"{iso_z(order.end_at)}",
                retryable=False,
            )

    def sell(
        self,
        block_id: str,
        node_ids: Sequence[str],
        cut: datetime,
        price_per_gpu_hour: Decimal,
        idempotency_key: str,
        now: datetime,
    ) -> SaleFill:
        """Sell the time of ``node_ids`` of the filled buy order ``block_id`` from ``cut`` to its end.

        One immediate-or-cancel sell order per node (``POST /v0/orders`` with ``side: "sell"``, quantity 1,
        the contract's ticker and window, ``price`` the node's total in cents at ``price_per_gpu_hour``,
        ``Idempotency-Key`` ``<key>:n<i>``), so a thin book fills some nodes and cancels the rest; each
        answer still pending is read back (``GET /v0/orders/{id}``). Scalar names the contract by its buy
        order's id (``block_id``). Asking again with the same key returns the first answer."""
        if not idempotency_key or len(idempotency_key) > 255:
            raise ProviderError(
                self.name, "an idempotency key of 1-255 characters is required", retryable=False
            )
        with self._lock:
            done = self._sales.get(idempotency_key)
        if done is not None:
            return done
        if not price_per_gpu_hour.is_finite() or price_per_gpu_hour <= 0:
            raise ProviderError(
                self.name, f"the ask must be a positive price, got {price_per_gpu_hour}", False
            )
        if not node_ids or len(set(node_ids)) != len(node_ids):
            raise ProviderError(self.name, "a sale names one or more distinct nodes of the block", False)
        bought = self.fetch_order(block_id)
        if bought is None or bought.side != "buy" or bought.state is not OrderState.FILLED:
            raise ProviderError(self.name, f"no filled buy order {block_id!r} to sell from", retryable=False)
        mine = node_ids_of(block_id, bought.node_count)
        foreign = [n for n in node_ids if n not in mine]
        if foreign:
            raise ProviderError(
                self.name, f"nodes {foreign} are not nodes of order {block_id}", retryable=False
            )
        seconds = (bought.end_at - cut).total_seconds()
        if cut < now - timedelta(minutes=1) or seconds < SECONDS_PER_HOUR or seconds % SECONDS_PER_HOUR:
            raise ProviderError(
                self.name,
                f"a sale offers whole hours from now or later up to the contract's end "
                f"({iso_z(bought.end_at)}); from {iso_z(cut)} it cannot",
                retryable=False,
            )
        hours = int(seconds // SECONDS_PER_HOUR)
        cents = order_total_cents(price_per_gpu_hour, 1, int(seconds))
        start_text = "NOW" if cut <= ceil_to_minute(now) else iso_z(cut)
        sold: list[str] = []
        for i, node in enumerate(sorted(node_ids)):
            body = {
                "side": "sell",
                "instance_type": bought.ticker,
                "quantity": 1,
                "start_at": start_text,
                "end_at": iso_z(bought.end_at),
                "price": cents,
                "contract_id": block_id,
                "flags": {"ioc": True},
            }
            key = f"{idempotency_key}:n{i}"
            payload = self.http.post_json("/v0/orders", body, headers={"Idempotency-Key": key})
            answer = Fields.root(self.name, "POST /v0/orders (sell)", payload)
            order_id = answer.text("id")
            state = ORDER_STATES.get(answer.text("status"))
            if state is None:
                raise answer.error(
                    "status", f"is {answer.text('status')!r}, not one of {', '.join(ORDER_STATES)}"
                )
            if state is OrderState.PENDING:
                placed = self.fetch_order(order_id)
                state = placed.state if placed is not None else state
            if state is OrderState.FILLED:
                sold.append(node)
        fill = SaleFill(
            idempotency_key,
            self.name,
            block_id,
            len(node_ids),
            tuple(sold),
            GPUS_PER_NODE,
            hours,
            cut,
            price_per_gpu_hour,
        )
        with self._lock:
            self._sales[idempotency_key] = fill
            self._sold_from.update((n, cut) for n in sold)
        return fill

    def get_sale(self, idempotency_key: str, now: datetime) -> SaleFill | None:
        """What a sell order placed by this process filled (``None`` for one it does not know)."""
        with self._lock:
            return self._sales.get(idempotency_key)

    # -- node lifecycle ------------------------------------------------------------------------------
    def events_since(self, cursor: int, now: datetime) -> tuple[Sequence[NodeEvent], int]:
        """Node moves of the orders this process placed, from their contract windows.

        SFCompute's v0 orders API reports no per-node status: a filled order's nodes are reported READY
        when its contract starts and TERMINATED when it ends (or when the order is cancelled).
        """
        with self._lock:
            placed = list(self._placed.values())
            node_blocks = [o.block for o in self._node_blocks.values() if o.block is not None]
        for grant in node_blocks:  # nodes-API blocks: READY from their start, TERMINATED at their end
            if grant.end_time <= now:
                state, why = NodeState.TERMINATED, f"contract ended at {iso_z(grant.end_time)}"
            elif grant.start_time <= now:
                state, why = NodeState.READY, f"contract started at {iso_z(grant.start_time)}"
            else:
                continue
            for node in grant.node_ids:
                self._events.observe(node, grant.block_id, state, now, f"SFCompute nodes API: {why}")
        for order_id, request in placed:
            ids = node_ids(order_id, max(1, request.node_count))
            if all(self._events.state(n) is NodeState.TERMINATED for n in ids):  # (a sold node ends early)
                continue
            order = self.fetch_order(order_id)
            if order is None:
                continue
            self._observe(order, now)
        events, new_cursor = self._events.since(cursor)
        return events, new_cursor

    def _observe(self, order: SFComputeOrder, now: datetime) -> None:
        if order.state is OrderState.FILLED:
            if order.end_at <= now:
                state, why = NodeState.TERMINATED, f"contract ended at {iso_z(order.end_at)}"
            elif order.start_at <= now:
                state, why = NodeState.READY, f"contract started at {iso_z(order.start_at)}"
            else:
                return
        elif order.state is OrderState.CANCELLED and self._events.state(node_ids(order.order_id, 1)[0]):
            state, why = NodeState.TERMINATED, "order cancelled"
        else:
            return
        for node in node_ids(order.order_id, order.node_count):
            sold_from = self._sold_from.get(node)
            if sold_from is not None and sold_from <= now:
                sold_why = f"its time from {iso_z(sold_from)} was sold back"
                self._events.observe(node, order.order_id, NodeState.TERMINATED, now, sold_why)
                continue
            self._events.observe(node, order.order_id, state, now, f"SFCompute order {order.order_id}: {why}")
