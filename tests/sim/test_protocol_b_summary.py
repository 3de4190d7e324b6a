"""Protocol B's statistics: the win rule, means and spreads over runs, and the CLI's lists of numbers."""

from __future__ import annotations

from typing import Any

import pytest

from scalar.cli.simulate_dynamic import parse_numbers
from scalar.sim.protocol_b_runs import scalar_wins, summarize


def row(policy: str, cost: float, fast_p99: float | None, **extra: Any) -> dict[str, Any]:
    tier = {"wait_p50_s": 1.0, "wait_p95_s": 2.0, "wait_p99_s": fast_p99, "slo_attainment": 1.0}
    return {
        "policy": policy,
        "cost": cost,
        "fast": tier,
        "flex": dict(tier),
        "paid_gpu_hours": 10.0,
        "idle_gpu_hours": 1.0,
        "killed_runs": extra.get("killed", 0),
        "interruptions": 0,
        "interruptions_per_gpu_hour": 0.0,
        "preempted_gpu_hours": 0.0,
        "timed_out": False,
        "ratio_to_lower_bound": extra.get("ratio"),
    }


def test_scalar_wins_only_cheaper_and_at_fast_waits_no_worse_than_the_baseline_plus_6_s() -> None:
    assert scalar_wins(row("scalar", 90, 900), row("b", 100, 895))  # 5 s worse: within the 6 s
    assert not scalar_wins(row("scalar", 90, 902), row("b", 100, 895))  # 7 s worse, above the target
    assert scalar_wins(row("scalar", 90, 599), row("b", 100, 60))  # worse, but under the 10-minute target
    assert not scalar_wins(row("scalar", 100, 60), row("b", 100, 900))  # not cheaper
    assert not scalar_wins(row("scalar", 90, 900), row("b", 100, None))  # the baseline ran no FAST job


def test_the_summary_holds_means_spreads_totals_and_wins() -> None:
    runs = [
        {"policies": [row("scalar", 90, 120, killed=2, ratio=1.5), row("karpenter", 100, 700, ratio=2.0)]},
        {"policies": [row("scalar", 110, 120, killed=3, ratio=2.5), row("karpenter", 100, 700, ratio=2.0)]},
    ]
    out = summarize(runs)
    scalar, karpenter = out["policies"]
    assert scalar["cost"] == 100 and scalar["cost_sd"] == pytest.approx(14.1421, abs=1e-4)
    assert scalar["killed_runs"] == 5 and scalar["ratio_to_lower_bound"] == 2.0
    assert scalar["fast"]["wait_p99_s"] == 120 and "wins" not in scalar
    assert karpenter["wins"] == {"scalar_wins": 1, "runs": 2} == out["wins"]["karpenter"]


def test_lists_and_ranges_of_numbers() -> None:
    assert parse_numbers("42-46", "--seeds", ranges=True) == [42, 43, 44, 45, 46]
    assert parse_numbers("42,43,42", "--seeds", ranges=True) == [42, 43]
    assert parse_numbers("117, 127.5", "--start-day") == [117, 127.5]
    for bad in ("", "x", "5-2", "-1"):
        with pytest.raises(ValueError, match="--seeds"):
            parse_numbers(bad, "--seeds", ranges=True)
    with pytest.raises(ValueError, match="whole numbers"):
        parse_numbers("4.5", "--seeds", ranges=True)
