"""Deny by default: every route of the app declares who may call it, and the declaration holds
over real HTTP even without the middleware's admin list behind it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import RouteContext

from scalar.api import auth
from scalar.api.access import Access, app_routes, route_access, undeclared_routes
from scalar.api.app import create_app
from scalar.runtime import ControlPlane
from tests.runtime.helpers import Clock, settings_for
from tests.security.conftest import secured_api

AGENT_KINDS = {Access.AGENT, Access.WORKER}
# The policy: what only admins may do (tokens, the audit log, spend limits, joining and removing hosts,
# the health details that name the database and the hosts).
ADMIN_ROUTES = {
    "POST /tokens",
    "GET /tokens",
    "DELETE /tokens/{token_id}",
    "GET /audit",
    "PUT /budgets",
    "POST /agents/join-tokens",
    "POST /agents/{node_id}/remove",
    "GET /healthz/details",
}
PUBLIC_ROUTES = {
    "GET /openapi.json",
    "GET /docs",
    "* /docs/assets",
    "GET /healthz",
    "GET /login",
    "POST /login",
    "POST /logout",
    "* /ui/static",
}


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


REGISTER = {
    "join_token": "not-a-join-token",
    "version": "1",
    "protocol": 1,
    "facts": {"hostname": "h", "gpus": [], "cpu_count": 1, "ram_gb": 1.0, "disk_gb": 1.0},
}


def _example_path(route: RouteContext) -> str:
    path = re.sub(r"\{[^}]+\}", "x", str(route.path))
    return path + ("/dashboard.js" if route.path == "/ui/static" else "")


def test_every_route_declares_one_kind_of_caller(app: FastAPI) -> None:
    routes = app_routes(app)
    paths = {str(r.path) for r in routes}
    # FastAPI's own routes, the dashboard's pages and its static mount are walked too
    assert {"/openapi.json", "/docs", "/docs/assets", "/ui/", "/ui/static", "/login"} <= paths
    assert len(routes) > 50
    assert undeclared_routes(app) == []
    declared: dict[Access, set[str]] = {}
    for route in routes:
        strictest = max(route_access(route), key=list(Access).index)
        for method in sorted((route.methods or set()) - {"HEAD"}) or ["*"]:
            declared.setdefault(strictest, set()).add(f"{method} {route.path}")
    assert declared[Access.ADMIN] == ADMIN_ROUTES
    assert declared[Access.PUBLIC] == PUBLIC_ROUTES
    for route in routes:
        kinds = route_access(route)
        assert kinds, route.path
        if Access.PUBLIC in kinds:
            assert kinds == {Access.PUBLIC}, route.path
        if kinds & AGENT_KINDS:
            assert not kinds & {Access.USER, Access.ADMIN, Access.PUBLIC}, route.path


def test_the_walk_finds_a_route_without_a_declaration(app: FastAPI) -> None:
    @app.get("/forgotten")
    def forgotten() -> dict[str, Any]:
        return {}

    app.mount("/raw", FastAPI())
    assert undeclared_routes(app) == ["GET /forgotten", "* /raw"]


def test_openapi_declares_the_credentials(app: FastAPI) -> None:
    spec = app.openapi()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearerToken"] == {**schemes["bearerToken"], "type": "http", "scheme": "bearer"}
    assert (schemes["nodeToken"]["type"], schemes["nodeToken"]["in"]) == ("apiKey", "header")
    assert (schemes["workerToken"]["type"], schemes["workerToken"]["in"]) == ("apiKey", "header")
    paths = spec["paths"]
    assert {"bearerToken": []} in paths["/jobs"]["post"]["security"]
    assert {"bearerToken": []} in paths["/tokens"]["post"]["security"]
    assert paths["/agent/v1/heartbeat"]["post"]["security"] == [{"nodeToken": []}]
    worker = "/agent/v1/endpoints/{endpoint_id}/workers/{worker_id}/next"
    assert paths[worker]["post"]["security"] == [{"workerToken": []}]
    assert "security" not in paths["/healthz"]["get"]


def _call(client: httpx.Client, route: RouteContext, methods: set[str] | None = None) -> list[int]:
    codes = []
    for method in sorted((route.methods or {"GET"}) - {"HEAD"}):
        if methods is not None and method not in methods:
            continue
        body: dict[str, Any] | None = {} if method in {"POST", "PUT", "PATCH"} else None
        if route.path == "/agent/v1/register":
            body = REGISTER
        codes.append(client.request(method, _example_path(route), json=body).status_code)
    return codes


def test_over_http_each_route_answers_as_it_declares(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the middleware's admin list is only a fallback: without it the declarations still refuse
    monkeypatch.setattr(auth, "ADMIN_ONLY", ())
    with secured_api(f"sqlite:///{tmp_path / 'h.db'}", tmp_path, rate_per_s=1000.0, burst=1000.0) as api:
        app = api.app
        user = api.token("team-a")
        with api.client() as anonymous, api.client(user) as member, api.client(api.admin) as admin:
            for route in app_routes(app):
                kinds = route_access(route)
                if kinds == {Access.PUBLIC}:  # (POST /login with no token is its form's own 401)
                    assert 401 not in _call(anonymous, route, {"GET"}), route.path
                    continue
                anonymous_codes = _call(anonymous, route)
                assert set(anonymous_codes) == {401}, (route.path, anonymous_codes)
                if kinds & AGENT_KINDS:  # an API token is no agent's credential
                    assert set(_call(admin, route)) == {401}, route.path
                elif Access.ADMIN in kinds:
                    assert set(_call(member, route)) == {403}, (route.path, route.methods)
                    assert 403 not in _call(admin, route), route.path
                else:
                    assert not {401, 403} & set(_call(member, route)), route.path
