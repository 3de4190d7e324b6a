"""``BuiltinMarket``: the embedded seller of every provider Scalar knows, with its state in its own tables.

One market serves SFCompute-style orderbooks (``8xH100``, ``8xH200``) and the fixed-price offers of Prime
Intellect, RunPod, AWS, Azure and GCP. The control plane talks to it through one ``MarketProvider`` per
provider name (``market.providers()``), exactly as it will talk to the real clients. Every call takes
``now``; market time never goes backwards (a call with an earlier ``now`` than one already seen acts at
the latest time seen).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine, bindparam, delete, exists, insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from scalar.domain.contracts import work_rate
from scalar.domain.market import CapacityRequest, NodeEvent, NodeState, Order, SaleFill
from scalar.domain.offers import SFCOMPUTE, Offer
from scalar.domain.tier import Tier
from scalar.providers.base import Book, Provider, ProviderError
from scalar.providers.builtin import schema
from scalar.providers.builtin.clock import US_PER_S, describe_duration, market_hour_us, to_us
from scalar.providers.builtin.config import (
    BOOK_SHAPES,
    BUILTIN_CUDA_VERSION,
    MARKET_PROVIDERS,
    MarketConfig,
    MarketConfigError,
)
from scalar.providers.builtin.database import create_market_tables, is_busy, locked, market_engine
from scalar.providers.builtin.fixed import price_list
from scalar.providers.builtin.lifecycle import (
    advance,
    event_from_row,
    node_rows,
    terminate_nodes,
    write_events,
)
from scalar.providers.builtin.liquidity import live_book
from scalar.providers.builtin.purchase import Seller, place_order
from scalar.providers.builtin.records import load_order
from scalar.providers.builtin.sales import load_sale, place_sale
from scalar.providers.builtin.timeline import CAUSE_RELEASED
from scalar.providers.catalog import Catalog, load_catalog

P = ParamSpec("P")
R = TypeVar("R")
MARKET = "builtin"
EVENT_PAGE = 10_000  # events_since returns at most this many events per call; ask again with the new cursor

# Statements run on (nearly) every call, built once (bound values are passed at execution).
_CLOCK = select(schema.meta.c.clock_us).where(schema.meta.c.id == 1)
_SET_CLOCK = update(schema.meta).where(schema.meta.c.id == 1).values(clock_us=bindparam("b_clock"))
_ANYTHING_DUE = select(
    exists().where(schema.nodes.c.next_us.is_not(None), schema.nodes.c.next_us <= bindparam("b_now"))
    | exists().where(schema.work.c.ended_us.is_(None), schema.work.c.finish_us <= bindparam("b_now"))
)
_EVENTS_AFTER = (
    select(schema.events)
    .where(schema.events.c.seq > bindparam("b_cursor"))
    .order_by(schema.events.c.seq)
    .limit(EVENT_PAGE)
)
_PROVIDER_EVENTS_AFTER = (
    select(schema.events)
    .where(schema.events.c.seq > bindparam("b_cursor"), schema.events.c.provider == bindparam("b_provider"))
    .order_by(schema.events.c.seq)
    .limit(EVENT_PAGE)
)


def _database_errors(method: Callable[P, R]) -> Callable[P, R]:
    """Database trouble becomes a ``ProviderError`` (retryable when asking again may help)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except DBAPIError as error:
            provider = kwargs.get("provider") or MARKET
            raise ProviderError(
                str(provider), f"market database error: {error.orig or error}", retryable=is_busy(error)
            ) from error

    return wrapper


class BuiltinMarket:
    """The built-in market over a database (a URL, or an Engine shared with the caller).

    ``config.seed`` decides every draw. A database that already holds a market keeps the seed it was
    created with (``seed=None`` takes it); asking for another seed explicitly is a ``MarketConfigError``.
    """

    def __init__(
        self,
        bind: Engine | str,
        config: MarketConfig | None = None,
        *,
        catalog: Catalog | None = None,
        providers: Sequence[str] = MARKET_PROVIDERS,
    ) -> None:
        self.config = config or MarketConfig()
        self.catalog = catalog or load_catalog()
        unknown = [name for name in providers if name not in MARKET_PROVIDERS]
        if unknown:
            raise MarketConfigError(
                f"the built-in market cannot sell for {', '.join(unknown)}",
                f"choose among {', '.join(MARKET_PROVIDERS)}",
            )
        self.provider_names = tuple(providers)
        self._owns_engine = isinstance(bind, str)
        self.engine = market_engine(bind) if isinstance(bind, str) else bind
        try:
            self.seed = create_market_tables(self.engine, self.config.seed)
        except Exception:
            self.close()
            raise
        self._seller = Seller(self.seed, self.config, self.catalog)

    # -- plumbing -------------------------------------------------------------------------------------
    def close(self) -> None:
        """Dispose of the engine if the market made it from a URL."""
        if self._owns_engine:
            self.engine.dispose()

    def __enter__(self) -> BuiltinMarket:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def provider(self, name: str) -> MarketProvider:
        """The ``Provider`` for one provider name, over this market."""
        if name not in self.provider_names:
            raise MarketConfigError(
                f"the built-in market does not sell for {name!r}",
                f"use one of {', '.join(self.provider_names)}",
            )
        return MarketProvider(self, name)

    def providers(self) -> dict[str, MarketProvider]:
        """One ``Provider`` per provider name, keyed by ``Offer.provider``."""
        return {name: MarketProvider(self, name) for name in self.provider_names}

    @contextmanager
    def _at(self, now: datetime, provider: str) -> Iterator[tuple[Connection, int]]:
        """A locked transaction brought up to ``now``: yields the connection and the market time used."""
        now_us = to_us(now, provider)
        with locked(self.engine) as conn:
            clock = int(conn.execute(_CLOCK).scalar_one())
            at_us = max(clock, now_us)
            if at_us != clock:
                conn.execute(_SET_CLOCK, {"b_clock": at_us})
            advance(conn, at_us, self.config.interruption_period_hours)
            yield conn, at_us

    # -- prices ---------------------------------------------------------------------------------------
    @_database_errors
    def list_offers(
        self, now: datetime, provider: str | None = None, *, gpu_models: Collection[str] | None = None
    ) -> tuple[Offer, ...]:
        """Everything purchasable at ``now`` (of one provider, or of all), stamped ``observed_at=now``;
        with ``gpu_models`` (upper-case names), only the fixed-price offers of those models (the orderbook
        shapes are always listed)."""
        names = self.provider_names if provider is None else (provider,)
        now_us = to_us(now, provider or MARKET)
        hour = now_us // market_hour_us(self.config.time_scale)
        offers: list[Offer] = []
        for name in names:
            if name == SFCOMPUTE:
                offers.extend(self._book_offers(now, now_us))
            else:
                models = None if gpu_models is None else frozenset(gpu_models)
                offers.extend(
                    replace(offer, observed_at=now, cuda_version=BUILTIN_CUDA_VERSION)
                    for offer in price_list(
                        self.catalog, name, self.seed, hour, self.config.spot_price_drift, models
                    ).offers
                )
        return tuple(offers)

    def _book_offers(self, now: datetime, now_us: int) -> list[Offer]:
        offers = []
        with self.engine.connect() as conn:
            for shape in BOOK_SHAPES.values():
                book = live_book(conn, self.catalog, self.config, self.seed, shape.instance_type, now_us)
                if book.best_ask is None:
                    continue
                offers.append(
                    Offer(
                        provider=SFCOMPUTE,
                        instance_type=shape.instance_type,
                        region=shape.region,
                        price_per_hour=book.best_ask * shape.gpus_per_node,
                        gpu_model=shape.gpu_model,
                        gpu_count=float(shape.gpus_per_node),
                        gpu_memory_gb=shape.vram_per_gpu_gb,
                        vcpu=shape.cpu_per_node,
                        memory_gb=shape.ram_per_node_gb,
                        spot=False,
                        observed_at=now,
                        cuda_version=BUILTIN_CUDA_VERSION,
                    )
                )
        return offers

    @_database_errors
    def orderbook(self, instance_type: str, now: datetime) -> Book | None:
        """The live book of an SFCompute-style instance type; ``None`` for any other instance type."""
        if instance_type not in BOOK_SHAPES:
            return None
        now_us = to_us(now, SFCOMPUTE)
        with self.engine.connect() as conn:
            book = live_book(conn, self.catalog, self.config, self.seed, instance_type, now_us)
        return Book(
            instance_type=instance_type,
            asks=tuple(level.as_book_order() for level in book.asks),
            bids=book.bids,
            observed_at=now,
        )

    # -- orders ---------------------------------------------------------------------------------------
    @_database_errors
    def buy(self, request: CapacityRequest, idempotency_key: str, now: datetime) -> Order:
        """Place the order for ``idempotency_key`` (or return the one already placed with it)."""
        if not idempotency_key or len(idempotency_key) > 255:
            raise ProviderError(
                request.provider, "an idempotency key of 1-255 characters is required", retryable=False
            )
        try:
            with self._at(now, request.provider) as (conn, at_us):
                return place_order(conn, self._seller, request, idempotency_key, at_us, self.provider_names)
        except IntegrityError:
            # Only possible if a writer bypassed the lock: the key's order exists, so return it.
            found = self.get_order(request.provider, idempotency_key, now)
            if found is None:
                raise
            return found

    @_database_errors
    def get_order(self, provider: str, idempotency_key: str, now: datetime) -> Order | None:
        to_us(now, provider)
        with self.engine.connect() as conn:
            return load_order(conn, provider, idempotency_key)

    @_database_errors
    def release(self, block_id: str, now: datetime, provider: str | None = None) -> None:
        """End a block's contract now: its live nodes terminate, their jobs are killed. The time an
        SFCompute-style block had left is not resold on the buyer's behalf: only a sell order
        (``sell``, providers/builtin/sales.py) resells it, and its proceeds are the buyer's."""
        name = provider or MARKET
        with self._at(now, name) as (conn, at_us):
            block = conn.execute(select(schema.blocks).where(schema.blocks.c.block_id == block_id)).first()
            if block is None or (provider is not None and block.provider != provider):
                raise ProviderError(name, f"no block {block_id!r} was sold by {name}", retryable=False)
            rows = node_rows(conn, schema.nodes.c.block_id == block_id)
            live = [row for row in rows if row.next_us is not None]
            if block.released_us is not None or not live:
                return
            # Nothing goes back on the book: relisting the buyer's hours would sell them without crediting
            # the buyer. The buyer sells them first, with sell orders, if it wants the proceeds.
            write_events(
                conn, terminate_nodes(conn, rows, at_us, CAUSE_RELEASED, "released by the buyer", {})
            )
            conn.execute(
                update(schema.blocks).where(schema.blocks.c.block_id == block_id).values(released_us=at_us)
            )

    @_database_errors
    def release_nodes(
        self, block_id: str, node_ids: Sequence[str], now: datetime, provider: str | None = None
    ) -> None:
        """Stop some nodes of a block of a seller billing running time: they terminate, their jobs are
        killed, the block's other nodes run on. Nodes already stopped are fine; a node of another block,
        or a block paid whole (SFCompute: sell its time back instead), is refused."""
        name = provider or MARKET
        with self._at(now, name) as (conn, at_us):
            block = conn.execute(select(schema.blocks).where(schema.blocks.c.block_id == block_id)).first()
            if block is None or (provider is not None and block.provider != provider):
                raise ProviderError(name, f"no block {block_id!r} was sold by {name}", retryable=False)
            if block.provider == SFCOMPUTE:
                raise ProviderError(
                    name,
                    f"block {block_id} is a contract paid whole: release the block or sell its nodes' time back",
                    retryable=False,
                )
            rows = node_rows(conn, schema.nodes.c.block_id == block_id)
            known = {row.node_id for row in rows}
            strangers = [n for n in node_ids if n not in known]
            if strangers:
                raise ProviderError(
                    name, f"nodes {', '.join(strangers)} are not of block {block_id}", retryable=False
                )
            wanted = set(node_ids)
            chosen = [row for row in rows if row.node_id in wanted]
            write_events(
                conn, terminate_nodes(conn, chosen, at_us, CAUSE_RELEASED, "released by the buyer", {})
            )

    @_database_errors
    def sell(
        self,
        block_id: str,
        node_ids: Sequence[str],
        cut: datetime,
        price_per_gpu_hour: Decimal,
        idempotency_key: str,
        now: datetime,
        provider: str | None = None,
    ) -> SaleFill:
        """Offer ``node_ids``' time from ``cut`` to their block's end at ``price_per_gpu_hour``; filled at
        once, whole nodes, against the book's bids (providers/builtin/sales.py)."""
        name = provider or SFCOMPUTE
        if name != SFCOMPUTE:
            raise ProviderError(
                name, f"{name} sells running time, not contracts: there is nothing to resell", retryable=False
            )
        if not idempotency_key or len(idempotency_key) > 255:
            raise ProviderError(name, "an idempotency key of 1-255 characters is required", retryable=False)
        with self._at(now, name) as (conn, at_us):
            return place_sale(
                conn,
                self.catalog,
                self.config,
                self.seed,
                provider=name,
                block_id=block_id,
                node_ids=tuple(node_ids),
                cut_us=to_us(cut, name),
                price_per_gpu_hour=price_per_gpu_hour,
                idempotency_key=idempotency_key,
                at_us=at_us,
            )

    @_database_errors
    def get_sale(self, provider: str, idempotency_key: str, now: datetime) -> SaleFill | None:
        to_us(now, provider)
        with self.engine.connect() as conn:
            return load_sale(conn, provider, idempotency_key)

    # -- work on nodes --------------------------------------------------------------------------------
    def _node(self, conn: Connection, node_id: str, provider: str | None) -> Any:
        rows = node_rows(conn, schema.nodes.c.node_id == node_id)
        name = provider or MARKET
        if not rows or (provider is not None and rows[0].provider != provider):
            raise ProviderError(name, f"node {node_id!r} is not a node {name} sold", retryable=False)
        return rows[0]

    @_database_errors
    def declare_work(self, job_id: str, reference_s: float, tier: str, now: datetime) -> None:
        """Say how much work ``job_id`` does: ``reference_s`` seconds on the reference GPU model (the A100,
        ``domain.gpus.relative_throughput`` = 1), for a job of ``tier``. The market then runs it, on a node
        of model ``m``, for ``reference_s / work_rate(m, tier)`` (``domain.contracts.work_rate``: FLEX work
        runs at the model's throughput, a FAST job holds its GPU for its wall time), whatever duration the
        buyer's ``start_work`` says: as a real job would, and as Protocol B's simulated jobs do. Whoever plays
        the job's user declares it (``scalar up --demo``'s workload); a job never declared runs for the
        duration it is started with. A job already running is re-timed from its start (ending now at the
        earliest). Declaring again replaces the declaration."""
        if not (reference_s >= 0 and math.isfinite(reference_s)):
            raise ProviderError(
                MARKET, f"reference_s must be a finite number >= 0, got {reference_s}", retryable=False
            )
        tier = Tier.parse(tier).value
        with self._at(now, MARKET) as (conn, at_us):
            conn.execute(delete(schema.job_work).where(schema.job_work.c.job_id == job_id))
            conn.execute(insert(schema.job_work).values(job_id=job_id, reference_s=reference_s, tier=tier))
            running = conn.execute(
                select(schema.work.c.id, schema.work.c.started_us, schema.blocks.c.gpu_model)
                .join(schema.nodes, schema.nodes.c.node_id == schema.work.c.node_id)
                .join(schema.blocks, schema.blocks.c.block_id == schema.nodes.c.block_id)
                .where(schema.work.c.job_id == job_id, schema.work.c.ended_us.is_(None))
            ).all()
            for row in running:
                run_s = reference_s / work_rate(row.gpu_model, Tier(tier))
                conn.execute(
                    update(schema.work)
                    .where(schema.work.c.id == row.id)
                    .values(finish_us=max(at_us, row.started_us + round(run_s * US_PER_S)))
                )

    @_database_errors
    def start_work(
        self, node_id: str, job_id: str, expected_duration_s: int, now: datetime, provider: str | None = None
    ) -> None:
        """Run ``job_id`` on a READY node on a timer: it succeeds ``expected_duration_s`` later unless the
        node stops first (a job whose work was declared, ``declare_work``: its work at the node's speed).
        Starting the same job on the same node again is a no-op."""
        name = provider or MARKET
        if expected_duration_s < 0:
            raise ProviderError(
                name, f"expected_duration_s must be >= 0, got {expected_duration_s}", retryable=False
            )
        with self._at(now, name) as (conn, at_us):
            node = self._node(conn, node_id, provider)
            running = conn.execute(
                select(schema.work.c.id).where(
                    schema.work.c.node_id == node_id,
                    schema.work.c.job_id == job_id,
                    schema.work.c.ended_us.is_(None),
                )
            ).first()
            if running is not None:
                return
            if node.state != NodeState.READY.value:
                raise ProviderError(
                    name,
                    f"node {node_id} is {node.state}, not ready: start work once it reports READY",
                    retryable=False,
                )
            run_us = expected_duration_s * US_PER_S
            declared = conn.execute(select(schema.job_work).where(schema.job_work.c.job_id == job_id)).first()
            if declared is not None:
                model = conn.execute(
                    select(schema.blocks.c.gpu_model).where(schema.blocks.c.block_id == node.block_id)
                ).scalar()
                run_us = round(declared.reference_s / work_rate(model, Tier(declared.tier)) * US_PER_S)
            conn.execute(
                insert(schema.work).values(
                    node_id=node_id, job_id=job_id, started_us=at_us, finish_us=at_us + run_us
                )
            )

    @_database_errors
    def stop_work(self, node_id: str, job_id: str, now: datetime, provider: str | None = None) -> None:
        """Cancel a job's timer (no event: the caller asked). Stopping a job that already ended is a no-op."""
        name = provider or MARKET
        with self._at(now, name) as (conn, at_us):
            self._node(conn, node_id, provider)
            rows = conn.execute(
                select(schema.work).where(schema.work.c.node_id == node_id, schema.work.c.job_id == job_id)
            ).all()
            if not rows:
                raise ProviderError(
                    name, f"job {job_id!r} was never started on node {node_id}", retryable=False
                )
            for row in rows:
                if row.ended_us is None:
                    conn.execute(
                        update(schema.work)
                        .where(schema.work.c.id == row.id)
                        .values(ended_us=at_us, outcome="stopped")
                    )

    # -- events ---------------------------------------------------------------------------------------
    def _anything_due(self, conn: Connection, now_us: int) -> bool:
        return bool(conn.execute(_ANYTHING_DUE, {"b_now": now_us}).scalar())

    @_database_errors
    def events_since(
        self, cursor: int, now: datetime, provider: str | None = None
    ) -> tuple[list[NodeEvent], int]:
        """Events numbered after ``cursor`` (of one provider, or all), after bringing the market to ``now``.

        Returns the events in order and the new cursor (the last event's number, or ``cursor`` if none):
        each event is reported once per cursor, however often the caller asks.
        """
        name = provider or MARKET
        now_us = to_us(now, name)
        with self.engine.connect() as conn:
            due = self._anything_due(conn, now_us)
        if due:
            with self._at(now, name):
                pass
        with self.engine.connect() as conn:
            if provider is None:
                rows = conn.execute(_EVENTS_AFTER, {"b_cursor": cursor}).all()
            else:
                rows = conn.execute(
                    _PROVIDER_EVENTS_AFTER, {"b_cursor": cursor, "b_provider": provider}
                ).all()
        if not rows:
            return [], cursor
        return [event_from_row(row) for row in rows], int(rows[-1].seq)

    # -- test hooks -----------------------------------------------------------------------------------
    @_database_errors
    def fail_next_boot(
        self, count: int = 1, *, provider: str | None = None, instance_type: str | None = None
    ) -> None:
        """Make the next ``count`` nodes granted (of this provider / instance type, if given) fail their boot."""
        if count < 1:
            raise MarketConfigError(f"count must be at least 1, got {count}", "ask for one failure or more")
        with locked(self.engine) as conn:
            conn.execute(
                insert(schema.boot_faults).values(
                    provider=provider, instance_type=instance_type, remaining=count
                )
            )

    @_database_errors
    def node_state(self, node_id: str, now: datetime) -> NodeState:
        """A node's state at ``now`` (brings the market up to ``now`` first)."""
        with self._at(now, MARKET) as (conn, _):
            return NodeState(self._node(conn, node_id, None).state)

    def describe(self) -> str:
        """One line about the market, for logs."""
        hour_s = market_hour_us(self.config.time_scale) / US_PER_S
        return (
            f"built-in market (seed {self.seed}, time scale {self.config.time_scale:g}: a market hour lasts "
            f"{describe_duration(round(hour_s * US_PER_S))}) selling for {', '.join(self.provider_names)}"
        )


class MarketProvider:
    """One provider's face of the built-in market: implements ``scalar.providers.base.Provider``."""

    def __init__(self, market: BuiltinMarket, name: str) -> None:
        self.market = market
        self.name = name

    def __repr__(self) -> str:
        return f"MarketProvider({self.name!r})"

    def list_offers(self, now: datetime) -> Sequence[Offer]:
        return self.market.list_offers(now, provider=self.name)

    def orderbook(self, instance_type: str, now: datetime) -> Book | None:
        if self.name != SFCOMPUTE:
            return None
        if instance_type not in BOOK_SHAPES:
            raise ProviderError(
                self.name,
                f"no orderbook for {instance_type!r}; books exist for {', '.join(BOOK_SHAPES)}",
                retryable=False,
            )
        return self.market.orderbook(instance_type, now)

    def buy(self, request: CapacityRequest, idempotency_key: str, now: datetime) -> Order:
        if request.provider != self.name:
            raise ProviderError(
                self.name,
                f"this request is for provider {request.provider!r}; send it to that provider",
                retryable=False,
            )
        return self.market.buy(request, idempotency_key, now)

    def get_order(self, idempotency_key: str, now: datetime) -> Order | None:
        return self.market.get_order(self.name, idempotency_key, now)

    def release(self, block_id: str, now: datetime) -> None:
        self.market.release(block_id, now, provider=self.name)

    def release_nodes(self, block_id: str, node_ids: Sequence[str], now: datetime) -> None:
        self.market.release_nodes(block_id, node_ids, now, provider=self.name)

    def sell(
        self,
        block_id: str,
        node_ids: Sequence[str],
        cut: datetime,
        price_per_gpu_hour: Decimal,
        idempotency_key: str,
        now: datetime,
    ) -> SaleFill:
        return self.market.sell(block_id, node_ids, cut, price_per_gpu_hour, idempotency_key, now, self.name)

    def get_sale(self, idempotency_key: str, now: datetime) -> SaleFill | None:
        return self.market.get_sale(self.name, idempotency_key, now)

    def start_work(self, node_id: str, job_id: str, expected_duration_s: int, now: datetime) -> None:
        self.market.start_work(node_id, job_id, expected_duration_s, now, provider=self.name)

    def stop_work(self, node_id: str, job_id: str, now: datetime) -> None:
        self.market.stop_work(node_id, job_id, now, provider=self.name)

    def events_since(self, cursor: int, now: datetime) -> tuple[Sequence[NodeEvent], int]:
        return self.market.events_since(cursor, now, provider=self.name)


if TYPE_CHECKING:  # mypy checks that each face implements the Protocol exactly
    _face: type[Provider] = MarketProvider
