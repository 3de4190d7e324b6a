"""What the price-only clouds (AWS, Azure, GCP) share: they publish prices, Scalar buys nothing there yet.

``PriceOnlyProvider`` implements the selling half of ``scalar.providers.base.Provider`` by refusing, with a
sentence that says so (``ProviderError(retryable=False)``); subclasses implement ``list_offers``.
``FetchReport`` counts what one fetch read, kept and left out: rows excluded by rule (another price tier,
Windows) and rows skipped for a reason worth a warning (an instance type the catalog does not know, a VM
whose parts are not all priced). Warnings are logged and kept on the client as ``last_report``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx

from scalar.domain.market import CapacityRequest, NodeEvent, Order
from scalar.providers.base import Book, ProviderError

EXAMPLES_PER_REASON = 3
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


@dataclass
class FetchReport:
    """What one ``list_offers`` call read and made of it (mutable while the fetch runs)."""

    provider: str
    pages: int = 0
    rows: int = 0
    offers: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def exclude(self, reason: str, count: int = 1) -> None:
        """A row left out by rule (another price tier, another OS): expected, not a warning."""
        self.excluded[reason] = self.excluded.get(reason, 0) + count

    def skip(self, reason: str, example: str | None = None, count: int = 1) -> None:
        """A row or shape left out because it cannot be priced or described: a warning."""
        self.skipped[reason] = self.skipped.get(reason, 0) + count
        if example is not None:
            seen = self.examples.setdefault(reason, [])
            if example not in seen and len(seen) < EXAMPLES_PER_REASON:
                seen.append(example)

    @property
    def warnings(self) -> tuple[str, ...]:
        """One sentence per skip reason, with how many and a few examples."""
        out = []
        for reason, count in self.skipped.items():
            examples = self.examples.get(reason)
            tail = f" (e.g. {', '.join(examples)})" if examples else ""
            out.append(f"{self.provider}: skipped {count}: {reason}{tail}")
        return tuple(out)

    def log(self, logger: logging.Logger) -> None:
        for warning in self.warnings:
            logger.warning(warning)


def page_cap_error(provider: str, what: str, max_pages: int, setting: str) -> ProviderError:
    """Pagination went past the cap: asking again will not help, raising the cap or narrowing may."""
    return ProviderError(
        provider,
        f"{what} still had more pages after {max_pages} pages (the page cap); raise {setting} or narrow "
        "the regions",
        retryable=False,
    )


def env_flag(env: Mapping[str, str], key: str) -> bool:
    return (env.get(key) or "").strip().lower() in TRUE_WORDS


def env_list(env: Mapping[str, str], key: str, default: Sequence[str]) -> tuple[str, ...]:
    """A comma-separated list from ``env`` (blank entries dropped), or ``default`` when unset or empty."""
    raw = env.get(key)
    if raw is None:
        return tuple(default)
    items = tuple(part.strip() for part in raw.split(",") if part.strip())
    return items or tuple(default)


def env_positive_int(env: Mapping[str, str], key: str, default: int) -> int:
    raw = (env.get(key) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(
            f"{key}={raw!r} is not a whole number; set it to a page count such as {default}"
        ) from None
    if value < 1:
        raise ValueError(f"{key}={raw!r} must be at least 1")
    return value


class PriceOnlyProvider:
    """The selling half of the provider Protocol for a source Scalar only reads prices from."""

    name: str = ""
    refusal: str = "Scalar reads this provider's prices; buying capacity there is not supported yet"

    def _refuse(self) -> ProviderError:
        return ProviderError(self.name, self.refusal, retryable=False)

    def orderbook(self, instance_type: str, now: datetime) -> Book | None:
        return None

    def buy(self, request: CapacityRequest, idempotency_key: str, now: datetime) -> Order:
        raise self._refuse()

    def get_order(self, idempotency_key: str, now: datetime) -> Order | None:
        return None

    def release(self, block_id: str, now: datetime) -> None:
        raise self._refuse()

    def events_since(self, cursor: int, now: datetime) -> tuple[Sequence[NodeEvent], int]:
        return (), cursor


def decode_json(provider: str, response: httpx.Response, what: str) -> dict[str, Any]:
    """A JSON object body with every fractional number as an exact ``Decimal`` (prices stay exact)."""
    try:
        body = json.loads(response.content, parse_float=Decimal)
    except ValueError:
        raise ProviderError(
            provider, f"{what} answered with malformed JSON: {response.text[:120]!r}"
        ) from None
    if not isinstance(body, dict):
        raise ProviderError(provider, f"{what} answered with {type(body).__name__} JSON, not an object")
    return body


def money_value(provider: str, value: Any, where: str) -> Decimal:
    """A JSON price (number or numeric string) as an exact ``Decimal``."""
    if isinstance(value, bool) or not isinstance(value, int | str | Decimal):
        raise ProviderError(provider, f"{where} is {value!r}, not a number")
    try:
        amount = Decimal(value) if not isinstance(value, Decimal) else value
    except InvalidOperation:
        raise ProviderError(provider, f"{where} is {value!r}, not a number") from None
    if not amount.is_finite():
        raise ProviderError(provider, f"{where} is {value!r}, not a finite number")
    return amount
