"""The shared provider HTTP client against a real loopback server."""

from __future__ import annotations

import pytest

from scalar.providers.base import ProviderError
from scalar.providers.http import HttpClient, HttpStatusError, RetryPolicy, retry_after_seconds
from tests.providers.fakeserver import FakeServer, Reply


def client(server: FakeServer, sleeps: list[float], **kw: object) -> HttpClient:
    return HttpClient("acme", server.url, sleep=sleeps.append, retry=RetryPolicy(attempts=3), **kw)  # type: ignore[arg-type]


def test_retries_429_honouring_retry_after_then_succeeds() -> None:
    sleeps: list[float] = []
    with FakeServer() as server:
        server.route(
            "GET",
            "/x",
            [Reply.json({"error": "slow down"}, 429, headers={"Retry-After": "3"}), Reply.json({"ok": 1})],
        )
        assert client(server, sleeps).get_json("/x") == {"ok": 1}
    assert sleeps == [3.0]
    assert len(server.requests) == 2


def test_5xx_retried_until_attempts_run_out() -> None:
    sleeps: list[float] = []
    with FakeServer() as server:
        server.route("GET", "/x", Reply.json({"message": "boom"}, 503))
        with pytest.raises(HttpStatusError) as err:
            client(server, sleeps).get_json("/x")
    assert err.value.status == 503 and err.value.retryable
    assert "boom" in str(err.value)
    assert len(sleeps) == 2 and all(0 <= s <= 20 for s in sleeps)


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_not_retried(status: int) -> None:
    sleeps: list[float] = []
    with FakeServer() as server:
        server.route("GET", "/x", Reply.json({"error": {"type": "bad", "message": "nope"}}, status))
        with pytest.raises(HttpStatusError) as err:
            client(server, sleeps).get_json("/x")
    assert err.value.status == status and not err.value.retryable
    assert "nope" in str(err.value) and sleeps == []


def test_timeout_is_a_retryable_provider_error() -> None:
    sleeps: list[float] = []
    with FakeServer() as server:
        server.route("GET", "/slow", Reply.json({}, delay_s=0.4))
        with pytest.raises(ProviderError, match="timed out") as err:
            client(server, sleeps, timeout_s=0.1).get_json("/slow")
    assert err.value.retryable and len(sleeps) == 2


def test_malformed_json_is_a_clear_error() -> None:
    with FakeServer() as server:
        server.route("GET", "/x", Reply.text("{not json", content_type="application/json"))
        with pytest.raises(ProviderError, match="malformed JSON"):
            client(server, []).get_json("/x")


def test_unreachable_server() -> None:
    c = HttpClient("acme", "http://127.0.0.1:9", sleep=lambda s: None, retry=RetryPolicy(attempts=2))
    with pytest.raises(ProviderError, match="cannot reach"):
        c.get_json("/x")


def test_retry_after_forms() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds("Thu, 01 Jan 2026 00:00:10 GMT", now) == 10.0
    assert retry_after_seconds("garbage") is None
    assert retry_after_seconds(None) is None
