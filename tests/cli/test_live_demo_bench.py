"""The live demo bench's cost measures: per delivered GPU-hour (the target as written) and per delivered work
unit (the engine's decision rule), each against the cheapest eligible offer, on a hand-worked case."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from bench.live_demo import cheapest, cost_measures, delivered, market_utilisation, own_nodes

from scalar.domain.gpus import relative_throughput

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
H100 = relative_throughput("H100")  # 989 / 312
V100 = relative_throughput("V100")  # 125 / 312


def offer(model: str, price: str) -> dict[str, Any]:
    return {"gpu_model": model, "gpu_count": 8, "gpu_memory_gb": 80, "vcpu": 96, "price_per_gpu_hour": price}


OFFERS = [offer("V100", "1.00"), offer("H100", "2.50"), offer("A100", "1.50")]


def job(tier: str, gpus: int, expected_s: float, node: str, ran_s: float) -> dict[str, Any]:
    return {
        "tier": tier,
        "gpu_count": gpus,
        "vram_per_gpu_gb": 40,
        "cpu_cores": 4 * gpus,
        "expected_duration_sec": expected_s,
        "submitted_at": T0.isoformat(),
        "started_at": T0.isoformat(),
        "placement_history": [
            {
                "node_id": node,
                "gpu_indices": list(range(gpus)),
                "from": T0.isoformat(),
                "to": (T0 + timedelta(seconds=ran_s)).isoformat(),
            }
        ],
    }


def test_the_cheapest_offer_per_gpu_hour_and_per_work_unit() -> None:
    flex = job("FLEX", 8, 3600, "h", 3600 / H100)
    fast = job("FAST", 1, 1800, "v", 1800)
    assert cheapest(flex, OFFERS) == Decimal("1.00")  # the V100's GPU-hour
    assert cheapest(flex, OFFERS, per_work=True) == pytest.approx(Decimal("2.50") / Decimal(repr(H100)))
    assert cheapest(fast, OFFERS, per_work=True) == Decimal("1.00")  # a FAST GPU-hour is a unit on any model
    assert cheapest({**flex, "tier": "FLEX"}, [offer("V100", "11")], per_work=True) is None  # over the cap


def test_a_flex_job_on_the_cheapest_gpu_per_work_unit_costs_one_x_per_work_unit_and_more_per_gpu_hour() -> (
    None
):
    # An A100-hour of 8-GPU FLEX work on an H100 node (done in 1/3.17 h), half an hour of FAST on a V100.
    flex = job("FLEX", 8, 3600, "h", 3600 / H100)
    fast = job("FAST", 1, 1800, "v", 1800)
    models: dict[str, str | None] = {"h": "H100", "v": "V100"}
    end = T0 + timedelta(hours=1)
    gpu_h, work = delivered([flex, fast], models, end)
    assert float(gpu_h) == pytest.approx(8 / H100 + 0.5)
    assert float(work) == pytest.approx(8 + 0.5)
    net = Decimal("2.50") * Decimal(8 / H100) + Decimal("1.00") * Decimal("0.5")
    per = (net / gpu_h).quantize(Decimal("0.000001"))
    costs = {"cost_per_delivered_gpu_hour": str(per), "net_cost": str(net), "idle_cost": str(net / 4)}
    prices = [(T0, OFFERS)]

    out = cost_measures(costs, [flex, fast], prices, models, end)

    assert Decimal(out["cheapest_eligible_per_gpu_hour"]) == Decimal("1.0000")
    assert out["cost_ratio"] == pytest.approx(float(per), abs=1e-3)  # 2.25x: the H100's dear GPU-hours
    floor_work = (Decimal("2.50") / Decimal(repr(H100)) * 8 * 3600 + 1 * 1800) / (8 * 3600 + 1800)
    assert Decimal(out["cheapest_eligible_per_work_unit"]) == floor_work.quantize(Decimal("0.0001"))
    assert Decimal(out["cost_per_delivered_work_unit"]) == (net / work).quantize(Decimal("0.0001"))
    assert out["cost_ratio_per_work_unit"] == 1.0  # the engine bought the cheapest work
    assert out["cost_ratio_per_work_unit_without_idle"] == 0.75  # a quarter of the spend was idle GPUs
    assert out["decision_rule_measure"] == "cost_ratio_per_work_unit"


def test_open_spans_end_at_the_end_and_unknown_models_count_at_rate_one() -> None:
    running = job("FLEX", 2, 7200, "x", 0)
    running["placement_history"][0]["to"] = None
    gpu_h, work = delivered([running], {}, T0 + timedelta(minutes=30))
    assert (gpu_h, work) == (Decimal("1.0"), Decimal("1.0"))
    assert delivered([job("FLEX", 4, 60, "v", 3600)], {"v": "V100"}, T0)[1] == pytest.approx(
        Decimal(4) * Decimal(repr(V100))
    )


def test_demo_work_runs_its_a100_seconds_at_the_speed_of_the_gpu_model_it_got(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from scalar.cli.demo_work import main, run_seconds

    assert run_seconds(3600, "H100") == pytest.approx(3600 / H100)
    assert run_seconds(3600, "V100,A100") == pytest.approx(3600 / V100)  # a mixed host: its first model
    assert run_seconds(3600, None) == run_seconds(3600, "no-such-gpu") == 3600
    assert main(["--a100-seconds", "60", "--print"], {"SCALAR_GPU_MODEL": "H100"}) == pytest.approx(60 / H100)
    assert capsys.readouterr().out == f"{60 / H100:.3f}\n"
    with pytest.raises(SystemExit):
        main(["--a100-seconds", "-1", "--print"], {})


def test_the_users_own_nodes_are_a_figure_of_their_own_not_hidden() -> None:
    nodes = [
        {"provider": "local", "state": "ready", "gpu_count": 8, "gpus_allocated": 0},
        {"provider": "aws", "state": "ready", "gpu_count": 8, "gpus_allocated": 6},
        {"provider": "prime", "state": "ready", "gpu_count": 2, "gpus_allocated": 2},
        {"provider": "prime", "state": "booting", "gpu_count": 4, "gpus_allocated": 0},
    ]
    assert own_nodes(nodes) == (8, 0)
    # /status counts all 18 READY GPUs (8 of them the user's, idle): 8 / 18; the bought capacity: 8 / 10
    assert market_utilisation(8, 18, 8, 0) == 0.8
    assert market_utilisation(0, 8, 8, 0) == 0.0
