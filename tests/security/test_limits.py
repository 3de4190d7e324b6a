"""Hostile input at the door: bodies over the size limit (413) and too many requests per token (429)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

from scalar.api.auth import MAX_BODY_BYTES, RateLimiter
from tests.security.conftest import Secured, secured_api

JOB = {"tier": "FAST", "gpu_count": 1}


def test_a_body_over_the_limit_is_refused_with_413(secured_sqlite: Secured) -> None:
    huge = b'{"tier": "FAST", "gpu_count": 1, "name": "' + b"x" * MAX_BODY_BYTES + b'"}'
    with secured_sqlite.client(secured_sqlite.admin) as admin:
        response = admin.post("/jobs", content=huge, headers={"content-type": "application/json"})
        assert response.status_code == 413
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["type"] == "urn:scalar:problem:payload-too-large"

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield huge[: len(huge) // 2]
            yield huge[len(huge) // 2 :]

        chunked = admin.post("/jobs", content=chunks(), headers={"content-type": "application/json"})
        assert chunked.status_code == 413
        assert admin.get("/jobs").json()["count"] == 0
        assert admin.post("/jobs", json=JOB).status_code == 201  # a normal body still goes through


def test_a_lying_content_length_is_refused(secured_sqlite: Secured) -> None:
    host, port = secured_sqlite.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n"
            b"Authorization: Bearer " + secured_sqlite.admin.encode() + b"\r\n\r\n{}"
        )
        assert sock.recv(100).startswith(b"HTTP/1.1 413")


def test_too_many_requests_get_429_with_retry_after(tmp_path: Path) -> None:
    with secured_api(f"sqlite:///{tmp_path / 'r.db'}", tmp_path, rate_per_s=0.5, burst=3) as api:
        other = api.token("team-b")
        with api.client(api.token("team-a")) as client:
            codes = [client.get("/jobs").status_code for _ in range(4)]
            assert codes == [200, 200, 200, 429]
            limited = client.get("/jobs")
            assert limited.status_code == 429
            assert limited.json()["type"] == "urn:scalar:problem:rate-limited"
            assert int(limited.headers["retry-after"]) >= 1
        with api.client(other) as client:  # per token: another token is not limited
            assert client.get("/jobs").status_code == 200
        with api.client() as anonymous:
            assert anonymous.get("/healthz").status_code == 200


def test_the_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(2.0, 2.0, clock=lambda: now[0])
    assert [limiter.take("t") for _ in range(2)] == [0.0, 0.0]
    assert limiter.take("t") == 0.5
    now[0] += 0.5
    assert limiter.take("t") == 0.0
    assert limiter.take("u") == 0.0
