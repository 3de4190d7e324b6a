"""A small HTTP client for the Scalar API (``scalar submit``, ``scalar jobs``), on httpx.

Errors come back typed: :class:`ServerUnreachable` when nothing answers at the URL, :class:`ServerProblem`
(with the server's RFC 9457 :class:`ProblemDetails`) when it answers with an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from pydantic import ValidationError

from scalar.wire.jobs import FieldProblem, ProblemDetails

DEFAULT_SERVER = "http://127.0.0.1:8000"
SERVER_ENV = "SCALAR_SERVER"
TOKEN_ENV = "SCALAR_TOKEN"
TOKEN_FILE_ENV = "SCALAR_TOKEN_FILE"
DEFAULT_TOKEN_FILE = Path(".scalar") / "admin.token"  # where `scalar up` (default --data-dir) saves it
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
START_HINT = "start it with `make run` or `scalar up`, or point --server (or $SCALAR_SERVER) at a running one"


def default_server(env: Mapping[str, str] | None = None) -> str:
    """``$SCALAR_SERVER`` when set, else ``http://127.0.0.1:8000``."""
    value = (os.environ if env is None else env).get(SERVER_ENV, "").strip()
    return value or DEFAULT_SERVER


def default_token(base_url: str, env: Mapping[str, str] | None = None) -> str | None:
    """The API token to send: ``$SCALAR_TOKEN``, else the file ``$SCALAR_TOKEN_FILE``, else (only for a
    server on loopback, so a local admin token never goes to another host) ``./.scalar/admin.token``."""
    env = os.environ if env is None else env
    token = env.get(TOKEN_ENV, "").strip()
    if token:
        return token
    path = env.get(TOKEN_FILE_ENV, "").strip()
    if not path:
        if (urlsplit(base_url).hostname or "") not in _LOOPBACK_HOSTS:
            return None
        path = str(DEFAULT_TOKEN_FILE)
    try:
        return Path(path).read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


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
        self,
        base_url: str,
        *,
        timeout_s: float = 15.0,
        transport: httpx.BaseTransport | None = None,
        token: str | None = None,
    ):
        """``token`` (default: ``default_token``) is sent as ``Authorization: Bearer``."""
        self.base_url = base_url.rstrip("/")
        token = token or default_token(self.base_url)
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout_s, transport=transport, headers=headers
        )

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

    def list_jobs(
        self, state: str | None = None, limit: int = 100, offset: int = 0, after: str | None = None
    ) -> dict[str, Any]:
        """A page of jobs, newest first; ``after``: a page's ``next`` (or ``prev``) cursor."""
        params: dict[str, Any] = {"limit": limit}
        if offset:
            params["offset"] = offset
        if state:
            params["state"] = state
        if after:
            params["after"] = after
        result: dict[str, Any] = self._call("GET", "/jobs", params=params)
        return result

    def every_page(self, path: str, items: str, **params: Any) -> dict[str, Any]:
        """Every page of a cursor-paged list (``GET /jobs``, ``/nodes``...) joined: the last page's answer
        with ``items`` holding the rows of all pages, in the list's order."""
        rows: list[Any] = []
        after = params.pop("after", None)
        while True:
            page = self.get(path, **params, after=after)
            rows += page.get(items) or []
            after = page.get("next")
            if not after:
                return {**page, items: rows, "count": len(rows), "next": None, "prev": None}

    def get_job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/jobs/{quote(job_id, safe='')}")
        return result

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/jobs/{quote(job_id, safe='')}")
        return result

    # ---- the cluster and the market (scalar status, explain, nodes, costs, orderbook, submit) ----

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        """``GET path`` with the query ``params`` (``None`` values left out)."""
        query = {k: v for k, v in params.items() if v is not None}
        result: dict[str, Any] = self._call("GET", path, params=query)
        return result

    def status(self) -> dict[str, Any]:
        return self.get("/status")

    def explain(self, job_id: str) -> dict[str, Any]:
        return self.get(f"/jobs/{quote(job_id, safe='')}/explain")

    def preview_job(self, body: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/jobs/preview", json=dict(body))
        return result

    def nodes(
        self, include_gone: bool = False, limit: int | None = None, after: str | None = None
    ) -> dict[str, Any]:
        """A page of the slot map (``limit``), or every node (``limit`` None: all the pages)."""
        gone = str(include_gone).lower()
        if limit is None:
            return self.every_page("/nodes", "nodes", include_gone=gone, limit=1000, after=after)
        return self.get("/nodes", include_gone=gone, limit=limit, after=after)

    def blocks(
        self, status: str | None = None, limit: int | None = None, after: str | None = None
    ) -> dict[str, Any]:
        """A page of contracts (``limit``), or every contract (``limit`` None: all the pages)."""
        if limit is None:
            return self.every_page("/blocks", "blocks", status=status, limit=1000, after=after)
        return self.get("/blocks", status=status, limit=limit, after=after)

    def autoscaler_status(self, all_groups: bool = False) -> dict[str, Any]:
        return self.get("/autoscaler/status", all_groups=str(all_groups).lower())

    def costs(self, points: int = 24) -> dict[str, Any]:
        return self.get("/costs", points=points)

    def orderbook(
        self, instance_type: str, node_count: int = 1, gpus_per_node: int | None = None
    ) -> dict[str, Any]:
        return self.get(
            "/orderbook", instance_type=instance_type, node_count=node_count, gpus_per_node=gpus_per_node
        )

    # ---- tokens and the audit log (admin; docs/security.md) ----

    def whoami(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/whoami")
        return result

    def create_token(
        self, tenant: str, role: str, name: str | None = None, expires_in: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"tenant": tenant, "role": role}
        if name:
            body["name"] = name
        if expires_in:
            body["expires_in"] = expires_in
        result: dict[str, Any] = self._call("POST", "/tokens", json=body)
        return result

    def list_tokens(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/tokens")
        return result

    def revoke_token(self, token_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/tokens/{quote(token_id, safe='')}")
        return result

    def audit(self, **params: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "GET", "/audit", params={k: v for k, v in params.items() if v is not None}
        )
        return result
