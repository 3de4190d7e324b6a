"""Market data history: every observed offer price, appended; ``latest_prices`` reads the newest per shape.

A shape is (provider, region, zone, instance type, spot). Prices are exact (``Decimal``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, insert, select

from scalar.domain.offers import Offer
from scalar.store.schema import spot_prices

_SHAPE = ("provider", "region", "zone", "instance_type", "spot")


def record_prices(conn: Connection, offers: Iterable[Offer], *, observed_at: datetime | None = None) -> int:
    """Append one row per offer; an offer without ``observed_at`` takes the one given here.
    Returns how many rows were written."""
    rows: list[dict[str, Any]] = []
    for offer in offers:
        at = offer.observed_at or observed_at
        if at is None:
            raise ValueError(
                f"offer {offer.key} has no observed_at: set it on the offer or pass observed_at="
            )
        rows.append(
            {
                "provider": offer.provider,
                "region": offer.region,
                "zone": offer.availability_zone or "",
                "instance_type": offer.instance_type,
                "gpu_model": offer.gpu_model,
                "gpu_count": float(offer.gpu_count),
                "gpu_memory_gb": float(offer.gpu_memory_gb),
                "vcpu": float(offer.vcpu),
                "memory_gb": float(offer.memory_gb),
                "price_per_hour": offer.price_per_hour,
                "spot": offer.spot,
                "interruption_rate": offer.interruption_rate,
                "observed_at": at,
            }
        )
    if rows:
        conn.execute(insert(spot_prices), rows)
    return len(rows)


def _offer(row: Any) -> Offer:
    return Offer(
        provider=row.provider,
        instance_type=row.instance_type,
        region=row.region,
        price_per_hour=row.price_per_hour,
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        gpu_memory_gb=row.gpu_memory_gb,
        vcpu=row.vcpu,
        memory_gb=row.memory_gb,
        availability_zone=row.zone or None,
        spot=bool(row.spot),
        interruption_rate=row.interruption_rate,
        observed_at=row.observed_at,
    )


def latest_prices(
    conn: Connection,
    *,
    provider: str | None = None,
    gpu_model: str | None = None,
    as_of: datetime | None = None,
) -> list[Offer]:
    """The newest observation of every shape (as of ``as_of`` when given), sorted by shape.
    When one shape has two rows at the same newest time, the later-written one wins."""
    p = spot_prices
    filters = []
    if provider is not None:
        filters.append(p.c.provider == provider)
    if gpu_model is not None:
        filters.append(p.c.gpu_model == gpu_model)
    if as_of is not None:
        filters.append(p.c.observed_at <= as_of)
    last_at = (
        select(*[p.c[c] for c in _SHAPE], func.max(p.c.observed_at).label("observed_at"))
        .where(*filters)
        .group_by(*[p.c[c] for c in _SHAPE])
        .subquery("last_at")
    )
    last_id = (
        select(func.max(p.c.id).label("id"))
        .select_from(p)
        .join(
            last_at,
            and_(*[p.c[c] == last_at.c[c] for c in _SHAPE], p.c.observed_at == last_at.c.observed_at),
        )
        .group_by(*[p.c[c] for c in _SHAPE])
        .subquery("last_id")
    )
    query = (
        select(p)
        .join(last_id, p.c.id == last_id.c.id)
        .order_by(p.c.provider, p.c.region, p.c.zone, p.c.instance_type, p.c.spot)
    )
    return [_offer(row) for row in conn.execute(query)]
