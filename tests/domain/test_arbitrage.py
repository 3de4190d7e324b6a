"""Seed 002: spot-price arbitrage. Build the price list, place the workload, check the decision and why."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scalar.domain.arbitrage import (
    DEFAULT_INTERRUPTION_RATE,
    NoSuitableInstanceError,
    PlacementDecision,
    WorkloadRequirements,
    canonical_gpu_model,
    default_score,
    find_optimal_placement,
    price_basis_per_hour,
    price_score,
    seed_score,
)
from scalar.domain.errors import DomainError, InvalidSpecError
from scalar.domain.offers import Offer


def offer(
    instance_type: str = "p5.48xlarge",
    price: str | float = "12.00",
    *,
    provider: str = "aws",
    region: str = "us-east-1",
    zone: str | None = "use1-az1",
    gpu_model: str | None = "H100",
    gpu_count: float = 8,
    vcpu: float = 192,
    memory_gb: float = 2048,
    rate: float | None = 0.05,
    spot: bool = True,
) -> Offer:
    return Offer(
        provider=provider,
        instance_type=instance_type,
        region=region,
        price_per_hour=Decimal(str(price)),
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        gpu_memory_gb=80,
        vcpu=vcpu,
        memory_gb=memory_gb,
        availability_zone=zone,
        spot=spot,
        interruption_rate=rate,
    )


def cpu_box(name: str, price: str, vcpu: float = 16, memory_gb: float = 64, **kw: object) -> Offer:
    return offer(name, price, gpu_model=None, gpu_count=0, vcpu=vcpu, memory_gb=memory_gb, **kw)  # type: ignore[arg-type]


# ---- the seed's filters ---------------------------------------------------------------------------------


def test_each_seed_filter_removes_what_it_should_and_the_fitting_offer_wins() -> None:
    req = WorkloadRequirements(
        min_cpu=96,
        min_memory_gb=1024,
        gpu_count=8,
        gpu_type="H100",
        max_price_per_hour=Decimal("30"),
        max_interruption_rate=0.2,
    )
    prices = [
        offer("fits", "20"),
        offer("small-cpu", "10", vcpu=48),
        offer("small-mem", "10", memory_gb=512),
        offer("four-gpus", "5", gpu_count=4),
        offer("a100s", "9", gpu_model="A100"),
        offer("pricey", "31"),
        offer("flaky", "11", rate=0.25),
    ]
    decision = find_optimal_placement(req, prices)
    assert decision.instance_type == "fits"
    removed = {f.name: f.removed for f in decision.removed_by}
    assert removed == {
        "minCPU": 1,
        "minMemoryGB": 1,
        "gpuCount": 1,
        "gpuType": 1,
        "maxPricePerHour": 1,
        "maxInterruptionRate": 1,
    }
    assert decision.considered == 7
    assert decision.reasons[0].code == "chosen"
    assert "$20.00/h" in decision.reasons[0].message and "$2.50/GPU-h" in decision.reasons[0].message


def test_seed_gpu_type_names_match_the_catalog_names() -> None:
    assert canonical_gpu_model("nvidia-a100") == "A100"
    assert canonical_gpu_model("nvidia-t4") == "T4"
    assert canonical_gpu_model(" h100 ") == "H100"
    req = WorkloadRequirements(gpu_type="nvidia-t4")
    decision = find_optimal_placement(req, [offer("t4", "0.5", gpu_model="T4", gpu_count=1), offer("h", "1")])
    assert decision.instance_type == "t4"


def test_preferred_regions_win_when_any_candidate_is_there() -> None:
    req = WorkloadRequirements(gpu_count=8, preferred_regions=("eu-west-1",))
    cheap_us = offer("cheap-us", "10", region="us-east-1")
    dear_eu = offer("dear-eu", "20", region="eu-west-1")
    decision = find_optimal_placement(req, [cheap_us, dear_eu])
    assert decision.region == "eu-west-1"
    assert decision.alternatives == ()  # the US offer was never scored
    assert not decision.region_fallback
    assert any(r.code == "preferred_region" and r.have == 1 for r in decision.reasons)


def test_region_preference_falls_back_to_all_regions_when_none_fits_there() -> None:
    req = WorkloadRequirements(gpu_count=8, preferred_regions=("eu-west-1",))
    # The EU offer exists but is filtered out (4 GPUs): the preference must not empty the pool.
    prices = [offer("eu-small", "1", region="eu-west-1", gpu_count=4), offer("us", "10", region="us-east-1")]
    decision = find_optimal_placement(req, prices)
    assert decision.region == "us-east-1"
    assert decision.region_fallback
    fallback = next(r for r in decision.reasons if r.code == "region_fallback")
    assert "eu-west-1" in fallback.message and fallback.have == 0


def test_top_three_alternatives_each_carry_their_own_score_and_price() -> None:
    req = WorkloadRequirements(gpu_count=8)
    prices = [offer(f"n{i}", str(10 + i), zone=f"z{i}") for i in range(6)]
    decision = find_optimal_placement(req, prices)
    assert decision.instance_type == "n0"
    assert [a.instance_type for a in decision.alternatives] == ["n1", "n2", "n3"]
    assert [a.price_per_hour for a in decision.alternatives] == [Decimal(11), Decimal(12), Decimal(13)]
    scores = [decision.score, *(a.score for a in decision.alternatives)]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4
    for a in decision.alternatives:
        assert a.score == default_score(a.offer, req)
        assert a.price_per_gpu_hour == a.price_per_hour / 8


def test_equal_scores_break_ties_by_price_then_offer_key_whatever_the_input_order() -> None:
    req = WorkloadRequirements(gpu_count=8)
    a = offer("same", "12", zone="use1-az2")
    b = offer("same", "12", zone="use1-az1")
    assert find_optimal_placement(req, [a, b]).availability_zone == "use1-az1"
    assert find_optimal_placement(req, [b, a]).availability_zone == "use1-az1"
    # Under the seed scorer every 8-GPU box over $10/h scores 0 on price: the cheaper one wins the tie.
    dear = offer("dear", "50", zone="use1-az3")
    cheap = offer("cheap", "12", zone="use1-az4")
    assert seed_score(dear, req) == seed_score(cheap, req)
    assert find_optimal_placement(req, [dear, cheap], scorer="seed").instance_type == "cheap"


# ---- no candidate: a typed error that counts and says what to relax ------------------------------------


def test_no_candidate_error_counts_each_offer_against_the_first_filter_it_fails() -> None:
    req = WorkloadRequirements(min_cpu=96, gpu_count=8, max_price_per_hour=Decimal("10"))
    prices = [
        offer("tiny", "1", vcpu=8, gpu_count=1),  # fails minCPU (first) and gpuCount
        offer("p5", "12.69"),  # fails only the price
        offer("p5-dear", "55.04"),  # fails only the price
        offer("half", "6", gpu_count=4),  # fails only gpuCount
    ]
    with pytest.raises(NoSuitableInstanceError) as info:
        find_optimal_placement(req, prices)
    err = info.value
    assert isinstance(err, DomainError)
    assert {f.name: f.removed for f in err.removed_by} == {
        "minCPU": 1,
        "minMemoryGB": 0,
        "gpuCount": 1,
        "maxPricePerHour": 2,
    }
    text = str(err)
    assert "none of 4 offers" in text
    assert "maxPricePerHour (<= $10/h) removed 2" in text
    assert "To fix: " in text
    assert "raise maxPricePerHour to $12.69 (cheapest otherwise-fitting offer: aws p5 in" in text
    assert "lower gpuCount to 4" in text


def test_no_single_change_enough_names_every_change_the_nearest_offer_needs() -> None:
    req = WorkloadRequirements(gpu_type="H100", max_interruption_rate=0.05)
    prices = [offer("a100-flaky", "3", gpu_model="A100", rate=0.2)]
    with pytest.raises(NoSuitableInstanceError) as info:
        find_optimal_placement(req, prices)
    hint = info.value.hint or ""
    assert hint.startswith("no single change is enough")
    assert "set gpuType to A100" in hint and "raise maxInterruptionRate to 0.2" in hint


def test_an_empty_price_list_is_no_suitable_instance_with_a_fix() -> None:
    with pytest.raises(NoSuitableInstanceError) as info:
        find_optimal_placement(WorkloadRequirements(), [])
    assert "no price records" in str(info.value)
    assert info.value.hint == "supply at least one price record"


# ---- the seed's JavaScript truthiness quirks, fixed (each test fails on the seed's behaviour) ----------


def test_a_published_zero_interruption_rate_stays_zero_in_the_score() -> None:
    # Seed: (1 - (interruptionRate || 0.1)) * 100 turns a real 0 into 0.1: on-demand looks as risky as unknown.
    req = WorkloadRequirements(gpu_count=8)
    on_demand = offer("od", "20", rate=0.0, spot=False)
    unknown = offer("sp", "20", rate=None)
    assert seed_score(on_demand, req) - seed_score(unknown, req) == pytest.approx(0.3 * 10)
    assert default_score(on_demand, req) > default_score(unknown, req)


def test_a_missing_rate_counts_as_ten_percent_in_the_filter_as_in_the_score() -> None:
    # Seed filter: `undefined <= 0.1` is false, so a missing rate was removed while its score assumed 0.1.
    unknown = offer("unknown", "10", rate=None)
    kept = find_optimal_placement(
        WorkloadRequirements(max_interruption_rate=DEFAULT_INTERRUPTION_RATE), [unknown]
    )
    assert kept.instance_type == "unknown"
    with pytest.raises(NoSuitableInstanceError):
        find_optimal_placement(WorkloadRequirements(max_interruption_rate=0.05), [unknown])


def test_max_price_zero_is_a_real_limit() -> None:
    # Seed: !maxPricePerHour is true for 0, which switched the filter off.
    with pytest.raises(NoSuitableInstanceError) as info:
        find_optimal_placement(WorkloadRequirements(max_price_per_hour=Decimal(0)), [offer("p5", "12")])
    assert {f.name: f.removed for f in info.value.removed_by}["maxPricePerHour"] == 1
    free = offer("free", "0")
    assert (
        find_optimal_placement(WorkloadRequirements(max_price_per_hour=Decimal(0)), [free]).instance_type
        == "free"
    )


def test_max_interruption_rate_zero_is_a_real_limit() -> None:
    # Seed: !maxInterruptionRate is true for 0, which switched the filter off.
    req = WorkloadRequirements(max_interruption_rate=0.0)
    prices = [offer("spot", "12", rate=0.05), offer("on-demand", "55", rate=0.0, spot=False)]
    assert find_optimal_placement(req, prices).instance_type == "on-demand"


def test_an_empty_gpu_type_is_invalid_not_any_gpu() -> None:
    # Seed: !"" is true, so gpuType "" matched every offer.
    with pytest.raises(InvalidSpecError) as info:
        WorkloadRequirements(gpu_type="")
    assert info.value.field == "gpuType"


def test_gpu_count_zero_means_no_gpu_needed_and_gpus_are_no_discount() -> None:
    req = WorkloadRequirements(min_cpu=8, min_memory_gb=32, gpu_count=0)
    gpu_box = offer("p4d", "2.47", gpu_model="A100", vcpu=96, memory_gb=1152)
    cpu = cpu_box("m5.2xlarge", "0.38", vcpu=8, memory_gb=32)
    assert price_basis_per_hour(gpu_box, req) == Decimal("2.47")  # per instance-hour, not $0.31/GPU-h
    assert find_optimal_placement(req, [gpu_box, cpu]).instance_type == "m5.2xlarge"


def test_efficiency_of_an_offer_without_cpu_figures_is_a_number_not_nan() -> None:
    # Seed: Math.min(1, 0 / 0) is NaN, and a NaN score sorts arbitrarily.
    req = WorkloadRequirements()
    unknown_specs = offer("unknown", "3", vcpu=0, memory_gb=0)
    assert math.isfinite(seed_score(unknown_specs, req))
    assert math.isfinite(default_score(unknown_specs, req))


# ---- the scorers ------------------------------------------------------------------------------------------


def test_seed_scorer_is_the_seed_formula() -> None:
    req = WorkloadRequirements(min_cpu=8, min_memory_gb=32)
    o = offer("g5", "2.5", gpu_count=1, vcpu=16, memory_gb=64, rate=0.05)
    # priceScore 100 - 25 = 75; availability 95; efficiency ((8/16 + 32/64) / 2) * 50 = 25
    assert seed_score(o, req) == pytest.approx(75 * 0.5 + 95 * 0.3 + 25 * 0.2)
    # Above $10/h the price term is 0: a $12 and a $50 8-GPU box differ only by availability.
    assert seed_score(offer("a", "12", rate=0.1), req) == seed_score(offer("b", "50", rate=0.1), req)


def test_default_scorer_prices_per_gpu_hour_on_a_fixed_scale() -> None:
    req = WorkloadRequirements(min_cpu=96, min_memory_gb=1024, gpu_count=8)
    o = offer("p5", "16", vcpu=192, memory_gb=2048, rate=0.1)  # $2.00/GPU-h
    assert price_basis_per_hour(o, req) == Decimal("2")
    assert price_score(Decimal("2")) == pytest.approx(50.0)
    assert price_score(Decimal("8")) == pytest.approx(20.0)
    efficiency = (96 / 192 + 1024 / 2048) / 2
    assert default_score(o, req) == pytest.approx(0.6 * 50 + 0.3 * 90 + 0.1 * efficiency * 100)


def test_default_scorer_picks_the_cheaper_gpu_hour_where_the_seed_cannot_tell() -> None:
    req = WorkloadRequirements(gpu_count=8)
    a100 = offer("p4d", "21.96", gpu_model="A100", vcpu=96, memory_gb=1152, rate=0.1)  # $2.75/GPU-h
    h100 = offer("p5", "55.04", rate=0.1)  # $6.88/GPU-h
    assert find_optimal_placement(req, [h100, a100]).instance_type == "p4d"
    # The seed scorer scores both 0 on price: it cannot see a $33/h difference.
    assert seed_score(a100, req) == seed_score(h100, req)


def test_default_scorer_charges_the_whole_box_for_the_gpus_asked_for() -> None:
    # 1 GPU asked: an 8xH100 at $15.20/h ($1.90/GPU-h) costs $15.20 per GPU-hour used; the 1xH100 wins.
    one = WorkloadRequirements(gpu_count=1, gpu_type="H100")
    small = offer("1xH100", "3.29", gpu_count=1, vcpu=26, memory_gb=225)
    big = offer("8xH100", "15.20", gpu_count=8, vcpu=208, memory_gb=1800)
    assert price_basis_per_hour(big, one) == Decimal("15.20")
    assert find_optimal_placement(one, [big, small]).instance_type == "1xH100"
    # Only the model given: the workload takes the whole box, so the offer's own $/GPU-h counts.
    any_count = WorkloadRequirements(gpu_type="H100")
    assert price_basis_per_hour(big, any_count) == Decimal("1.9")
    assert find_optimal_placement(any_count, [big, small]).instance_type == "8xH100"


def test_unknown_scorer_is_an_invalid_spec() -> None:
    with pytest.raises(InvalidSpecError) as info:
        find_optimal_placement(WorkloadRequirements(), [offer()], scorer="cheapest")
    assert info.value.field == "scorer"


def test_bandwidth_is_accepted_and_reported_as_unchecked() -> None:
    decision = find_optimal_placement(WorkloadRequirements(network_bandwidth_gbps=100), [offer()])
    assert any(r.code == "bandwidth_not_checked" for r in decision.reasons)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_cpu": -1},
        {"gpu_count": float("nan")},
        {"max_interruption_rate": 1.5},
        {"max_price_per_hour": Decimal(-1)},
    ],
)
def test_invalid_requirements_name_the_field(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidSpecError):
        WorkloadRequirements(**kwargs)  # type: ignore[arg-type]


# ---- invariants -----------------------------------------------------------------------------------------

REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
MODELS = ("H100", "A100", "T4")

offers_st = st.builds(
    offer,
    instance_type=st.sampled_from(("a", "b", "c", "d")),
    price=st.decimals(min_value=Decimal("0.05"), max_value=Decimal("120"), places=2),
    region=st.sampled_from(REGIONS),
    zone=st.sampled_from(("z1", "z2", None)),
    gpu_model=st.sampled_from(MODELS),
    gpu_count=st.sampled_from((1, 2, 4, 8)),
    vcpu=st.sampled_from((4, 16, 96, 192)),
    memory_gb=st.sampled_from((16, 64, 1152, 2048)),
    rate=st.one_of(st.none(), st.sampled_from((0.0, 0.05, 0.1, 0.15, 0.25))),
    spot=st.booleans(),
)
requirements_st = st.builds(
    WorkloadRequirements,
    min_cpu=st.sampled_from((1, 8, 96)),
    min_memory_gb=st.sampled_from((0, 32, 1024)),
    gpu_count=st.one_of(st.none(), st.sampled_from((0, 1, 4, 8))),
    gpu_type=st.one_of(st.none(), st.sampled_from(MODELS)),
    preferred_regions=st.one_of(st.just(()), st.tuples(st.sampled_from(REGIONS))),
    max_price_per_hour=st.one_of(st.none(), st.decimals(min_value=0, max_value=100, places=2)),
    max_interruption_rate=st.one_of(st.none(), st.sampled_from((0.0, 0.05, 0.1, 0.2))),
)


def _passes_every_filter(o: Offer, req: WorkloadRequirements) -> bool:
    rate = DEFAULT_INTERRUPTION_RATE if o.interruption_rate is None else o.interruption_rate
    return (
        o.vcpu >= req.min_cpu
        and o.memory_gb >= req.min_memory_gb
        and (req.gpu_count is None or o.gpu_count >= req.gpu_count)
        and (req.gpu_type is None or o.gpu_model == req.gpu_type)
        and (req.max_price_per_hour is None or o.price_per_hour <= req.max_price_per_hour)
        and (req.max_interruption_rate is None or rate <= req.max_interruption_rate)
    )


def _decide(req: WorkloadRequirements, prices: list[Offer], scorer: str = "default") -> PlacementDecision:
    try:
        return find_optimal_placement(req, prices, scorer=scorer)
    except NoSuitableInstanceError:
        assume(False)
        raise


@given(
    req=requirements_st, prices=st.lists(offers_st, max_size=10), scorer=st.sampled_from(("default", "seed"))
)
def test_the_winner_passes_every_filter_and_respects_region_preference(
    req: WorkloadRequirements, prices: list[Offer], scorer: str
) -> None:
    fitting = [o for o in prices if _passes_every_filter(o, req)]
    if not fitting:
        with pytest.raises(NoSuitableInstanceError) as info:
            find_optimal_placement(req, prices, scorer=scorer)
        assert sum(f.removed for f in info.value.removed_by) == len(prices)
        return
    decision = find_optimal_placement(req, prices, scorer=scorer)
    assert _passes_every_filter(decision.offer, req)
    assert sum(f.removed for f in decision.removed_by) == len(prices) - len(fitting)
    if any(o.region in req.preferred_regions for o in fitting):
        assert decision.region in req.preferred_regions
    for alt in decision.alternatives:
        assert _passes_every_filter(alt.offer, req) and alt.score <= decision.score


@given(
    req=requirements_st,
    prices=st.lists(offers_st, min_size=1, max_size=8),
    pick=st.integers(min_value=0),
    extra_price=st.decimals(min_value=Decimal("0.01"), max_value=Decimal("50"), places=2),
    worse_rate=st.sampled_from((0.0, 0.05, 0.3)),
    kind=st.sampled_from(("filtered", "dominated")),
    position=st.integers(min_value=0),
)
def test_an_irrelevant_candidate_never_changes_the_default_winner(
    req: WorkloadRequirements,
    prices: list[Offer],
    pick: int,
    extra_price: Decimal,
    worse_rate: float,
    kind: str,
    position: int,
) -> None:
    before = _decide(req, prices)
    if kind == "filtered":
        base = prices[pick % len(prices)]
        intruder = replace(base, instance_type="intruder", vcpu=req.min_cpu - 1, price_per_hour=Decimal(0))
    else:
        # Dominated by a scored offer: same shape and region, dearer, no more reliable.
        pool = [before.offer, *(a.offer for a in before.alternatives)]
        base = pool[pick % len(pool)]
        base_rate = DEFAULT_INTERRUPTION_RATE if base.interruption_rate is None else base.interruption_rate
        intruder = replace(
            base,
            instance_type="intruder",
            price_per_hour=base.price_per_hour + extra_price,
            interruption_rate=max(base_rate, worse_rate),
        )
    after_prices = list(prices)
    after_prices.insert(position % (len(prices) + 1), intruder)
    after = find_optimal_placement(req, after_prices)
    assert after.offer == before.offer
    assert after.score == before.score


@given(req=requirements_st, prices=st.lists(offers_st, min_size=1, max_size=8), data=st.data())
def test_the_winner_does_not_depend_on_the_order_of_the_price_list(
    req: WorkloadRequirements, prices: list[Offer], data: st.DataObject
) -> None:
    before = _decide(req, prices)
    shuffled = data.draw(st.permutations(prices))
    after = find_optimal_placement(req, list(shuffled))
    assert after.offer == before.offer
    assert [a.offer for a in after.alternatives] == [a.offer for a in before.alternatives]


def test_newest_observation_breaks_a_full_tie() -> None:
    old = replace(offer("same", "12"), observed_at=datetime(2025, 6, 1, tzinfo=UTC))
    new = replace(offer("same", "12"), observed_at=datetime(2025, 6, 28, tzinfo=UTC))
    assert find_optimal_placement(WorkloadRequirements(), [old, new]).offer.observed_at == new.observed_at
