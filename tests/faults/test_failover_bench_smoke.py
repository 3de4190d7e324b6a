"""The failover benchmark (bench/failover.py), once with a 3 s lease: two replicas and two controllers on
PostgreSQL, each pair in its own network namespace; after ``kill -9`` of the leading controller the other
one steps within a few lease TTLs, and the replicas answer every read throughout."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.failover import network, run_case

pytestmark = pytest.mark.slow  # the failover benchmark, one lease


def test_the_replicas_serve_every_read_while_the_standby_takes_over(tmp_path: Path) -> None:
    with network() as net:
        assert all(net.namespaces), net.note  # this machine runs the namespace tests: no fallback here
        result = run_case(net, 3.0, 0.5, tmp_path, baseline_s=1.0)
    assert 0 < result["lease_s"] < 3 * 3.0 + 5
    assert 0 < result["failover_s"] < 3 * 3.0 + 5
    for window in ("before", "during", "after"):
        assert result[window]["reads"] > 0, result
        assert result[window]["errors"] == 0, result
