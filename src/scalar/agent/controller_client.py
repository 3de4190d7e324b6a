"""The agent's HTTP calls to the controller (it always dials out): register, heartbeat, ship logs."""

from __future__ import annotations

import base64
from typing import Any

import httpx


class ControllerRefused(Exception):
    """The controller answered with a problem (4xx): ``status``, ``code`` and its detail."""

    def __init__(self, status: int, code: str, detail: str, body: dict[str, Any]) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.body = body


class ControllerUnreachable(Exception):
    """No answer (connection refused, timeout, 5xx): try again later."""


class ControllerClient:
    def __init__(self, base_url: str, timeout_s: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._http.post(path, json=body)
        except httpx.HTTPError as err:
            raise ControllerUnreachable(f"{self.base_url}{path}: {err}") from err
        if response.status_code >= 500:
            raise ControllerUnreachable(f"{self.base_url}{path}: HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            data = {}
        if response.status_code >= 400:
            kind = str(data.get("type", "")).rsplit("/", 1)[-1] or str(response.status_code)
            raise ControllerRefused(
                response.status_code, kind, str(data.get("detail") or response.text), data
            )
        return dict(data)

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._post("/agent/v1/register", body)

    def heartbeat(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._post("/agent/v1/heartbeat", body)

    def ship_log(self, node_id: str, node_token: str, assignment_id: str, offset: int, data: bytes) -> int:
        reply = self._post(
            "/agent/v1/logs",
            {
                "node_id": node_id,
                "node_token": node_token,
                "assignment_id": assignment_id,
                "offset": offset,
                "data_b64": base64.b64encode(data).decode(),
            },
        )
        return int(reply["next_offset"])
