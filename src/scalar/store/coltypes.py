"""Column types that behave the same on SQLite and PostgreSQL.

- ``UTCDateTime``: aware UTC datetimes in and out. PostgreSQL stores ``timestamptz``; SQLite stores the
  naive UTC text SQLAlchemy writes (fixed width, so text order is time order).
- ``ExactDecimal``: money, exact. PostgreSQL ``NUMERIC`` (no precision cap); SQLite stores the decimal's text,
  because SQLite's NUMERIC affinity would turn it into a binary float.
- ``JSONDocument``: a JSON object, stored as text-preserving ``json`` on PostgreSQL (not ``jsonb``) and as
  text on SQLite. Serialization is the store's canonical one (``jsoncodec``), set on the engine.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import JSON, DateTime, Dialect, Numeric, String
from sqlalchemy.types import TypeDecorator, TypeEngine


class UTCDateTime(TypeDecorator[datetime]):
    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"naive datetime {value.isoformat()} given to the store: pass an aware UTC time "
                "(datetime.now(UTC) or .replace(tzinfo=UTC))"
            )
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class ExactDecimal(TypeDecorator[Decimal]):
    impl = Numeric
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(64))
        return dialect.type_descriptor(Numeric(asdecimal=True))

    def process_bind_param(self, value: Decimal | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, Decimal):
            raise TypeError(f"money must be a Decimal, got {type(value).__name__} {value!r}")
        if not value.is_finite():
            raise ValueError(f"money must be finite, got {value}")
        return str(value) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        return value if isinstance(value, Decimal) else Decimal(str(value))


JSONDocument = JSON(none_as_null=True)
