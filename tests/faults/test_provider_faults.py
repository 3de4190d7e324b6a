"""A seller that times out (before or after it bought), answers 500 or 429: every job still runs once,
nothing is bought twice or left unaccounted (``tests.runtime.helpers.audit`` reads it all back)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from scalar.domain.market import CapacityRequest, Order
from scalar.providers.base import ProviderError
from scalar.providers.sim import BuiltinMarket
from scalar.runtime import ControlPlane
from tests.runtime.helpers import PROVIDERS, TERMINAL, Clock, audit, drive, job, settings_for

FAULTS = {
    "timeout": ProviderError("sfcompute", "timed out after 30 s", retryable=True),
    "timeout_after_buying": ProviderError(
        "sfcompute", "read timed out (the order was placed)", retryable=True
    ),
    "500": ProviderError("sfcompute", "HTTP 500 internal error", retryable=True),
    "429": ProviderError("sfcompute", "HTTP 429 too many requests; retry after 2 s", retryable=True),
}


class Flaky:
    """A built-in seller whose first ``n`` calls of each kind fail as told; the rest go through."""

    def __init__(self, inner: Any, fault: str, n: int) -> None:
        self.inner, self.name, self.fault, self.left = inner, inner.name, fault, n
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _trip(self) -> None:
        if self.left > 0:
            self.left -= 1
            raise FAULTS[self.fault]

    def buy(self, request: CapacityRequest, idempotency_key: str, now: datetime) -> Order:
        self.calls += 1
        if self.fault == "timeout_after_buying":
            # the seller bought; we never hear it
            order: Order = self.inner.buy(request, idempotency_key, now)
            self._trip()
            return order
        self._trip()
        bought: Order = self.inner.buy(request, idempotency_key, now)
        return bought

    def start_work(self, node_id: str, job_id: str, expected_duration_s: int, now: datetime) -> None:
        self._trip()
        self.inner.start_work(node_id, job_id, expected_duration_s, now)


@pytest.fixture(params=sorted(FAULTS))
def faulty(
    request: pytest.FixtureRequest, db_url: str, tmp_path: Path
) -> Iterator[tuple[Clock, ControlPlane, str]]:
    clock = Clock()
    settings = settings_for(db_url, tmp_path, retry_backoff_s=2.0, retry_backoff_max_s=8.0)
    market = BuiltinMarket(db_url, settings.market_config(), providers=PROVIDERS)
    sellers = {name: Flaky(p, request.param, 3) for name, p in market.providers().items()}
    plane = ControlPlane(settings, clock=clock, providers=sellers)
    yield clock, plane, db_url
    plane.stop()
    market.close()


@pytest.mark.slow  # a whole run per fault kind
def test_jobs_finish_exactly_once_through_a_flaky_seller(faulty: tuple[Clock, ControlPlane, str]) -> None:
    clock, plane, db_url = faulty
    ids = [plane.submit_job(job(gpus=g, duration=30)).id for g in (1, 2, 8)]
    for _ in range(40):
        drive([plane], clock, 15)
        jobs = {i: plane.get_job(i) for i in ids}
        if all(j is not None and j.state in {s.value for s in TERMINAL} for j in jobs.values()):
            break
    result = audit(db_url, plane.settings.controller)
    assert result.states()["SUCCEEDED"] == 3, result.states()
    # One market order per purchase key, however many times the call was made.
    assert all(n == 1 for n in result.market_orders.values()), result.market_orders
