"""One HTTP client for every provider: timeouts, retries with backoff and jitter, clear errors.

Retries happen on connection errors, timeouts, 429 and 5xx, honouring ``Retry-After`` (seconds or an HTTP
date). Anything else (400, 401, 403, 404...) is a ``ProviderError`` at once, with the provider's own
message when the body carries one. ``sleep`` and ``rng`` are injectable so tests run instantly.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from scalar.providers.base import ProviderError

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0


class HttpStatusError(ProviderError):
    """A non-success HTTP answer. ``status`` is the HTTP status code."""

    def __init__(self, provider: str, status: int, message: str, retryable: bool) -> None:
        self.status = status
        super().__init__(provider, f"HTTP {status}: {message}", retryable=retryable)


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Parse a ``Retry-After`` header: delta seconds or an HTTP date. ``None`` when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


def default_error_message(response: httpx.Response) -> str:
    """The provider's message if the body has a recognisable one, else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:200] if text else response.reason_phrase
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        for key in ("message", "detail", "error_description"):
            if body.get(key):
                return str(body[key])
        errors = body.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return str(errors[0].get("message", errors[0]))
    return str(body)[:200]


class HttpClient:
    """A small synchronous JSON-over-HTTP client bound to one provider's base URL."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        error_message: Callable[[httpx.Response], str] = default_error_message,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._error_message = error_message
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=dict(headers or {}),
            timeout=httpx.Timeout(timeout_s),
            transport=transport,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry.max_delay_s)
        cap = min(self.retry.max_delay_s, self.retry.base_delay_s * (2**attempt))
        return self._rng.uniform(0, cap)  # full jitter

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send one request with retries; return the successful (2xx) response or raise ``ProviderError``."""
        last: ProviderError | None = None
        for attempt in range(self.retry.attempts):
            retry_after: float | None = None
            try:
                response = self._client.request(
                    method, url, params=params, json=json, content=content, headers=headers
                )
            except httpx.TimeoutException as exc:
                last = ProviderError(self.provider, f"timed out calling {method} {url} ({exc})")
            except httpx.TransportError as exc:
                last = ProviderError(self.provider, f"cannot reach {self.base_url}: {exc}")
            else:
                if response.is_success:
                    return response
                retryable = response.status_code in RETRY_STATUSES
                last = HttpStatusError(
                    self.provider, response.status_code, self._error_message(response), retryable
                )
                if not retryable:
                    raise last
                retry_after = retry_after_seconds(response.headers.get("Retry-After"))
            if attempt + 1 < self.retry.attempts:
                self._sleep(self._delay(attempt, retry_after))
        assert last is not None
        raise last

    def get_json(self, url: str, *, params: Mapping[str, Any] | None = None) -> Any:
        return self._decode(self.request("GET", url, params=params), url)

    def post_json(self, url: str, body: Any, *, headers: Mapping[str, str] | None = None) -> Any:
        return self._decode(self.request("POST", url, json=body, headers=headers), url)

    def _decode(self, response: httpx.Response, url: str) -> Any:
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ProviderError(
                self.provider, f"{url} answered with malformed JSON: {response.text[:120]!r}"
            ) from None
