"""RunPod's ``webhook``: when a request with one finishes, its final status is POSTed there.

The leader's endpoint tick hands due deliveries to a small thread pool (a slow receiver never holds the
tick). A delivery is a POST of the request's status body (``/v2/{id}/status/{request}``'s JSON); a 2xx
answer delivers it; anything else is retried with backoff (2, 4, 8, 16 s), ``WEBHOOK_ATTEMPTS`` times in
all, then it is ``failed`` with the last error. The state lives on the request row (``webhook_status``:
none yet, ``sending``, ``retry``, ``delivered``, ``failed``), so a leader that dies mid-delivery leaves a
``sending`` lease that the next one takes again after ``SENDING_LEASE_S``: at least once.

Targets: an http(s) URL. Loopback, private, link-local and other non-public addresses are refused (at
submission for a literal address or ``localhost``, and again at delivery after DNS resolution) unless
``[endpoints] webhook_allow_private`` is set: a tenant's webhook must not reach the control plane's own
network. Redirects are not followed.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from scalar.domain.endpoint_scaling import RequestStatus
from scalar.runtime.endpoints.records import request_status, webhook_body
from scalar.store import endpoints as repo

if TYPE_CHECKING:
    from scalar.runtime.endpoints.service import EndpointService

log = logging.getLogger(__name__)

WEBHOOK_ATTEMPTS = 5
TIMEOUT_S = 10.0
SENDING_LEASE_S = 60.0
BATCH = 32
TERMINAL = [s.value for s in RequestStatus if s.terminal]


def backoff_s(attempts: int) -> float:
    """The wait after the ``attempts``-th failed delivery: 2, 4, 8, 16 s."""
    return float(2 ** max(1, attempts))


def _not_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return not ip.is_global or ip.is_multicast


def target_problem(url: str, allow_private: bool, *, resolve: bool = False) -> str | None:
    """Why ``url`` may not receive webhooks, or ``None``. Without ``resolve`` only what the URL itself
    says (a literal address, ``localhost``); with it, every address its host resolves to."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return "is not an http(s) URL with a host"
    if allow_private:
        return None
    private = "is a loopback or private address; set [endpoints] webhook_allow_private = true to allow it"
    if host == "localhost" or host.endswith(".localhost"):
        return private
    try:
        if _not_public(host):
            return private
        return None
    except ValueError:
        pass  # a name, not an address
    if not resolve:
        return None
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80))
    except OSError as exc:
        return f"does not resolve ({exc})"
    if any(_not_public(str(info[4][0])) for info in infos):
        return f"resolves to a loopback or private address; {private.split('; ')[1]}"
    return None


class WebhookSender:
    """Delivers due webhooks from a thread pool; ``close()`` waits for the ones under way."""

    def __init__(self, svc: EndpointService, workers: int = 4) -> None:
        self._svc = svc
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="webhook")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def deliver_due(self, now: datetime) -> int:
        """Claim the deliveries due at ``now`` and send them in the background; returns how many."""
        store = self._svc.store
        with store.read() as tx:
            due = repo.webhooks_due(tx.conn, TERMINAL, now, BATCH)
        claimed = 0
        for row in due:
            with store.write() as tx:
                ok = repo.claim_webhook(
                    tx.conn,
                    row["id"],
                    row["webhook_status"],
                    row["webhook_attempts"],
                    now + timedelta(seconds=SENDING_LEASE_S),
                )
            if ok:
                claimed += 1
                self._pool.submit(self._send, row)
        return claimed

    def _send(self, row: dict[str, Any]) -> None:
        svc = self._svc
        url = str(row["webhook"])
        error = target_problem(url, svc.webhook_allow_private, resolve=True)
        final = error is not None  # a refused target is not retried
        if error is None:
            body = webhook_body(request_status(row, svc.clock()))
            try:
                with httpx.Client(timeout=TIMEOUT_S, follow_redirects=False) as client:
                    answer = client.post(url, json=body)
                if 200 <= answer.status_code < 300:
                    error = None
                else:
                    error = f"the webhook answered {answer.status_code}"
            except httpx.HTTPError as exc:
                error = f"the webhook could not be reached: {type(exc).__name__}: {exc}"
        else:
            error = f"webhook {url} {error}"
        attempts = int(row["webhook_attempts"]) + 1
        now = svc.clock()
        if error is None:
            values: dict[str, Any] = {"webhook_status": "delivered", "webhook_error": None}
        elif final or attempts >= WEBHOOK_ATTEMPTS:
            values = {"webhook_status": "failed", "webhook_error": f"{error} (attempt {attempts}, giving up)"}
        else:
            values = {
                "webhook_status": "retry",
                "webhook_error": f"{error} (attempt {attempts})",
                "webhook_next_at": now + timedelta(seconds=backoff_s(attempts)),
            }
        try:
            with svc.store.write() as tx:
                repo.update_request(tx.conn, row["id"], {**values, "webhook_attempts": attempts})
        except Exception:
            log.exception("could not record the webhook delivery of %s", row["id"])
