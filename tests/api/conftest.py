"""API tests run against a live server on loopback (real HTTP through httpx)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from scalar.api.app import create_app
from tests.api.fake_control_plane import FakeControlPlane
from tests.api.live_server import serve


@pytest.fixture
def fake_cp() -> FakeControlPlane:
    return FakeControlPlane()


@pytest.fixture
def fake_url(fake_cp: FakeControlPlane) -> Iterator[str]:
    with serve(create_app(fake_cp)) as url:
        yield url


@pytest.fixture
def client(fake_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake_url, timeout=30) as http:
        yield http
