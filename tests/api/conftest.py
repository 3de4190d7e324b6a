"""API tests run against a live server on loopback (real HTTP through httpx), over a real control plane
on a fresh SQLite database (``tests/api/real_control_plane.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scalar.runtime import ControlPlane
from tests.api.real_control_plane import opened_api


@pytest.fixture
def served(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[str, ControlPlane]]:
    """(base URL, control plane): opened, not started, so jobs stay as submitted until it steps."""
    with opened_api(sqlite_url, tmp_path) as pair:
        yield pair


@pytest.fixture
def cp(served: tuple[str, ControlPlane]) -> ControlPlane:
    return served[1]


@pytest.fixture
def client(served: tuple[str, ControlPlane]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served[0], timeout=30) as http:
        yield http
