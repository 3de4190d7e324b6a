"""Repositories of serverless endpoints: endpoints, workers, durable requests and scaling decisions.

Functions over an open connection (``tx.conn`` of ``store.write()`` / ``store.read()``); rows come back as
plain dicts whose keys are the columns (``schema_endpoints``). Writes are the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, insert, or_, select, update

from scalar.store.schema_endpoints import (
    endpoint_requests,
    endpoint_scaling,
    endpoint_stream_chunks,
    endpoint_workers,
    endpoints,
)

ACTIVE = "active"
DELETED = "deleted"
QUEUED = "IN_QUEUE"
RUNNING = "IN_PROGRESS"


def _dict(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


# ---------------------------------------------------------------------------------------------- endpoints


def insert_endpoint(conn: Connection, values: Mapping[str, Any]) -> None:
    conn.execute(insert(endpoints).values(**values))


def update_endpoint(conn: Connection, endpoint_id: str, values: Mapping[str, Any]) -> None:
    conn.execute(update(endpoints).where(endpoints.c.id == endpoint_id).values(**values))


def get_endpoint(conn: Connection, endpoint_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(endpoints).where(endpoints.c.id == endpoint_id)).first()
    return None if row is None else _dict(row)


def find_active_by_name(conn: Connection, name: str, *, tenant: str | None = None) -> dict[str, Any] | None:
    """The active endpoint called ``name`` (of ``tenant``, when given: names are unique per tenant)."""
    query = select(endpoints).where(endpoints.c.name == name, endpoints.c.state == ACTIVE)
    if tenant is not None:
        query = query.where(endpoints.c.tenant == tenant)
    row = conn.execute(query).first()
    return None if row is None else _dict(row)


def list_endpoints(
    conn: Connection,
    *,
    include_deleted: bool = False,
    tenant: str | None = None,
    limit: int | None = None,
    offset: int = 0,
    after: tuple[datetime, str] | None = None,
    descending: bool = False,
) -> list[dict[str, Any]]:
    """Endpoints in creation order (then id; ``descending``: the other way); only ``tenant``'s when given;
    a page of ``limit`` from ``offset``, or past the ``(created_at, id)`` key ``after`` in this order."""
    at_col, id_col = endpoints.c.created_at, endpoints.c.id
    if descending:
        query = select(endpoints).order_by(at_col.desc(), id_col.desc())
    else:
        query = select(endpoints).order_by(at_col, id_col)
    if after is not None:
        at, ident = after
        if descending:
            query = query.where(or_(at_col < at, and_(at_col == at, id_col < ident)))
        else:
            query = query.where(or_(at_col > at, and_(at_col == at, id_col > ident)))
    if not include_deleted:
        query = query.where(endpoints.c.state == ACTIVE)
    if tenant is not None:
        query = query.where(endpoints.c.tenant == tenant)
    if limit is not None:
        query = query.limit(limit)
    if offset:
        query = query.offset(offset)
    return [_dict(r) for r in conn.execute(query)]


# ---------------------------------------------------------------------------------------------- workers


def insert_worker(conn: Connection, values: Mapping[str, Any]) -> None:
    conn.execute(insert(endpoint_workers).values(**{"served": 0, **values}))


def update_worker(conn: Connection, worker_id: str, values: Mapping[str, Any]) -> None:
    conn.execute(update(endpoint_workers).where(endpoint_workers.c.id == worker_id).values(**values))


def list_workers(
    conn: Connection, endpoint_id: str, *, states: Sequence[str] | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    query = (
        select(endpoint_workers)
        .where(endpoint_workers.c.endpoint_id == endpoint_id)
        .order_by(endpoint_workers.c.created_at, endpoint_workers.c.id)
    )
    if states is not None:
        query = query.where(endpoint_workers.c.state.in_(list(states)))
    if limit is not None:
        query = query.limit(limit)
    return [_dict(r) for r in conn.execute(query)]


def get_worker(conn: Connection, worker_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(endpoint_workers).where(endpoint_workers.c.id == worker_id)).first()
    return None if row is None else _dict(row)


# ---------------------------------------------------------------------------------------------- requests


def insert_request(conn: Connection, values: Mapping[str, Any]) -> None:
    conn.execute(insert(endpoint_requests).values(**{"attempts": 0, "retries": 0, **values}))


def update_request(conn: Connection, request_id: str, values: Mapping[str, Any]) -> None:
    conn.execute(update(endpoint_requests).where(endpoint_requests.c.id == request_id).values(**values))


def update_request_if(
    conn: Connection, request_id: str, expect_status: str, values: Mapping[str, Any]
) -> bool:
    """Update only if the request is still in ``expect_status`` (an API call may have cancelled it)."""
    result = conn.execute(
        update(endpoint_requests)
        .where(endpoint_requests.c.id == request_id, endpoint_requests.c.status == expect_status)
        .values(**values)
    )
    return bool(result.rowcount)


def get_request(conn: Connection, request_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(endpoint_requests).where(endpoint_requests.c.id == request_id)).first()
    return None if row is None else _dict(row)


def requests_in(
    conn: Connection, endpoint_id: str, status: str, *, limit: int | None = None
) -> list[dict[str, Any]]:
    """Requests of one status, oldest first."""
    query = (
        select(endpoint_requests)
        .where(endpoint_requests.c.endpoint_id == endpoint_id, endpoint_requests.c.status == status)
        .order_by(endpoint_requests.c.created_at, endpoint_requests.c.id)
    )
    if limit is not None:
        query = query.limit(limit)
    return [_dict(r) for r in conn.execute(query)]


def requests_of_worker(
    conn: Connection, worker_id: str, statuses: Sequence[str], since: datetime
) -> list[dict[str, Any]]:
    """A worker's requests in one of ``statuses`` that finished at or after ``since``."""
    query = select(endpoint_requests).where(
        endpoint_requests.c.worker_id == worker_id,
        endpoint_requests.c.status.in_(list(statuses)),
        endpoint_requests.c.finished_at >= since,
    )
    return [_dict(r) for r in conn.execute(query)]


def count_requests(conn: Connection, endpoint_id: str) -> dict[str, int]:
    """Requests by status, and ``retried``: how many requests were retried after losing their worker."""
    rows = conn.execute(
        select(endpoint_requests.c.status, func.count())
        .where(endpoint_requests.c.endpoint_id == endpoint_id)
        .group_by(endpoint_requests.c.status)
    ).all()
    counts = {str(status): int(n) for status, n in rows}
    retried = conn.execute(
        select(func.count()).where(
            endpoint_requests.c.endpoint_id == endpoint_id, endpoint_requests.c.retries > 0
        )
    ).scalar_one()
    counts["retried"] = int(retried)
    return counts


def recent_requests(conn: Connection, endpoint_id: str, limit: int = 100) -> list[dict[str, Any]]:
    """The newest requests first."""
    query = (
        select(endpoint_requests)
        .where(endpoint_requests.c.endpoint_id == endpoint_id)
        .order_by(endpoint_requests.c.created_at.desc(), endpoint_requests.c.id.desc())
        .limit(limit)
    )
    return [_dict(r) for r in conn.execute(query)]


def purge_queued(conn: Connection, endpoint_id: str, values: Mapping[str, Any]) -> int:
    """Set ``values`` on every queued request of the endpoint; returns how many there were."""
    result = conn.execute(
        update(endpoint_requests)
        .where(endpoint_requests.c.endpoint_id == endpoint_id, endpoint_requests.c.status == QUEUED)
        .values(**values)
    )
    return int(result.rowcount or 0)


def webhooks_due(
    conn: Connection, terminal: Sequence[str], now: datetime, limit: int
) -> list[dict[str, Any]]:
    """Finished requests with a webhook not delivered yet: never tried, or a retry that is due."""
    never = endpoint_requests.c.webhook_status.is_(None)
    retry = endpoint_requests.c.webhook_status.in_(["retry", "sending"]) & (
        endpoint_requests.c.webhook_next_at <= now
    )
    query = (
        select(endpoint_requests)
        .where(
            endpoint_requests.c.webhook.is_not(None),
            endpoint_requests.c.status.in_(list(terminal)),
            never | retry,
        )
        .order_by(endpoint_requests.c.finished_at, endpoint_requests.c.id)
        .limit(limit)
    )
    return [_dict(r) for r in conn.execute(query)]


def claim_webhook(
    conn: Connection, request_id: str, seen_status: str | None, attempts: int, lease_until: datetime
) -> bool:
    """Take a webhook delivery (``sending`` until ``lease_until``) if nobody else did since it was read."""
    status = endpoint_requests.c.webhook_status
    result = conn.execute(
        update(endpoint_requests)
        .where(
            endpoint_requests.c.id == request_id,
            status.is_(None) if seen_status is None else status == seen_status,
            endpoint_requests.c.webhook_attempts == attempts,
        )
        .values(webhook_status="sending", webhook_next_at=lease_until)
    )
    return bool(result.rowcount)


# ---------------------------------------------------------------------------------------------- streams


def add_chunks(
    conn: Connection, request_id: str, outputs: Sequence[Any], at: datetime, limit: int | None = None
) -> int:
    """Append what a streaming handler yielded, in order; returns the number of chunks now stored, or -1
    (nothing stored) when that would pass ``limit``."""
    last = conn.execute(
        select(func.max(endpoint_stream_chunks.c.seq)).where(
            endpoint_stream_chunks.c.request_id == request_id
        )
    ).scalar_one()
    seq = -1 if last is None else int(last)
    if limit is not None and seq + 1 + len(outputs) > limit:
        return -1
    for output in outputs:
        seq += 1
        conn.execute(
            insert(endpoint_stream_chunks).values(
                request_id=request_id, seq=seq, output=output, taken=False, at=at
            )
        )
    return seq + 1


def take_chunks(conn: Connection, request_id: str) -> list[Any]:
    """The chunks not returned yet, in order, marked returned: each chunk is taken exactly once."""
    rows = conn.execute(
        select(endpoint_stream_chunks.c.id, endpoint_stream_chunks.c.output)
        .where(endpoint_stream_chunks.c.request_id == request_id, endpoint_stream_chunks.c.taken.is_(False))
        .order_by(endpoint_stream_chunks.c.seq)
    ).all()
    taken: list[Any] = []
    for chunk_id, output in rows:
        result = conn.execute(
            update(endpoint_stream_chunks)
            .where(endpoint_stream_chunks.c.id == chunk_id, endpoint_stream_chunks.c.taken.is_(False))
            .values(taken=True)
        )
        if result.rowcount:
            taken.append(output)
    return taken


def all_chunks(conn: Connection, request_id: str) -> list[Any]:
    """Every chunk of the request, in order (the aggregate stream)."""
    rows = conn.execute(
        select(endpoint_stream_chunks.c.output)
        .where(endpoint_stream_chunks.c.request_id == request_id)
        .order_by(endpoint_stream_chunks.c.seq)
    ).all()
    return [r[0] for r in rows]


# ---------------------------------------------------------------------------------------------- scaling


def record_scaling(conn: Connection, endpoint_id: str, at: datetime, values: Mapping[str, Any]) -> None:
    conn.execute(insert(endpoint_scaling).values(endpoint_id=endpoint_id, at=at, **values))


def list_scaling(conn: Connection, endpoint_id: str, limit: int = 100) -> list[dict[str, Any]]:
    """The newest decisions first."""
    query = (
        select(endpoint_scaling)
        .where(endpoint_scaling.c.endpoint_id == endpoint_id)
        .order_by(endpoint_scaling.c.id.desc())
        .limit(limit)
    )
    return [_dict(r) for r in conn.execute(query)]
