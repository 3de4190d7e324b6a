"""A small HTTP client for the Scalar API (``scalar submit``, ``scalar jobs``), on httpx.

Errors come back typed: :class:`ServerUnreachable` when nothing answers at the URL, :class:`ServerProblem`
(with the server's RFC 9457 :class:`ProblemDetails`) when it answers with an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from scalar.wire.jobs import FieldProblem, ProblemDetails

DEFAULT_SERVER = "http://127.0.0.1:8000"
SERVER_ENV = "SCALAR_SERVER"
START_HINT = "start it with `make run` or `scalar up`, or point --server (or $SCALAR_SERVER) at a running one"


def default_server(env: Mapping[str, str] | None = None) -> str:
    """``$SCALAR_SERVER`` when set, else ``http://127.0.0.1:8000``."""
    value = (os.environ if env is None else env).get(SERVER_ENV, "").strip()
    return value or DEFAULT_SERVER


class ServerUnreachable(Exception):
    """Nothing (or nothing that speaks HTTP) answered at ``url``."""

    def __init__(self, url: str, cause: str) -> None:
        self.url = url
        self.cause = cause
        super().__init__(f"cannot reach the Scalar server at {url} ({cause}); {START_HINT}")


class ServerProblem(Exception):
    """The server answered with an error; ``problem`` says what and how to fix it."""

    def __init__(self, problem: ProblemDetails) -> None:
        self.problem = problem
        self.status = problem.status
        super().__init__(problem.detail)


def _problem_of(response: httpx.Response) -> ProblemDetails:
    try:
        return ProblemDetails.model_validate(response.json())
    except (ValueError, ValidationError):
        status = response.status_code
        return ProblemDetails(
            type="about:blank",
            title=response.reason_phrase or "HTTP error",
            status=status,
            detail=f"the server at {response.url} answered {status} {response.reason_phrase} without "
            "problem details",
            errors=[
                FieldProblem(
                    field="(server)",
                    problem="is not a Scalar API server, or an old one",
                    fix="check --server (or $SCALAR_SERVER)",
                )
            ],
        )


class ScalarClient:
    """Calls the API at ``base_url``. Use as a context manager, or call ``close()``."""

    def __init__(
        self, base_url: str, *, timeout_s: float = 15.0, transport: httpx.BaseTransport | None = None
    ):
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s, transport=transport)

    def __enter__(self) -> ScalarClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            cause = str(exc) or type(exc).__name__
            raise ServerUnreachable(self.base_url, cause) from None
        if response.status_code >= 400:
            raise ServerProblem(_problem_of(response))
        try:
            return response.json()
        except ValueError:
            raise ServerProblem(_problem_of(response)) from None

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/healthz")
        return result

    def submit_job(self, body: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/jobs", json=dict(body))
        return result

    def list_jobs(self, state: str | None = None, limit: int = 100, offset: int = 0) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if state:
            params["state"] = state
        result: dict[str, Any] = self._call("GET", "/jobs", params=params)
        return result

    def get_job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/jobs/{quote(job_id, safe='')}")
        return result

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/jobs/{quote(job_id, safe='')}")
        return result
