"""Procurement (seed 000's autoscaler integration): which provider to buy a capacity need from, and why."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.arbitrage import combine_default_score
from scalar.domain.errors import InvalidSpecError
from scalar.domain.offers import Offer
from scalar.domain.procurement import (
    CapacityNeed,
    ProcurementPolicy,
    RankedOffer,
    ScaleGroupShape,
    cost_band,
    hosting_cost_per_hour,
    nodes_to_cover,
    priorities_for_groups,
    rank_offers,
)
from scalar.domain.tier import Tier

T0 = datetime(2025, 6, 28, 12, 0, tzinfo=UTC)
SEED = ProcurementPolicy()  # the seed's numbers: FLEX capped at $10.00/GPU-h, FAST uncapped


def offer(
    provider: str,
    instance_type: str,
    price: str,
    gpus: float,
    *,
    model: str | None = "H100",
    gpu_memory_gb: float = 80,
    region: str = "US",
    rate: float | None = None,
) -> Offer:
    return Offer(
        provider=provider,
        instance_type=instance_type,
        region=region,
        price_per_hour=Decimal(price),
        gpu_model=model,
        gpu_count=gpus,
        gpu_memory_gb=gpu_memory_gb,
        vcpu=26 * gpus,
        memory_gb=225 * gpus,
        interruption_rate=rate,
    )


# Real catalog prices (primeintellect / runpod / aws skypilot catalogs); sfcompute derived from them.
PRIME_1 = offer("prime", "lambdalabs__1xH100_80GB", "3.29", 1)
PRIME_4 = offer("prime", "hyperstack__4xH100_80GB", "7.60", 4)
PRIME_8 = offer("prime", "hyperstack__8xH100_80GB", "15.20", 8)
RUNPOD_4 = offer("runpod", "4x_H100_SECURE", "7.16", 4)
SF_8 = offer("sfcompute", "8xH100", "20.00", 8)
AWS_P5 = offer("aws", "p5.48xlarge", "55.04", 8, rate=0.0)


def included(ranked: list[RankedOffer]) -> list[str]:
    return [f"{r.offer.provider}:{r.offer.instance_type}" for r in ranked if r.included]


def codes(r: RankedOffer) -> list[str]:
    return [reason.code for reason in r.reasons]


# ---- the size rule ----------------------------------------------------------------------------------------


def test_below_eight_gpus_prime_is_preferred_even_when_another_provider_is_cheaper() -> None:
    need = CapacityNeed(gpu_count=4, tier=Tier.FLEX, min_gpus_per_node=4)
    ranked = rank_offers(need, [RUNPOD_4, PRIME_4, SF_8], SEED)
    assert included(ranked)[0] == "prime:hyperstack__4xH100_80GB"
    first, *rest = [r for r in ranked if r.included]
    assert first.rank == 1 and first.preferred and "preferred_provider" in codes(first)
    assert "prime is preferred for a need below 8 GPUs (4)" in first.reasons[1].message
    assert all("not_preferred" in codes(r) for r in rest)
    # Among the others the arbitrage default score decides: RunPod's $1.79/GPU-h beats half an 8x box.
    assert included(ranked)[1:] == ["runpod:4x_H100_SECURE", "sfcompute:8xH100"]


def test_from_eight_gpus_sfcompute_is_preferred() -> None:
    need = CapacityNeed(gpu_count=8, tier=Tier.FAST)
    ranked = rank_offers(need, [PRIME_8, AWS_P5, SF_8], SEED)
    assert included(ranked)[0] == "sfcompute:8xH100"
    assert "preferred_provider" in codes(ranked[0])


@pytest.mark.parametrize(("gpus", "preferred"), [(7, "prime"), (8, "sfcompute")])
def test_the_size_boundary_is_eight_gpus(gpus: int, preferred: str) -> None:
    ranked = rank_offers(CapacityNeed(gpu_count=gpus, tier=Tier.FAST), [SF_8, PRIME_8], SEED)
    assert ranked[0].offer.provider == preferred
    assert ProcurementPolicy().preferred_provider(gpus) == preferred


def test_a_need_larger_than_a_node_buys_several_nodes_and_says_the_cost() -> None:
    ranked = rank_offers(CapacityNeed(gpu_count=20, tier=Tier.FAST), [SF_8], SEED)
    (r,) = ranked
    assert r.nodes == 3 and r.cost_per_hour == Decimal("60.00")
    assert r.price_per_gpu_hour == Decimal("2.5")
    # Scored as the need pays: $60/h for 20 GPUs used, 20 of 24 GPUs busy.
    assert r.score == pytest.approx(combine_default_score(Decimal(3), None, 20 / 24))
    assert "3 x 8xH100" in r.reasons[0].message and "covers 20 GPUs at $60.00/h" in r.reasons[0].message


# ---- the tier cap: per GPU-hour ---------------------------------------------------------------------------


def test_flex_cap_is_per_gpu_hour_so_an_eight_gpu_node_at_20_per_hour_is_allowed() -> None:
    # $20.00/h for 8 GPUs is $2.50/GPU-h: within $10/GPU-h. Read per instance-hour, it would be over $10.
    need = CapacityNeed(gpu_count=8, tier=Tier.FLEX)
    (r,) = rank_offers(need, [SF_8], SEED)
    assert r.included
    assert "within the FLEX cap of $10.00/GPU-h" in r.reasons[0].message


def test_flex_cap_excludes_a_quote_over_ten_dollars_per_gpu_hour_and_fast_is_uncapped() -> None:
    dear = offer("prime", "1xH100-dear", "10.01", 1)
    at_cap = offer("prime", "1xH100-at-cap", "10.00", 1)
    flex = rank_offers(CapacityNeed(gpu_count=1, tier=Tier.FLEX), [dear, at_cap], SEED)
    assert included(flex) == ["prime:1xH100-at-cap"]
    excluded = next(r for r in flex if not r.included)
    assert excluded.rank is None and excluded.score is None
    assert codes(excluded) == ["over_tier_cap"]
    assert excluded.reasons[0].message == "$10.01/GPU-h is over the FLEX cap of $10.00/GPU-h"
    fast = rank_offers(CapacityNeed(gpu_count=1, tier=Tier.FAST), [dear, at_cap], SEED)
    assert len(included(fast)) == 2 and "uncapped" in fast[0].reasons[0].message


def test_caps_are_configurable_per_tier() -> None:
    policy = ProcurementPolicy(
        flex_max_price_per_gpu_hour=Decimal("2.00"), fast_max_price_per_gpu_hour=Decimal("3")
    )
    flex = rank_offers(CapacityNeed(gpu_count=8, tier=Tier.FLEX), [SF_8, PRIME_8], policy)
    assert included(flex) == ["prime:hyperstack__8xH100_80GB"]  # $1.90 ok, SFCompute's $2.50 is over
    assert "fallback" in codes(flex[0])
    fast = rank_offers(CapacityNeed(gpu_count=8, tier=Tier.FAST), [SF_8, AWS_P5], policy)
    assert included(fast) == ["sfcompute:8xH100"]  # the p5's $6.88/GPU-h is over FAST's $3


# ---- fallback ---------------------------------------------------------------------------------------------


def test_when_prime_has_no_stock_the_others_rank_by_arbitrage_score_with_a_reason() -> None:
    need = CapacityNeed(gpu_count=4, tier=Tier.FLEX, min_gpus_per_node=4)
    ranked = rank_offers(need, [SF_8, RUNPOD_4], SEED)
    assert included(ranked) == ["runpod:4x_H100_SECURE", "sfcompute:8xH100"]
    first = ranked[0]
    assert "fallback" in codes(first) and not first.preferred
    assert (
        "prime (preferred for 4 GPUs) cannot serve this need (it has no offers)" in first.reasons[1].message
    )
    assert first.score is not None and ranked[1].score is not None and first.score > ranked[1].score


def test_when_prime_is_over_the_cap_the_fallback_says_so() -> None:
    need = CapacityNeed(gpu_count=1, tier=Tier.FLEX)
    prime_dear = offer("prime", "1xH100", "12.00", 1)
    runpod_1 = offer("runpod", "1x_H100_SECURE", "2.69", 1)
    ranked = rank_offers(need, [prime_dear, runpod_1], SEED)
    assert included(ranked) == ["runpod:1x_H100_SECURE"]
    assert "all 1 of its offers excluded: 1 over_tier_cap" in ranked[0].reasons[1].message


def test_offers_that_cannot_serve_the_need_are_excluded_with_numbers() -> None:
    need = CapacityNeed(
        gpu_count=4, tier=Tier.FAST, gpu_models=("H100",), gpu_memory_gb=80, min_gpus_per_node=2
    )
    cpu_only = offer("aws", "m5.large", "0.10", 0, model=None)
    shared = offer("runpod", "quarter-A100", "0.30", 0.25, model="A100")
    a100 = offer("aws", "p4d.24xlarge", "21.96", 8, model="A100", gpu_memory_gb=40)
    small_memory = offer("aws", "h100-nvl-64", "9.00", 4, gpu_memory_gb=64)
    single = offer("prime", "1xH100", "3.29", 1)
    ranked = rank_offers(need, [cpu_only, shared, a100, small_memory, single, PRIME_4], SEED)
    assert included(ranked) == ["prime:hyperstack__4xH100_80GB"]
    why = {r.offer.instance_type: r.reasons[0] for r in ranked if not r.included}
    assert why["m5.large"].code == "no_gpus"
    assert why["quarter-A100"].code == "fractional_gpu"
    assert why["p4d.24xlarge"].code == "gpu_model_not_allowed" and why["p4d.24xlarge"].have == "A100"
    assert why["h100-nvl-64"].code == "insufficient_gpu_memory"
    assert (why["h100-nvl-64"].need, why["h100-nvl-64"].have) == (80, 64)
    assert why["1xH100"].code == "too_few_gpus_per_node" and why["1xH100"].need == 2


def test_preferred_regions_come_first_within_the_preferred_provider() -> None:
    need = CapacityNeed(gpu_count=8, tier=Tier.FAST, preferred_regions=("EU",))
    us = offer("sfcompute", "8xH100", "18.00", 8, region="US")
    eu = offer("sfcompute", "8xH100", "22.00", 8, region="EU")
    ranked = rank_offers(need, [us, eu, PRIME_8], SEED)
    assert [(r.offer.provider, r.offer.region) for r in ranked] == [
        ("sfcompute", "EU"),
        ("sfcompute", "US"),
        ("prime", "US"),
    ]
    assert "preferred_region" in codes(ranked[0]) and "outside_preferred_regions" in codes(ranked[1])


def test_capacity_need_validates() -> None:
    with pytest.raises(InvalidSpecError):
        CapacityNeed(gpu_count=0)
    with pytest.raises(InvalidSpecError):
        CapacityNeed(gpu_count=2, min_gpus_per_node=4)


# ---- routing priorities -----------------------------------------------------------------------------------


def test_ranking_becomes_group_priorities_lower_is_preferred() -> None:
    need = CapacityNeed(gpu_count=8, tier=Tier.FLEX)
    dear_prime = offer("prime", "datacrunch__8xH100", "95.00", 8)  # $11.88/GPU-h: over the FLEX cap
    ranked = rank_offers(need, [PRIME_8, SF_8, dear_prime], SEED)
    groups = [
        ScaleGroupShape("prime-8xh100-flex", "prime", "hyperstack__8xH100_80GB", Tier.FLEX),
        ScaleGroupShape("sf-8xh100-flex", "sfcompute", "8xH100", Tier.FLEX),
        ScaleGroupShape("sf-8xh100-fast", "sfcompute", "8xH100", Tier.FAST),
        ScaleGroupShape("dc-8xh100-flex", "prime", "datacrunch__8xH100", Tier.FLEX),
    ]
    assert priorities_for_groups(ranked, groups, tier=Tier.FLEX) == {
        "sf-8xh100-flex": 1,
        "prime-8xh100-flex": 2,
    }
    with_excluded = priorities_for_groups(ranked, groups, tier=Tier.FLEX, excluded_priority=1000)
    assert with_excluded["dc-8xh100-flex"] == 1000
    assert priorities_for_groups(ranked, groups)["sf-8xh100-fast"] == 1  # tier None: every group


def test_a_group_takes_the_rank_of_its_best_offer_and_priorities_are_dense() -> None:
    need = CapacityNeed(gpu_count=8, tier=Tier.FAST)
    sf_eu = offer("sfcompute", "8xH100", "30.00", 8, region="EU")
    ranked = rank_offers(need, [sf_eu, AWS_P5, SF_8], SEED)  # ranks: SF_8 1, sf_eu 2, p5 3
    groups = [ScaleGroupShape("sf", "sfcompute", "8xH100"), ScaleGroupShape("p5", "aws", "p5.48xlarge")]
    assert priorities_for_groups(ranked, groups) == {"sf": 1, "p5": 2}


# ---- invariants -------------------------------------------------------------------------------------------

offer_st = st.builds(
    offer,
    provider=st.sampled_from(("prime", "sfcompute", "runpod", "aws")),
    instance_type=st.sampled_from(("a", "b", "c")),
    price=st.decimals(min_value=Decimal("0.10"), max_value=Decimal("120"), places=2).map(str),
    gpus=st.sampled_from((0, 0.5, 1, 2, 4, 8)),
    model=st.sampled_from(("H100", "A100", None)),
    rate=st.one_of(st.none(), st.sampled_from((0.0, 0.05, 0.2))),
)


@given(
    gpus=st.integers(min_value=1, max_value=40),
    tier=st.sampled_from(list(Tier)),
    offers=st.lists(offer_st, max_size=10),
)
def test_ranking_invariants(gpus: int, tier: Tier, offers: list[Offer]) -> None:
    ranked = rank_offers(CapacityNeed(gpu_count=gpus, tier=tier), offers, SEED)
    assert len(ranked) == len(offers)
    ins = [r for r in ranked if r.included]
    assert [r.rank for r in ins] == list(range(1, len(ins) + 1))
    assert all(not r.included for r in ranked[len(ins) :])
    preferred = ProcurementPolicy().preferred_provider(gpus)
    flags = [r.offer.provider == preferred for r in ins]
    assert flags == sorted(flags, reverse=True)  # every preferred-provider offer before any other
    for r in ins:
        assert r.nodes * r.offer.gpu_count >= gpus
        if tier is Tier.FLEX:
            assert r.price_per_gpu_hour is not None and r.price_per_gpu_hour <= Decimal("10.0")
    for r in ranked:
        assert r.reasons, "every offer, included or not, says why"


# ---- CPU and RAM: what a node of each shape really holds ---------------------------------------------------


def cpu_offer(provider: str, name: str, price: str, gpus: int, vcpu: float, ram: float) -> Offer:
    return Offer(
        provider=provider,
        instance_type=name,
        region="US",
        price_per_hour=Decimal(price),
        gpu_model="V100",
        gpu_count=gpus,
        gpu_memory_gb=16,
        vcpu=vcpu,
        memory_gb=ram,
    )


V100_4 = cpu_offer("prime", "4xV100", "0.192", 4, 20, 90)  # 5 vCPUs per GPU
T4_4 = cpu_offer("azure", "NC64as", "0.468", 4, 64, 440)  # 16 vCPUs per GPU


def test_a_cpu_heavy_need_is_covered_by_as_many_nodes_as_its_cpu_takes() -> None:
    # Four 1-GPU jobs asking 12 cores each: one 4-GPU node by GPUs, but 48 cores need three 20-vCPU nodes.
    need = CapacityNeed(gpu_count=4, tier=Tier.FAST, cpu_cores=48, ram_gb=64)
    assert nodes_to_cover(need, V100_4) == 3 and nodes_to_cover(need, T4_4) == 1
    by_key = {r.offer.instance_type: r for r in rank_offers(need, [V100_4, T4_4], SEED)}
    assert by_key["4xV100"].nodes == 3 and by_key["4xV100"].cost_per_hour == Decimal("0.576")
    assert "(48 CPU cores, 64 GB RAM)" in by_key["4xV100"].reasons[0].message
    # Without CPU or RAM the need is GPUs only, as before.
    assert nodes_to_cover(CapacityNeed(gpu_count=4), V100_4) == 1
    with pytest.raises(InvalidSpecError, match="cpu_cores"):
        CapacityNeed(gpu_count=1, cpu_cores=-1)


def test_hosting_cost_is_whole_nodes_for_one_job_and_shared_nodes_for_many() -> None:
    one = hosting_cost_per_hour(V100_4, gpu_count=1, cpu_cores=12, ram_gb=16)
    assert one == Decimal("0.192")  # a lone job pays the node it needs
    many = hosting_cost_per_hour(V100_4, gpu_count=1, cpu_cores=12, ram_gb=16, jobs=10)
    assert many == Decimal("0.192")  # 12 of 20 cores each: one job per node, whatever the number of jobs
    assert (
        hosting_cost_per_hour(T4_4, gpu_count=1, cpu_cores=12, ram_gb=16, jobs=10)
        == Decimal("0.468") * 3 / 10
    )
    # A sharing job pays its part of one GPU's memory; a gang pays all its nodes; no GPUs, no price.
    shared = hosting_cost_per_hour(V100_4, gpu_count=1, vram_per_gpu_gb=4, share_gpu=True, jobs=16)
    assert shared == Decimal("0.192") / 16
    assert hosting_cost_per_hour(V100_4, gpu_count=8) == Decimal("0.384")
    assert hosting_cost_per_hour(cpu_offer("aws", "c5", "1", 0, 4, 8), gpu_count=1) is None


def test_jobs_fit_a_node_whole_five_cpu_heavy_jobs_need_five_nodes() -> None:
    # 1-GPU jobs asking 12 of a 4-GPU node's 20 vCPUs: only one fits a node, so five need five nodes (a
    # fractional share of 12/20 would price them at three).
    five = hosting_cost_per_hour(V100_4, gpu_count=1, cpu_cores=12, ram_gb=16, jobs=5)
    assert five == Decimal("0.192")
    # Four 2-GPU jobs fill an 8-GPU node; three leave a quarter of it empty and pay for it.
    eight = cpu_offer("aws", "8xV100", "8", 8, 96, 768)
    assert hosting_cost_per_hour(eight, gpu_count=2, cpu_cores=8, ram_gb=64, jobs=4) == Decimal(2)
    assert hosting_cost_per_hour(eight, gpu_count=2, cpu_cores=8, ram_gb=64, jobs=3) == Decimal(8) / 3
    # RAM binds: 100 GB jobs on a 768 GB node: 7 per node by RAM, but 8 GPUs hold 8 1-GPU jobs.
    assert hosting_cost_per_hour(eight, gpu_count=1, ram_gb=100, jobs=8) == Decimal(16) / 8
    # A gang takes its nodes whole, whatever the number of alike gangs.
    assert hosting_cost_per_hour(eight, gpu_count=12, jobs=3) == Decimal(16)


@given(
    gpus=st.integers(1, 8),
    vcpu=st.integers(1, 128),
    ram=st.integers(1, 1024),
    gpu_count=st.integers(1, 8),
    cpu=st.integers(0, 64),
    ram_gb=st.integers(0, 512),
    jobs=st.integers(1, 40),
)
def test_hosting_cost_pays_for_exactly_the_nodes_that_hold_the_jobs(
    gpus: int, vcpu: int, ram: int, gpu_count: int, cpu: int, ram_gb: int, jobs: int
) -> None:
    offer = cpu_offer("aws", "x", "1", gpus, vcpu, ram)
    cost = hosting_cost_per_hour(offer, gpu_count=gpu_count, cpu_cores=cpu, ram_gb=ram_gb, jobs=jobs)
    assert cost is not None
    if gpu_count > gpus:
        assert cost == -(-gpu_count // gpus)  # a gang pays its whole nodes
        return

    def fits(k: int) -> bool:  # k alike jobs on one node of the shape
        return k * gpu_count <= gpus and k * cpu <= vcpu and k * ram_gb <= ram

    n = round(cost * jobs)  # $1 per node-hour: the nodes paid for (exact up to Decimal's last digit)
    assert abs(cost * jobs - n) < Decimal("1e-20") and 1 <= n <= jobs
    if not fits(1):
        assert n == jobs  # a job larger than the shape is priced at a whole node
        return
    assert fits(-(-jobs // n)), "the nodes paid for hold every job"
    if n > 1:
        assert not fits(-(-jobs // (n - 1))), "one node fewer would not hold them"


def test_the_cost_band_keeps_what_is_within_the_tolerance_of_the_cheapest() -> None:
    costs = {"a": Decimal("1.00"), "b": Decimal("1.10"), "c": Decimal("1.11"), "d": Decimal("3")}
    assert cost_band(costs) == ("a", "b")
    assert cost_band(costs, Decimal("1")) == ("a",)
    assert cost_band({}) == ()
    assert ProcurementPolicy().host_cost_tolerance == Decimal("1.10")
