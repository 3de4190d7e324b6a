"""The live book of an SFCompute-style instance type: this hour's generated levels, minus what was bought
from them this hour, plus the contracts sold back that have not expired."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import Connection, func, insert, select

from scalar.domain.orderbook import BookOrder
from scalar.providers.builtin import schema
from scalar.providers.builtin.books import FillPart, GeneratedBook, Level, generate_book, remaining_asks
from scalar.providers.builtin.clock import hour_bucket
from scalar.providers.builtin.config import BOOK_SHAPES, MarketConfig
from scalar.providers.catalog import Catalog

RESALE_PREFIX = "r"


@functools.lru_cache(maxsize=16)
def anchor_price(catalog: Catalog, gpu_model: str) -> Decimal:
    """The reference an SFCompute-style book is built around: the catalog's spot reference $/GPU-h of
    8-GPU offers (see docs/decisions/builtin-market.md for why spot)."""
    return catalog.reference_price_per_gpu_hour(gpu_model, spot=True, min_gpu_count=8)


@functools.lru_cache(maxsize=256)
def generated(catalog: Catalog, seed: int, instance_type: str, hour: int) -> GeneratedBook:
    shape = BOOK_SHAPES[instance_type]
    return generate_book(seed, instance_type, hour, anchor_price(catalog, shape.gpu_model))


@dataclass(frozen=True, slots=True)
class LiveBook:
    instance_type: str
    hour: int
    generated: GeneratedBook
    asks: tuple[Level, ...]  # what can be bought now, cheapest first

    @property
    def bids(self) -> tuple[BookOrder, ...]:
        return self.generated.bids

    @property
    def best_ask(self) -> Decimal | None:
        return self.asks[0].price_per_gpu_hour if self.asks else None


def live_book(
    conn: Connection, catalog: Catalog, config: MarketConfig, seed: int, instance_type: str, at_us: int
) -> LiveBook:
    hour = hour_bucket(at_us, config.time_scale)
    book = generated(catalog, seed, instance_type, hour)
    filled: dict[str, int] = {}
    for key, quantity in conn.execute(
        select(schema.fills.c.level_key, func.sum(schema.fills.c.quantity_gpus))
        .where(schema.fills.c.instance_type == instance_type, schema.fills.c.hour == hour)
        .group_by(schema.fills.c.level_key)
    ).all():
        if not key.startswith(RESALE_PREFIX):  # resold levels are counted below, over every hour
            filled[key] = int(quantity)
    resale_rows = conn.execute(
        select(schema.resales)
        .where(schema.resales.c.instance_type == instance_type, schema.resales.c.expires_us > at_us)
        .order_by(schema.resales.c.id)
    ).all()
    resold: list[Level] = []
    if resale_rows:
        keys = [f"{RESALE_PREFIX}{row.id}" for row in resale_rows]
        for key, quantity in conn.execute(
            select(schema.fills.c.level_key, func.sum(schema.fills.c.quantity_gpus))
            .where(schema.fills.c.level_key.in_(keys))
            .group_by(schema.fills.c.level_key)
        ).all():
            filled[key] = int(quantity)
        resold = [
            Level(
                f"{RESALE_PREFIX}{row.id}",
                Decimal(row.price_per_gpu_hour),
                int(row.quantity_gpus),
                Decimal(int(row.duration_hours)),
            )
            for row in resale_rows
        ]
    return LiveBook(instance_type, hour, book, remaining_asks(book, filled, resold))


def record_fills(conn: Connection, book: LiveBook, parts: tuple[FillPart, ...], order_id: str) -> None:
    conn.execute(
        insert(schema.fills),
        [
            {
                "instance_type": book.instance_type,
                "hour": book.hour,
                "level_key": part.level_key,
                "quantity_gpus": part.quantity_gpus,
                "price_per_gpu_hour": str(part.price_per_gpu_hour),
                "order_id": order_id,
            }
            for part in parts
        ],
    )
