"""Protocol B's money: the seller's bill (ledger), busy GPUs, the lower bound, and the wait metrics, by hand."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from scalar.domain.market import BlockGrant, NodeEvent, NodeState
from scalar.domain.offers import Offer
from scalar.domain.tier import Tier
from scalar.sim.dynamic.ledger import Ledger, Occupancy
from scalar.sim.dynamic.loop import ORIGIN
from scalar.sim.dynamic.lower_bound import lower_bound
from scalar.sim.dynamic.metrics import percentile, tier_waits
from tests.sim.protocol_b_fixtures import job, offer, workload

H = timedelta(hours=1)


def grant(block_id: str, provider: str, nodes: int, gpus: int, price: str, hours: float) -> BlockGrant:
    return BlockGrant(
        block_id=block_id,
        provider=provider,
        instance_type=f"{gpus}xGPU",
        gpu_model="A100",
        gpus_per_node=gpus,
        vram_per_gpu_gb=40.0,
        cpu_per_node=96.0,
        ram_per_node_gb=1024.0,
        start_time=ORIGIN,
        end_time=ORIGIN + hours * H,
        price_per_gpu_hour=Decimal(price),
        node_ids=tuple(f"{block_id}-n{i}" for i in range(nodes)),
    )


def test_two_fixed_price_nodes_are_billed_until_each_stops() -> None:
    # A block of 2 nodes x 4 GPUs at $2/GPU-h on a 10 h contract: node 0 is preempted after 1 h, the
    # block is released after 3 h. Bill: 4 x 2 x 1 h + 4 x 2 x 3 h = $32, 16 GPU-hours.
    ledger = Ledger()
    g = grant("b1", "aws", 2, 4, "2", 10)
    ledger.bought(g, ORIGIN)
    ledger.observe([NodeEvent("b1-n0", "b1", ORIGIN + H, state=NodeState.TERMINATED, reason="preempted")])
    ledger.released("b1", ORIGIN + 3 * H)
    until = ORIGIN + 5 * H
    assert ledger.cost(until) == Decimal(32)
    assert ledger.paid_gpu_hours(until) == Decimal(16)
    assert ledger.by_kind(until) == {
        "aws:A100": {"cost": Decimal(32), "gpu_hours": Decimal(16), "nodes": Decimal(2)}
    }


def test_a_node_still_held_is_billed_until_the_run_ends() -> None:
    ledger = Ledger()
    ledger.bought(grant("b1", "runpod", 1, 8, "1.5", 100), ORIGIN)
    assert ledger.cost(ORIGIN + 2 * H) == Decimal(24)  # 8 GPUs x $1.5 x 2 h


def test_an_orderbook_block_is_billed_for_its_whole_window() -> None:
    # SFCompute bills the window whatever happens: 1 node x 8 GPUs x $3 x 2 h = $48, released after 30 min.
    ledger = Ledger()
    ledger.bought(grant("b2", "sfcompute", 1, 8, "3", 2), ORIGIN)
    ledger.released("b2", ORIGIN + H / 2)
    assert ledger.cost(ORIGIN + H) == Decimal(48)
    assert ledger.paid_gpu_hours(ORIGIN + H) == Decimal(16)


def test_busy_gpus_count_a_shared_gpu_once() -> None:
    occ = Occupancy()
    occ.started("n1", "a", (0,), ORIGIN)
    occ.started("n1", "b", (0,), ORIGIN + H / 2)  # shares GPU 0
    occ.started("n1", "c", (1, 2), ORIGIN)
    occ.ended("n1", "a", ORIGIN + H)
    occ.ended("n1", "b", ORIGIN + 2 * H)
    occ.node_stopped("n1", ORIGIN + 3 * H)  # c is killed with its node
    # GPU 0 busy 0-2 h, GPUs 1 and 2 busy 0-3 h
    assert occ.busy_gpu_hours(ORIGIN + 4 * H) == Decimal(8)


class HourlyOffers:
    """Two hours of prices: the T4 doubles in the second (or halves, ``rising=False``)."""

    def __init__(self, rising: bool = True) -> None:
        self.rising = rising
        self.base = [
            offer("T4", 1, "0.30", vram=16.0, vcpu=8, ram=32),
            offer("V100", 4, "0.50", vram=16.0, vcpu=32, ram=244),
            offer("A100", 8, "1.20", vram=40.0, vcpu=96, ram=1024),
        ]

    def offers(self, now: datetime) -> tuple[Offer, ...]:
        first, second = ("0.30", "0.60") if self.rising else ("0.60", "0.30")
        price = second if now >= ORIGIN + H else first
        return (offer("T4", 1, price, vram=16.0, vcpu=8, ram=32), *self.base[1:])


def test_the_lp_bound_counts_cpu_and_packs_complementary_jobs() -> None:
    # One hour on the V100 node only ($2/h: 4 GPUs, 32 vCPUs). A 1-GPU job with 16 vCPUs needs half a node
    # for its CPUs: $1.00 (a GPU-only bound would say $0.50).
    alone = [job("cpu-heavy", duration_s=3600, cpu=16, models=("V100",))]
    assert lower_bound(workload(alone), HourlyOffers()).cost == Decimal("1.0")
    # With a 3-GPU job that needs no CPU, one node holds both: $2.00, not $1.00 + $1.50.
    both = [*alone, job("gpu-heavy", duration_s=3600, gpu_count=3, cpu=0, models=("V100",))]
    assert lower_bound(workload(both), HourlyOffers()).cost == Decimal("2.0")


def test_the_lp_bound_prices_flex_work_in_work_units_and_fast_in_wall_time() -> None:
    # One work unit (an A100 GPU-hour): on a T4 (speed 0.208) it takes 4.8 GPU-hours at $0.30 = $1.44,
    # on the A100 one GPU-hour at $1.20: FLEX pays $1.20. A FAST service holds its GPU an hour anywhere: $0.30.
    flex = job("batch", duration_s=3600, cpu=0, models=("T4", "A100"), tier=Tier.FLEX)
    fast = job("service", duration_s=3600, cpu=0, models=("T4", "A100"))
    assert float(lower_bound(workload([flex]), HourlyOffers()).cost) == pytest.approx(1.20)
    assert float(lower_bound(workload([fast]), HourlyOffers()).cost) == pytest.approx(0.30)


def test_each_offer_keeps_its_lowest_price_so_far() -> None:
    # The T4 doubles in hour 1: a T4 service in hour 1 is still priced at hour 0's $0.30 ...
    late = job("late", arrival_s=3600, duration_s=3600, cpu=0, models=("T4",))
    assert float(lower_bound(workload([late]), HourlyOffers()).cost) == pytest.approx(0.30)
    # ... but a price that falls later does not lower an earlier hour's.
    falling = HourlyOffers(rising=False)
    early = job("early", duration_s=3600, cpu=0, models=("T4",))
    assert float(lower_bound(workload([early, late]), falling).cost) == pytest.approx(0.60 + 0.30)


def test_a_job_no_offer_holds_is_counted_unpriced() -> None:
    bound = lower_bound(workload([job("huge", cpu=500, models=("T4",))]), HourlyOffers())
    assert bound.cost == 0 and bound.unpriced_jobs == 1


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([5.0], 95) == 5.0
    assert percentile([], 50) is None


def test_waits_slo_and_unfinished_jobs() -> None:
    jobs = [
        job("a", arrival_s=0, duration_s=100),
        job("b", arrival_s=0, duration_s=100),
        job("c", arrival_s=50, duration_s=100),
        job("d", arrival_s=0, duration_s=100, tier=Tier.FLEX),
    ]
    finished = {
        "a": ORIGIN + timedelta(seconds=160),  # waited 60 s
        "b": ORIGIN + timedelta(seconds=800),  # waited 700 s: misses the 10-minute FAST SLO
    }
    fast = tier_waits(jobs, finished, {"refused-none"}, ORIGIN + timedelta(seconds=2000), Tier.FAST)
    assert (fast.jobs, fast.finished, fast.refused) == (3, 2, 0)
    assert fast.p50_s == 700.0  # waits 60, 700 and c's 1950 s (never finished: end of run - arrival)
    assert fast.max_s == 1950.0
    assert fast.slo_attainment == pytest.approx(1 / 3)
    flex = tier_waits(jobs, finished, {"d"}, ORIGIN + timedelta(seconds=2000), Tier.FLEX)
    assert (flex.refused, flex.slo_attainment, flex.p50_s) == (1, 0.0, None)
