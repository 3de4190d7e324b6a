"""Read the JSON API in-process: the dashboard is a client of the same routes that curl and the CLI use.

``ApiReader(request).get("/jobs", {"limit": 50})`` runs the route through the app (validation, problem
details, auth) without a network hop and returns an ``ApiAnswer``: the status and the decoded JSON. A
route that does not exist on this server (404 from the router) or fails comes back as an answer the
page shows as an empty state, never as an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import Request

# Headers passed on to the in-process call, so a signed-in browser sees what its token may see.
_FORWARDED = ("authorization", "cookie", "x-api-key")


@dataclass(frozen=True)
class ApiAnswer:
    path: str
    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def missing(self) -> bool:
        """The route is not served here (an older server, or a feature not built in)."""
        if self.status != 404 or not isinstance(self.body, dict):
            return False
        errors = self.body.get("errors") or []
        return any(isinstance(e, dict) and e.get("field") == "(path)" for e in errors)

    def json(self) -> dict[str, Any]:
        """The body when it is a JSON object, else ``{}``."""
        return self.body if self.ok and isinstance(self.body, dict) else {}

    def problem(self) -> str:
        """One line saying why there is no data (for the page's empty state)."""
        if self.ok:
            return ""
        if isinstance(self.body, dict):
            detail = self.body.get("detail") or self.body.get("title")
            fixes = [
                str(e["fix"]) for e in self.body.get("errors") or [] if isinstance(e, dict) and e.get("fix")
            ]
            if detail:
                fix = f" (fix: {fixes[0]})" if fixes else ""
                return f"{self.path} answered {self.status}: {detail}{fix}"
        return f"{self.path} answered {self.status}"


class ApiReader:
    def __init__(self, request: Request) -> None:
        self._app = request.app
        self._headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARDED}

    async def get(self, path: str, params: Mapping[str, Any] | None = None) -> ApiAnswer:
        query = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
        transport = httpx.ASGITransport(app=self._app, raise_app_exceptions=False)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
                response = await client.get(
                    path, params=query, headers={**self._headers, "accept": "application/json"}
                )
        except (httpx.HTTPError, ValueError) as exc:  # e.g. a control character the URL cannot carry
            return ApiAnswer(path, 400, {"detail": f"the request could not be made: {exc}"})
        try:
            body: Any = response.json()
        except ValueError:
            body = None
        return ApiAnswer(path, response.status_code, body)
