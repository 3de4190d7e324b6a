"""The API's own documentation: the OpenAPI document as the server enforces it, and Swagger UI served
from this process (no CDN: ``/docs`` works offline).

``install_docs(app)`` adds ``/docs`` (Swagger UI) and its script and styles under ``/docs/assets/``
(from the ``fastapi-offline`` package, which ships the Swagger UI build; its ReDoc build fetches a logo
from a CDN, so ReDoc is not served), and completes the generated document with what the security
middleware and the problem handlers do:

- every error is ``application/problem+json`` (``ProblemDetails``), including FastAPI's default 422;
- a route behind a token documents 401 and 429, an admin-only one 403, a route with a body 400 and 413;
- schemas pydantic nests under ``$defs`` (a hand-written request body) move to ``components/schemas``,
  so every ``$ref`` resolves.

``/openapi.json``, ``/docs`` and the assets reveal no data: they are public (api/auth.py).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from scalar.api.auth import is_admin_only, is_public
from scalar.api.problems import PROBLEM_MEDIA_TYPE

DOCS_PATH = "/docs"
OPENAPI_PATH = "/openapi.json"
ASSETS_PATH = "/docs/assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
"""swagger-ui-bundle.js, swagger-ui.css and favicon.png, as the package ships them."""

_PROBLEM_REF = {"$ref": "#/components/schemas/ProblemDetails"}
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# Responses the security middleware (api/auth.py) gives, whatever the route: status -> description.
_UNAUTHORIZED = "no valid token: send 'Authorization: Bearer <token>' (docs/security.md)"
_RATE_LIMITED = "too many requests with this token; Retry-After says when to retry"
_FORBIDDEN = "a user token: this action is for admins"
_TOO_LARGE = "the body is larger than the API accepts (1 MiB; 8 MiB from a node agent)"
_UNREADABLE = "the body is not UTF-8 JSON"
_INVALID = "a bad parameter or body: the errors name each field and the fix"


def install_docs(app: FastAPI) -> None:
    """Serve Swagger UI at ``/docs`` from local assets, and complete the OpenAPI
    document (call after every router is included). The app is created with ``docs_url=None``."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    title = app.title

    @app.get(DOCS_PATH, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=OPENAPI_PATH,
            title=f"{title}: API",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
            oauth2_redirect_url=None,
            # no badge from the public validator service: nothing leaves the machine
            swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": True},
        )

    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def complete(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with problem responses, the middleware's statuses and resolvable ``$ref``s."""
    spec = copy.deepcopy(spec)
    schemas: dict[str, Any] = spec.setdefault("components", {}).setdefault("schemas", {})
    for path, operations in spec.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in _METHODS:
                continue
            responses: dict[str, Any] = operation.setdefault("responses", {})
            for status, response in responses.items():
                _problem_media_type(status, response)
            _security_responses(path, method, operation, responses)
            body = operation.get("requestBody")
            if body is not None:
                for media in body.get("content", {}).values():
                    if "schema" in media:
                        media["schema"] = _hoist_defs(media["schema"], schemas)
    for unused in ("HTTPValidationError", "ValidationError"):  # FastAPI's 422 shape, replaced above
        if unused in schemas and not _uses(spec, unused):
            del schemas[unused]
    return spec


def _problem_media_type(status: str, response: dict[str, Any]) -> None:
    """An error response is a problem document under ``application/problem+json``."""
    if status[:1] not in {"4", "5"}:
        return
    content: dict[str, Any] = response.setdefault("content", {})
    plain = content.pop("application/json", None)
    if PROBLEM_MEDIA_TYPE in content:
        if not content[PROBLEM_MEDIA_TYPE].get("schema") and plain is not None:
            content[PROBLEM_MEDIA_TYPE] = {"schema": plain.get("schema", _PROBLEM_REF)}
        return
    # FastAPI's default 422 (HTTPValidationError) is not what the problem handlers send
    content[PROBLEM_MEDIA_TYPE] = {"schema": dict(_PROBLEM_REF)}
    if response.get("description") == "Validation Error":
        response["description"] = _INVALID


def _security_responses(path: str, method: str, operation: dict[str, Any], responses: dict[str, Any]) -> None:
    """What the security middleware (api/auth.py) and the body parser answer before any route runs."""
    added: dict[str, str] = {}
    if not is_public(path):
        added |= {"401": _UNAUTHORIZED, "429": _RATE_LIMITED}
    if is_admin_only(method.upper(), path):
        added["403"] = _FORBIDDEN
    if "requestBody" in operation:
        added |= {"400": _UNREADABLE, "413": _TOO_LARGE}
    for status, description in added.items():
        if status not in responses:
            responses[status] = {
                "description": description,
                "content": {PROBLEM_MEDIA_TYPE: {"schema": dict(_PROBLEM_REF)}},
            }
    if "429" in responses:
        responses["429"].setdefault(
            "headers",
            {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}},
        )


def _hoist_defs(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """Move a schema's ``$defs`` to ``components/schemas`` and point its ``#/$defs/X`` there."""
    defs = schema.pop("$defs", None)
    if not defs:
        return schema
    for name, definition in defs.items():
        schemas.setdefault(name, _rewrite_refs(definition))
    rewritten: dict[str, Any] = _rewrite_refs(schema)
    return rewritten


def _rewrite_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _rewrite_refs(v) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            out["$ref"] = "#/components/schemas/" + ref.removeprefix("#/$defs/")
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v) for v in node]
    return node


def _uses(node: Any, name: str) -> bool:
    if isinstance(node, dict):
        return node.get("$ref") == f"#/components/schemas/{name}" or any(
            _uses(v, name) for v in node.values()
        )
    if isinstance(node, list):
        return any(_uses(v, name) for v in node)
    return False
