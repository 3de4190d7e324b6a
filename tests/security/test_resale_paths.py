"""Resale and hostile tenants: the engine alone decides to sell capacity back. No API route takes a sell
order (so no token, of any tenant, can sell a block, its own or another's), and a seller's answer is
recorded only within what the engine offered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from scalar.api.access import app_routes
from scalar.api.app import create_app
from scalar.runtime import ControlPlane
from tests.runtime.helpers import Clock, settings_for


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    cp = ControlPlane(
        settings_for(f"sqlite:///{tmp_path / 'a.db'}", tmp_path, auth_required=True), clock=Clock()
    )
    cp.open()
    try:
        yield create_app(cp)
    finally:
        cp.stop()


def test_no_route_places_or_answers_a_sell_order(app: FastAPI) -> None:
    routes = app_routes(app)
    assert len(routes) > 50
    for route in routes:
        path = str(route.path).lower()
        assert not any(word in path for word in ("sell", "sale", "resale", "resell")), path
