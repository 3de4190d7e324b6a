"""Reading provider JSON strictly: every missing or mistyped field is a ``ProviderError`` naming its path.

A provider's answer is trusted only as far as it is checked. ``Fields`` walks a decoded JSON payload and
raises ``ProviderError("GET /availability/gpus page 2: items[3].prices.onDemand is missing")`` the moment
something is not what the wire format promises, so the runtime can record a specific error for that
provider and keep its last good prices. ``collect_pages`` follows a paged listing to the end, with a cap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from scalar.domain.money import to_decimal
from scalar.providers.base import ProviderError

DEFAULT_MAX_PAGES = 50

_MISSING = object()

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Fields:
    """Typed access to one JSON object; ``where`` names the call, ``path`` the object inside its answer."""

    provider: str
    where: str
    value: dict[str, Any]
    path: str = ""

    @classmethod
    def root(cls, provider: str, where: str, payload: Any) -> Fields:
        if not isinstance(payload, dict):
            raise ProviderError(
                provider, f"{where}: expected a JSON object, got {_kind(payload)}", retryable=True
            )
        return cls(provider, where, payload)

    # -- errors ---------------------------------------------------------------------------------------
    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, problem: str) -> ProviderError:
        return ProviderError(self.provider, f"{self.where}: {self.name(key)} {problem}", retryable=True)

    # -- raw access -----------------------------------------------------------------------------------
    def has(self, key: str) -> bool:
        return key in self.value

    def raw(self, key: str, *, optional: bool = False) -> Any:
        value = self.value.get(key, _MISSING)
        if value is _MISSING:
            if optional:
                return None
            raise self.error(key, "is missing")
        if value is None and not optional:
            raise self.error(key, "is null")
        return value

    # -- typed access ---------------------------------------------------------------------------------
    def obj(self, key: str, *, optional: bool = False) -> Fields | None:
        value = self.raw(key, optional=optional)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error(key, f"should be an object, got {_kind(value)}")
        return Fields(self.provider, self.where, value, self.name(key))

    def req_obj(self, key: str) -> Fields:
        found = self.obj(key)
        assert found is not None
        return found

    def objects(self, key: str) -> list[Fields]:
        """A required list of objects (an empty list is fine)."""
        value = self.raw(key)
        if not isinstance(value, list):
            raise self.error(key, f"should be a list, got {_kind(value)}")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.error(f"{key}[{i}]", f"should be an object, got {_kind(item)}")
            out.append(Fields(self.provider, self.where, item, self.name(f"{key}[{i}]")))
        return out

    def text(self, key: str) -> str:
        value = self.raw(key)
        if not isinstance(value, str):
            raise self.error(key, f"should be a string, got {_kind(value)}")
        return value

    def opt_text(self, key: str) -> str | None:
        value = self.raw(key, optional=True)
        if value is not None and not isinstance(value, str):
            raise self.error(key, f"should be a string, got {_kind(value)}")
        return value

    def integer(self, key: str) -> int:
        value = self.raw(key)
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise self.error(key, f"should be an integer, got {_kind(value)}")
        return value

    def opt_integer(self, key: str) -> int | None:
        if self.raw(key, optional=True) is None:
            return None
        return self.integer(key)

    def flag(self, key: str, *, default: bool | None = None) -> bool:
        value = self.raw(key, optional=default is not None)
        if value is None:
            assert default is not None
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"should be true or false, got {_kind(value)}")
        return value

    def decimal(self, key: str) -> Decimal:
        """A price given as a JSON number or a decimal string, exactly."""
        value = self.raw(key)
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise self.error(key, f"should be a number, got {_kind(value)}")
        try:
            amount = to_decimal(value)
        except (InvalidOperation, ValueError):
            raise self.error(key, f"should be a number, got {value!r}") from None
        if not amount.is_finite():
            raise self.error(key, f"should be a finite number, got {value!r}")
        return amount

    def opt_decimal(self, key: str) -> Decimal | None:
        if self.raw(key, optional=True) is None:
            return None
        return self.decimal(key)

    def time(self, key: str) -> datetime:
        """An ISO 8601 timestamp; a naive one is taken as UTC."""
        text = self.text(key)
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise self.error(key, f"should be an ISO 8601 time, got {text!r}") from None
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)

    def opt_time(self, key: str) -> datetime | None:
        if self.raw(key, optional=True) is None:
            return None
        return self.time(key)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def collect_pages(
    provider: str,
    what: str,
    max_pages: int,
    fetch: Callable[[int], tuple[list[T], bool]],
) -> list[T]:
    """Call ``fetch(page_index)`` (0-based) until it says it was the last page; at most ``max_pages`` pages.

    ``fetch`` returns the page's items and whether more pages follow. A listing still going after the cap
    is an error naming the cap (a provider that never says "done" must not loop forever).
    """
    if max_pages < 1:
        raise ValueError(f"max_pages must be at least 1, got {max_pages}")
    items: list[T] = []
    for index in range(max_pages):
        page, more = fetch(index)
        items.extend(page)
        if not more:
            return items
    raise ProviderError(
        provider,
        f"{what} still had more pages after the page cap of {max_pages} pages "
        f"({len(items)} items read); raise max_pages if the listing is really that long",
        retryable=False,
    )
