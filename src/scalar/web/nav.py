"""The dashboard's navigation: one list of (path, title) that every page's nav bar is drawn from.

To add a page, append a ``NavItem`` to ``NAV`` (or call ``add_nav_item`` from your own module) and render
your template with ``{% extends "base.html" %}``. Other features add their pages in the marked places.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "/ui"


@dataclass(frozen=True)
class NavItem:
    path: str
    title: str
    # Where the link sits: "main" (left, in order) or "end" (right: sign-in and account pages).
    place: str = "main"


NAV: list[NavItem] = [
    NavItem(f"{PREFIX}/", "Overview"),
    NavItem(f"{PREFIX}/orderbook", "Orderbook"),
    NavItem(f"{PREFIX}/cluster", "Cluster"),
    NavItem(f"{PREFIX}/jobs", "Jobs"),
    NavItem(f"{PREFIX}/autoscaler", "Autoscaler"),
    NavItem(f"{PREFIX}/prices", "Prices"),
    NavItem(f"{PREFIX}/costs", "Costs"),
    NavItem(f"{PREFIX}/endpoints", "Endpoints"),  # serverless endpoints (web/endpoints_page.py)
    # --- Sign-in: the auth feature adds NavItem(f"{PREFIX}/login", "Sign in", place="end") here. ---
]


def add_nav_item(path: str, title: str, place: str = "main") -> None:
    """Add a page to the nav (once; a second call with the same path changes nothing)."""
    if place not in {"main", "end"}:
        raise ValueError(f"place must be 'main' or 'end', got {place!r}")
    if any(item.path == path for item in NAV):
        return
    NAV.append(NavItem(path, title, place))


def nav_items(place: str) -> list[NavItem]:
    return [item for item in NAV if item.place == place]
