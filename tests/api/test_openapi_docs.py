"""The API's OpenAPI document is valid, public, every ``$ref`` in it resolves, and it says what the server
does: problem+json errors, the security middleware's 401/403/413/429, required fields and enums, and the
``Allow`` header of every 405 (checked against the live server, path by path).

A real control plane (SQLite, built-in market; opened, no leader threads) with tokens required, over real
HTTP on loopback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

from scalar.api.app import create_app
from scalar.api.auth import is_admin_only, is_public
from scalar.runtime import ControlPlane
from scalar.wire.jobs import JOB_STATES
from tests.api.live_server import serve
from tests.runtime.helpers import Clock, settings_for

METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp: Path = tmp_path_factory.mktemp("openapi")
    cp = ControlPlane(settings_for(f"sqlite:///{tmp / 'api.db'}", tmp, auth_required=True), clock=Clock())
    cp.open()
    try:
        token = cp.create_token("default", "admin", "docs").token
        with serve(create_app(cp)) as url:
            yield url, token
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def spec(live: tuple[str, str]) -> dict[str, Any]:
    response = httpx.get(live[0] + "/openapi.json", timeout=30)  # no token: the document holds no data
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


def _operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if method in METHODS:
                yield path, method, operation


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _resolve(spec: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), f"{ref}: only local references"
    node: Any = spec
    for part in ref[2:].split("/"):
        assert isinstance(node, dict) and part in node, f"{ref} does not resolve"
        node = node[part]
    return node


def test_the_document_is_valid_openapi_and_every_ref_resolves(spec: dict[str, Any]) -> None:
    validate(spec)  # openapi-spec-validator: OpenAPI 3.1 and its JSON Schema dialect
    refs = set(_refs(spec))
    assert "#/components/schemas/RunPolicy" in refs, "the RunPod body's nested policy is a component"
    for ref in refs:
        _resolve(spec, ref)
    assert "$defs" not in str(spec)


def test_every_error_is_a_documented_problem(spec: dict[str, Any]) -> None:
    operations = list(_operations(spec))
    assert len(operations) >= 30
    for path, method, operation in operations:
        responses = operation["responses"]
        for status, response in responses.items():
            if status[0] in "45":
                assert list(response["content"]) == ["application/problem+json"], (method, path, status)
        if not is_public(path):
            assert {"401", "429"} <= set(responses), (method, path)
            assert "Retry-After" in responses["429"]["headers"]
        if is_admin_only(method.upper(), path):
            assert "403" in responses, (method, path)
        if "requestBody" in operation:
            assert {"400", "413", "422"} <= set(responses), (method, path)
    assert "HTTPValidationError" not in spec["components"]["schemas"]


def test_the_schema_is_as_strict_as_the_server(spec: dict[str, Any], live: tuple[str, str]) -> None:
    create = spec["paths"]["/endpoints"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert create["required"] == ["name"]
    name_pattern = create["properties"]["name"]["pattern"]
    state = spec["paths"]["/jobs"]["get"]["parameters"][0]
    assert state["name"] == "state"
    assert state["schema"]["anyOf"][0]["enum"] == list(JOB_STATES)
    schemas = spec["components"]["schemas"]
    assert schemas["JobOut"]["properties"]["state"]["enum"] == list(JOB_STATES)
    assert set(schemas["RequestStatusOut"]["properties"]["status"]["enum"]) >= {"IN_QUEUE", "COMPLETED"}
    assert "idle" in schemas["WorkerOut"]["properties"]["state"]["enum"]

    url, token = live
    headers = {"Authorization": f"Bearer {token}"}
    # what the schema forbids, the server refuses, naming the field
    nameless = httpx.post(url + "/endpoints", json={"imageName": "x/y:1"}, headers=headers, timeout=30)
    assert nameless.status_code == 422, nameless.text
    assert nameless.headers["content-type"] == "application/problem+json"
    assert nameless.json()["errors"][0]["field"] == "name"
    assert re.fullmatch(name_pattern, "-bad") is None
    bad_name = httpx.post(url + "/endpoints", json={"name": "-bad"}, headers=headers, timeout=30)
    assert bad_name.status_code == 422 and bad_name.json()["errors"][0]["field"] == "name"
    assert {"imageName", "handler"} <= {r for branch in create["anyOf"] for r in branch["required"]}
    imageless = httpx.post(url + "/endpoints", json={"name": "no-image"}, headers=headers, timeout=30)
    assert imageless.status_code == 422 and imageless.json()["errors"][0]["field"] == "imageName"
    run = spec["paths"]["/v2/{endpoint_id}/run"]["post"]["requestBody"]
    assert run["required"] is True and run["content"]["application/json"]["schema"]["required"] == ["input"]
    bad_state = httpx.get(url + "/jobs", params={"state": "DONE"}, headers=headers, timeout=30)
    assert bad_state.status_code == 422 and bad_state.json()["errors"][0]["field"] == "state"


def test_a_405_allows_every_documented_method_of_its_path(
    spec: dict[str, Any], live: tuple[str, str]
) -> None:
    url, token = live
    headers = {"Authorization": f"Bearer {token}"}
    checked = 0
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        for path, operations in spec["paths"].items():
            documented = {m.upper() for m in operations if m in METHODS}
            unused = next(m for m in ("PUT", "PATCH", "DELETE", "POST") if m not in documented)
            concrete = path.replace("{", "").replace("}", "")  # /jobs/job_id: any id matches the route
            response = client.request(unused, concrete, json={})
            if response.status_code == 404 and path.startswith("/agent/"):
                continue  # not a route of this API when there are no agents
            assert response.status_code == 405, (unused, path, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            assert set(response.headers["allow"].split(", ")) == documented, (path, response.headers)
            checked += 1
    assert checked >= 25
    # a path with several methods (the bug: the first route's methods only)
    multi = [p for p, ops in spec["paths"].items() if len([m for m in ops if m in METHODS]) >= 3]
    assert "/endpoints/{endpoint_id}" in multi


def test_docs_load_their_scripts_from_this_server(live: tuple[str, str]) -> None:
    url, _ = live
    html = httpx.get(url + "/docs", timeout=30)  # no token: public, like the document
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert 'src="/docs/assets/swagger-ui-bundle.js"' in html.text
    assert "https://" not in html.text and "http://" not in html.text, "no CDN, no outside link"
    script = httpx.get(url + "/docs/assets/swagger-ui-bundle.js", timeout=30)
    assert script.status_code == 200 and len(script.content) > 100_000
    css = httpx.get(url + "/docs/assets/swagger-ui.css", timeout=30)
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
