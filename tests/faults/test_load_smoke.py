"""The load benchmark (bench/load.py), small: many clients at once get only 2xx answers and the invariants
hold afterwards (no job lost or duplicated, no GPU double-booked, no purchase twice, no request lost)."""

from __future__ import annotations

import pytest
from bench.load import run

pytestmark = pytest.mark.slow  # the load benchmark, small


def test_a_small_load_run_has_zero_errors_and_keeps_the_invariants() -> None:
    results, problems = run(clients=4, requests=60, seconds=20.0)
    assert results.errors == []
    assert problems == []
    assert results.total >= 15, results.total  # it did run
    assert {"POST /jobs", "GET /jobs/{id}"} <= set(results.latencies)
