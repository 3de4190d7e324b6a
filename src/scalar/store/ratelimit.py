"""Token buckets in the database, so every API process on one database shares one budget per key.

``take(conn, key, rate_per_s, burst, now_s, want)`` is one statement (an UPSERT with ``RETURNING``, on
SQLite and PostgreSQL): refill the bucket for the time since it was last touched (``rate_per_s`` tokens a
second, at most ``burst``), take up to ``want`` whole tokens (as many as it holds), and say how many it
took. A process that takes several spends them itself afterwards (``api.auth.SharedRateLimiter``'s lease). The refill, the check and the
write happen in that one statement under the row's lock, so two processes racing on one key cannot both
spend its last token. Time is a parameter (epoch seconds of the caller's clock); a caller whose clock is
behind the last writer's refills nothing until it catches up (``at`` never goes backwards).

``forget(conn, prefix, older_than_s)`` deletes buckets untouched since then (full again: forgetting them
changes nothing), so keys that come and go (addresses) do not pile up.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import Connection, text

from scalar.store.db import is_postgres

MAX_KEY = 300

_FILL = {
    "sqlite": "min(:burst, rate_buckets.level + max(0.0, :now - rate_buckets.at) * :rate)",
    "postgresql": "LEAST(:burst, rate_buckets.level + GREATEST(0.0, :now - rate_buckets.at) * :rate)",
}
_LATEST = {"sqlite": "max(rate_buckets.at, :now)", "postgresql": "GREATEST(rate_buckets.at, :now)"}
# whole tokens taken: at most :want, at most what the refilled bucket holds (it is never negative)
_TAKEN = {
    "sqlite": "min(:want, CAST({fill} AS INTEGER))",
    "postgresql": "CAST(LEAST(:want, FLOOR({fill})) AS INTEGER)",
}


def _upsert(dialect: str) -> str:
    fill = _FILL[dialect]
    taken = _TAKEN[dialect].format(fill=fill)
    return (
        "INSERT INTO rate_buckets (key, level, at, granted) VALUES (:key, :burst - :first, :now, :first) "
        "ON CONFLICT (key) DO UPDATE SET "
        f"level = {fill} - {taken}, "
        f"granted = {taken}, "
        f"at = {_LATEST[dialect]} "
        "RETURNING level, granted"
    )


_SQL = {dialect: text(_upsert(dialect)) for dialect in _FILL}
_NO_FLUSH = text("SET LOCAL synchronous_commit TO OFF")


def bucket_key(key: str) -> str:
    """``key`` as stored: a digest when it is longer than the column."""
    if len(key) <= MAX_KEY:
        return key
    return key[:200] + "#" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def take(
    conn: Connection, key: str, rate_per_s: float, burst: float, now_s: float, want: int = 1
) -> tuple[int, float]:
    """``(taken, level)``: how many tokens (0 to ``want``) were taken for ``key``, and the tokens left in
    its bucket."""
    if want < 1:
        raise ValueError(f"want must be at least 1, got {want}")
    dialect = "postgresql" if is_postgres(conn) else "sqlite"
    if dialect == "postgresql":  # a bucket is not worth a flush to disk: losing its last moves in a
        conn.execute(_NO_FLUSH)  # crash only refills it a little (and takes no lock, no fsync wait)
    first = min(want, int(burst))  # a new bucket starts full
    params = {
        "key": bucket_key(key),
        "rate": float(rate_per_s),
        "burst": float(burst),
        "now": float(now_s),
        "want": int(want),
        "first": first,
    }
    level, granted = conn.execute(_SQL[dialect], params).one()
    return int(granted), float(level)


def forget(conn: Connection, prefix: str, older_than_s: float) -> int:
    """Delete the buckets under ``prefix`` last touched before ``older_than_s``; how many."""
    pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    result = conn.execute(
        text("DELETE FROM rate_buckets WHERE key LIKE :pattern ESCAPE '\\' AND at < :before"),
        {"pattern": pattern, "before": float(older_than_s)},
    )
    return int(result.rowcount or 0)
