"""A real control plane (engine, store, built-in market) with authentication on, served on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from scalar.api.app import create_app
from scalar.runtime import ControlPlane
from tests.api.live_server import serve
from tests.runtime.helpers import Clock, settings_for


@dataclass
class Secured:
    url: str
    cp: ControlPlane
    clock: Clock
    admin: str  # an admin token of tenant "default"
    app: Any = None  # the app being served

    def client(self, token: str | None = None, **headers: str) -> httpx.Client:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def token(self, tenant: str, role: str = "user") -> str:
        return self.cp.create_token(tenant, role).token


@contextmanager
def secured_api(
    db_url: str, tmp_path: Path, settings: dict[str, Any] | None = None, **limits: Any
) -> Iterator[Secured]:
    """An opened (not started: no leader threads) control plane with auth on, and its API; ``settings``:
    more settings (``endpoint_handlers``...); ``limits``: the rate limiter's ``rate_per_s`` and ``burst``."""
    clock = Clock()
    cp = ControlPlane(settings_for(db_url, tmp_path, auth_required=True, **(settings or {})), clock=clock)
    cp.open()
    try:
        admin = cp.create_token("default", "admin", "test admin").token
        app = create_app(cp)
        for name, value in limits.items():
            setattr(app.state.rate_limiter, name, value)
        with serve(app) as url:
            yield Secured(url, cp, clock, admin, app)
    finally:
        cp.stop()


@pytest.fixture
def secured(db_url: str, tmp_path: Path) -> Iterator[Secured]:
    """On SQLite and on PostgreSQL."""
    with secured_api(db_url, tmp_path) as api:
        yield api


@pytest.fixture
def secured_sqlite(tmp_path: Path) -> Iterator[Secured]:
    with secured_api(f"sqlite:///{tmp_path / 'scalar.db'}", tmp_path) as api:
        yield api
