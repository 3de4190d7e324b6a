"""Fixtures of the built-in market tests (imported explicitly by tests/providers/test_sim_market*.py).

``market_url`` runs a test once on a fresh SQLite file and once on a fresh PostgreSQL database
(``market_test_<hex>`` on 127.0.0.1:5432, dropped WITH (FORCE) afterwards).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from scalar.domain.market import CapacityRequest, NodeEvent
from scalar.domain.tier import Tier
from scalar.providers.sim import BuiltinMarket, MarketConfig

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
T0 = datetime(2025, 7, 1, 12, 0, 0, tzinfo=UTC)


def pg_database() -> Iterator[str]:
    name = f"market_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def market_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'market.db'}"
    else:
        yield from pg_database()


def _opener(default_url: str) -> Iterator[Callable[..., BuiltinMarket]]:
    opened: list[BuiltinMarket] = []

    def _open(config: MarketConfig | None = None, url: str | None = None) -> BuiltinMarket:
        market = BuiltinMarket(url or default_url, config)
        opened.append(market)
        return market

    yield _open
    for market in opened:
        market.close()


@pytest.fixture
def open_market(market_url: str) -> Iterator[Callable[..., BuiltinMarket]]:
    """``open_market(config=None, url=None)``: a market on the test's database (closed after the test)."""
    yield from _opener(market_url)


@pytest.fixture
def open_sqlite_market(tmp_path: Path) -> Iterator[Callable[..., BuiltinMarket]]:
    """The same on SQLite only, for behaviour that does not depend on the database."""
    yield from _opener(f"sqlite:///{tmp_path / 'market.db'}")


def sfc_request(nodes: int = 1, hours: int = 4, limit: str | None = None, **kw: object) -> CapacityRequest:
    return CapacityRequest(
        provider="sfcompute",
        instance_type=str(kw.pop("instance_type", "8xH100")),
        node_count=nodes,
        duration_s=hours * 3600,
        limit_price_per_gpu_hour=None if limit is None else Decimal(limit),
        tier=Tier.FAST,
        **kw,  # type: ignore[arg-type]
    )


def drain(
    market: BuiltinMarket,
    until: datetime,
    provider: str | None = None,
    cursor: int = 0,
    step: timedelta | None = None,
    start: datetime = T0,
) -> tuple[list[NodeEvent], int]:
    """Ask for events every ``step`` from ``start`` to ``until`` (once at ``until`` without a step)."""
    out: list[NodeEvent] = []
    times = [until] if step is None else []
    if step is not None:
        at = start
        while at < until:
            times.append(at)
            at += step
        times.append(until)
    for at in times:
        events, new_cursor = market.events_since(cursor, at, provider=provider)
        assert new_cursor >= cursor
        out.extend(events)
        cursor = new_cursor
    return out, cursor
