"""The engine buys by expected cost per unit of work: throughput, spot risk, and contracts sized to demand."""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.contracts import (
    expected_boot_s,
    expected_downtime_s,
    interruption_calibration,
    known_work_s,
    run_work_s,
    time_held_s,
)
from scalar.domain.gpus import relative_throughput
from scalar.domain.market import CAUSE_PREEMPTED, NodeState
from scalar.domain.offers import AWS, PRIME, Offer
from scalar.domain.tier import Tier
from scalar.engine import Controller, JobSpec
from scalar.engine.actions import BuyCapacity
from scalar.engine.config import ConfigError, ControllerConfig, ScaleGroupConfig
from scalar.engine.cost_band import HostCosts
from tests.engine.builders import (
    at,
    buys,
    filled,
    market,
    node_state,
    ready,
    sf_offer,
    spec,
    started,
    starts,
    submit,
)


def aws(model: str, price_per_gpu: str, *, spot: bool, rate: float | None = None) -> Offer:
    return Offer(
        provider=AWS,
        instance_type=f"{model.lower()}-{'spot' if spot else 'od'}",
        region="us-east-1",
        price_per_hour=Decimal(price_per_gpu) * 8,
        gpu_model=model,
        gpu_count=8,
        gpu_memory_gb=80,
        vcpu=96,
        memory_gb=1024,
        spot=spot,
        interruption_rate=rate,
    )


SPOT = aws("A100", "0.60", spot=True, rate=0.10)
ON_DEMAND = aws("A100", "1.30", spot=False)
CONFIG = ControllerConfig(
    scale_groups=(
        ScaleGroupConfig(name="spot", providers=(AWS,), spot=True, max_slices=8),
        ScaleGroupConfig(name="od", providers=(AWS,), spot=False, max_slices=8),
    ),
    interruption_period_hours=1.0,  # the rates read per hour, as Protocol B's market reads them
    flex_batch_wait_s=0,
)


def _bought(job_hours: float, checkpoint_s: float | None) -> str:
    c = Controller(CONFIG)
    job = replace(
        spec("j", 8, tier="FLEX", vram=40, duration=job_hours * 3600), checkpoint_interval_s=checkpoint_s
    )
    [buy] = buys(c.step(at(0), [market(SPOT, ON_DEMAND, book=None), *submit(job)]))
    return "spot" if buy.request.spot else "on-demand"


def test_a_long_uncheckpointed_flex_job_goes_on_demand_a_checkpointing_or_short_one_on_spot() -> None:
    # 10%/h: a 20-hour job without checkpoints expects 2.4x its work redone; with 30-minute checkpoints 3%.
    assert _bought(20, None) == "on-demand"
    assert _bought(20, 1800) == "spot"
    assert _bought(0.5, None) == "spot"
    # The purchase names what it beat, with the numbers: spot's expected rework.
    c = Controller(CONFIG)
    job = spec("long", 8, tier="FLEX", vram=40, duration=20 * 3600)
    [buy] = buys(c.step(at(0), [market(SPOT, ON_DEMAND, book=None), *submit(job)]))
    assert "it beat aws/a100-spot" in buy.reason.message and "rework" in buy.reason.message


CHEAP_SPOT = aws("A100", "0.10", spot=True, rate=0.10)


def _bought_cheap(job_hours: float, config: ControllerConfig = CONFIG) -> BuyCapacity:
    c = Controller(config)
    job = spec("j", 8, tier="FLEX", vram=40, duration=job_hours * 3600)
    [buy] = buys(c.step(at(0), [market(CHEAP_SPOT, ON_DEMAND, book=None), *submit(job)]))
    return buy


def test_a_flex_job_is_not_sent_where_it_expects_to_redo_more_than_its_work() -> None:
    # Spot at 1/13 of on-demand, 10%/h: a 15-hour job without checkpoints expects 144% of its work redone,
    # still 5x cheaper per unit of work than on-demand; it would take about 2.4x its run. It goes on demand.
    buy = _bought_cheap(15)
    assert not buy.request.spot
    assert "it beat aws/a100-spot/spot/FLEX would host it at $1.9524/work-h" in buy.reason.message
    assert "+144% rework, over the 100% of its work a FLEX job may be expected to redo" in buy.reason.message
    # Without the limit, the cheapest expected cost decides: spot.
    assert _bought_cheap(15, replace(CONFIG, flex_max_rework=math.inf)).request.spot
    # A 5-hour job expects 30%: spot, within the limit; a looser limit keeps the 15-hour one on spot.
    assert _bought_cheap(5).request.spot
    assert _bought_cheap(15, replace(CONFIG, flex_max_rework=2.0)).request.spot


def test_the_rework_limit_is_checked_when_configured() -> None:
    for bad in (-0.5, True, "1", math.nan):
        with pytest.raises(ConfigError) as err:
            replace(CONFIG, flex_max_rework=bad)
        assert err.value.field == "flex_max_rework"
        assert "inf for no limit" in str(err.value)
    assert ControllerConfig.from_dict({"flex_max_rework": 0}).procurement.flex_max_rework == 0.0
    assert ControllerConfig.from_dict({"flex_max_rework": math.inf}).flex_max_rework == math.inf


def test_flex_work_goes_to_the_cheapest_per_work_unit_not_per_gpu_hour() -> None:
    # An H100 does several A100-hours of batch work per hour: at 1.6x the GPU-hour price it is cheaper work.
    a100 = aws("A100", "1.00", spot=False)
    h100 = aws("H100", "1.60", spot=False)
    c = Controller(CONFIG)
    [buy] = buys(c.step(at(0), [market(a100, h100, book=None), *submit(spec("f", 8, tier="FLEX", vram=40))]))
    assert buy.request.gpu_model == "H100"
    # A FAST service holds its GPU for its wall time whatever the model: $ per GPU-hour decides.
    c = Controller(CONFIG)
    [buy] = buys(c.step(at(0), [market(a100, h100, book=None), *submit(spec("s", 8, vram=40))]))
    assert buy.request.gpu_model == "A100"


def test_a_block_purchase_says_the_lengths_it_beat_and_its_utilisation() -> None:
    c = Controller()
    [buy] = buys(c.step(at(0), [market(sf_offer()), *submit(spec("j", 8, duration=1800))]))
    text = buy.reason.message
    assert "contract: expected $" in text and "utilisation" in text and "beat" in text
    assert buy.request.duration_s == 2 * 3600


@settings(max_examples=25, deadline=None)
@given(gpus=st.integers(1, 8), duration=st.floats(60, 20_000))
def test_never_buys_when_free_capacity_fits(gpus: int, duration: float) -> None:
    c = Controller()
    [buy] = buys(c.step(at(0), [market(sf_offer()), *submit(spec("small", 1, vram=40, duration=30_000))]))
    c.step(at(10), [filled(buy, at(10))])
    assert [s.job_id for s in starts(c.step(at(20), ready("blk-1-n0", when=at(20))))] == ["small"]
    # 7 of the block's 8 GPUs are free for 9 hours: a job that fits them starts there, nothing is bought.
    actions = c.step(at(30), submit(spec("more", gpus - 1 or 1, vram=40, duration=duration)))
    assert buys(actions) == []
    assert [s.job_id for s in starts(actions)] == ["more"]


def test_a_bad_checkpoint_interval_is_refused_with_the_field() -> None:
    c = Controller(CONFIG)
    bad = replace(spec("bad", 8, tier="FLEX", vram=40), checkpoint_interval_s=-5.0)
    c.step(at(0), [market(SPOT, ON_DEMAND, book=None), *submit(bad)])
    job = c.job("bad")
    assert job is not None and job.state.value == "REJECTED"
    assert (
        job.reason is not None
        and "checkpoint_interval_s must be a number of seconds > 0" in job.reason.message
    )


def test_a_contract_is_sized_in_its_market_s_clock() -> None:
    """The same 30-minute job: at market time scale 1 a 2-hour block; where the seller's market runs 60x
    faster (the built-in market at ``time_scale`` 60), 30 engine minutes are 30 market hours, so the block
    lasts at least that (a shorter one would end under the job). Other sellers keep scale 1."""
    plain = Controller()
    [one] = buys(plain.step(at(0), [market(sf_offer()), *submit(spec("j", 8, duration=1800))]))
    fast = Controller(ControllerConfig(market_time_scales={"sfcompute": 60.0}))
    [sixty] = buys(fast.step(at(0), [market(sf_offer()), *submit(spec("j", 8, duration=1800))]))
    assert one.request.duration_s == 2 * 3600
    assert sixty.request.duration_s >= 30 * 3600 and sixty.request.duration_s % 3600 == 0
    assert ControllerConfig(market_time_scales={"sfcompute": 60.0}).time_scale("prime") == 1.0


@pytest.mark.parametrize("hours", [10, 100, 300])
def test_an_hourly_lease_outlives_twice_the_run_it_is_bought_for(hours: float) -> None:
    """An hourly node's lease costs nothing while unused: it is sized to twice the job's expected run on
    the offer's GPUs (a FLEX job's work over their throughput) plus the allowances, at least the contract
    length, so a job that runs past its estimate is not cut off by its own lease."""
    c = Controller(CONFIG)
    [buy] = buys(
        c.step(
            at(0),
            [
                market(ON_DEMAND, book=None),
                *submit(spec("j", 8, tier="FLEX", vram=40, duration=hours * 3600)),
            ],
        )
    )
    allowance = CONFIG.safety_margin_s + CONFIG.request_timeout_s + CONFIG.boot_timeout_s
    assert buy.request.duration_s == max(CONFIG.contract_length_s, math.ceil(2 * hours * 3600 + allowance))
    assert buy.request.duration_s >= 2 * hours * 3600


def test_a_bad_market_time_scale_is_refused_with_the_provider() -> None:
    with pytest.raises(ConfigError) as err:
        ControllerConfig.from_dict({"market_time_scales": {"sfcompute": 0}})
    assert err.value.field == "market_time_scales.sfcompute"


# A 4-GPU, 20-vCPU spot pod of the preferred small-job seller holds one 12-core 1-GPU service ($0.20/h for
# it); a 16-vCPU 1-GPU spot VM elsewhere holds it for $0.13/h, 1.54x less. Both 10% interruptions an hour.
POD = Offer(
    provider=PRIME,
    instance_type="4xV100-spot",
    region="fi",
    price_per_hour=Decimal("0.20"),
    gpu_model="V100",
    gpu_count=4,
    gpu_memory_gb=16,
    vcpu=20,
    memory_gb=90,
    spot=True,
    interruption_rate=0.10,
)
VM = Offer(
    provider=AWS,
    instance_type="1xT4-spot",
    region="us-east-1",
    price_per_hour=Decimal("0.13"),
    gpu_model="T4",
    gpu_count=1,
    gpu_memory_gb=16,
    vcpu=16,
    memory_gb=110,
    spot=True,
    interruption_rate=0.10,
)
SPOT_ONLY = ControllerConfig(
    scale_groups=(ScaleGroupConfig(name="spot", providers=(PRIME, AWS), spot=True, max_slices=8),),
    interruption_period_hours=1.0,
    fast_preference_limit=1.25,
)


def _service(hours: float) -> JobSpec:
    return spec("svc", 1, vram=16, cpu=12, ram=40, duration=hours * 3600, models=("V100", "T4"))


def test_a_short_fast_service_leaves_the_preferred_pod_seller_for_a_clearly_cheaper_host_a_long_one_stays() -> (
    None
):
    # 30 minutes at 10%/h: about 0.05 interruptions, one boot is all it waits for; the VM is 1.54x cheaper.
    [short] = buys(Controller(SPOT_ONLY).step(at(0), [market(POD, VM, book=None), *submit(_service(0.5))]))
    assert short.request.provider == AWS
    # 24 hours: about 2.5 interruptions, each a restart that waits for a new node: it stays on the pods.
    [long] = buys(Controller(SPOT_ONLY).step(at(0), [market(POD, VM, book=None), *submit(_service(24))]))
    assert long.request.provider == PRIME
    # Within the limit (1.25x) the seed's preference holds for a short service too.
    near = replace(VM, price_per_hour=Decimal("0.17"))
    [kept] = buys(Controller(SPOT_ONLY).step(at(0), [market(POD, near, book=None), *submit(_service(0.5))]))
    assert kept.request.provider == PRIME
    # Off (the default), the seed's preference always holds.
    off = replace(SPOT_ONLY, fast_preference_limit=None)
    [pinned] = buys(Controller(off).step(at(0), [market(POD, VM, book=None), *submit(_service(0.5))]))
    assert pinned.request.provider == PRIME


@pytest.mark.parametrize("bad", [0.9, -1.0, float("nan"), True])
def test_a_bad_fast_preference_limit_is_refused_with_the_field(bad: float) -> None:
    with pytest.raises(ConfigError) as err:
        ControllerConfig(fast_preference_limit=bad)
    assert err.value.field == "fast_preference_limit"
    assert ControllerConfig.from_dict({"fast_preference_limit": 1.25}).fast_preference_limit == 1.25


def test_a_fast_service_back_from_an_interruption_restarts_on_the_preferred_pod_seller() -> None:
    c = Controller(SPOT_ONLY)
    [first] = buys(c.step(at(0), [market(POD, VM, book=None), *submit(_service(0.5))]))
    assert first.request.provider == AWS
    c.step(at(10), [filled(first, at(10))])
    assert [s.job_id for s in starts(c.step(at(300), ready("blk-1-n0", when=at(300))))] == ["svc"]
    actions = c.step(at(600), [node_state("blk-1-n0", NodeState.TERMINATED, at(600), why="preempted")])
    [again] = buys(actions)
    assert again.request.provider == PRIME


PUBLISHED_ONLY = replace(CONFIG, interruption_prior=math.inf)  # the hazard stays the published one


def _after_a_lost_run(
    told_hours: float, ran_hours: float, config: ControllerConfig = PUBLISHED_ONLY
) -> tuple[str, str]:
    """A FLEX job told ``told_hours`` starts on spot, runs ``ran_hours`` and the seller preempts its node:
    where the next purchase goes, and its reason."""
    c = Controller(config)
    job = spec("j", 8, tier="FLEX", vram=40, duration=told_hours * 3600)
    [first] = buys(c.step(at(0), [market(SPOT, ON_DEMAND, book=None), *submit(job)]))
    assert first.request.spot
    c.step(at(10), [filled(first, at(10))])
    assert [s.job_id for s in starts(c.step(at(300), ready("blk-1-n0", when=at(300))))] == ["j"]
    c.step(at(301), [started("j", "blk-1-n0")])
    lost = 301 + ran_hours * 3600
    gone = node_state("blk-1-n0", NodeState.TERMINATED, at(lost), why="preempted", cause=CAUSE_PREEMPTED)
    [again] = buys(c.step(at(lost), [gone]))
    return ("spot" if again.request.spot else "on-demand"), again.reason.message


def test_a_run_interrupted_after_more_work_than_the_estimate_reprices_the_job_at_that_length() -> None:
    # Told 2 hours, a 10%/h spot node costs it ~11% rework: spot. It ran 20 hours and had not finished: the
    # estimate is proven wrong and it is priced as a 40-hour job, whose rework on spot loses to on-demand.
    where, why = _after_a_lost_run(2, 20)
    assert where == "on-demand"
    assert "over 40.0 h" in why
    # A run shorter than the estimate teaches nothing: the estimate stands, and so does spot.
    assert _after_a_lost_run(2, 0.5)[0] == "spot"


def test_a_job_whose_run_outlived_its_estimate_is_expected_to_need_twice_that_run_everywhere() -> None:
    c = Controller(PUBLISHED_ONLY)
    job = spec("j", 8, tier="FLEX", vram=40, duration=2 * 3600)
    [first] = buys(c.step(at(0), [market(SPOT, ON_DEMAND, book=None), *submit(job)]))
    c.step(at(10), [filled(first, at(10))])
    c.step(at(300), ready("blk-1-n0", when=at(300)))
    c.step(at(301), [started("j", "blk-1-n0")])
    gone = node_state(
        "blk-1-n0", NodeState.TERMINATED, at(301 + 5 * 3600), why="preempted", cause=CAUSE_PREEMPTED
    )
    c.step(at(301 + 5 * 3600), [gone])
    rec = c.state.jobs["j"]
    assert rec.longest_run_s == pytest.approx(5 * 3600)
    # The packer, contract sizing and the cost band read the job: 10 hours from here on; the spec keeps 2.
    assert rec.job is not None and rec.job.expected_duration_sec == pytest.approx(10 * 3600)
    assert rec.spec.expected_duration_sec == 2 * 3600


@given(
    expected=st.floats(min_value=1, max_value=1e7),
    longest=st.floats(min_value=0, max_value=1e7),
    more=st.floats(min_value=0, max_value=1e7),
)
def test_known_work_never_below_what_is_known_grows_with_the_evidence_and_is_stable(
    expected: float, longest: float, more: float
) -> None:
    known = known_work_s(expected, longest)
    assert known >= expected and known >= longest
    assert known_work_s(expected, longest + more) >= known  # a longer lost run never shortens the job
    assert known_work_s(known, longest) == known  # the job's new length, read again, stays put


def test_a_lost_run_is_remembered_by_its_work_at_the_gpus_throughput() -> None:
    assert run_work_s(3600, "A100", Tier.FLEX) == pytest.approx(3600)
    assert run_work_s(3600, "H100", Tier.FLEX) == pytest.approx(3600 * relative_throughput("H100"))
    assert run_work_s(3600, "H100", Tier.FAST) == 3600  # a service's wall time
    assert run_work_s(-5, "A100", Tier.FLEX) == 0.0
    assert known_work_s(7200, 3600) == 7200  # the estimate, when no run outlived it
    assert known_work_s(7200, 7200) == 7200
    assert known_work_s(7200, 9000) == 18000  # proven wrong: as much again as the run that outlived it


def _second_purchase_after_quiet_spot_hours(config: ControllerConfig, hours: float) -> str:
    """A checkpointing job holds a spot node ``hours`` without an interruption; then a 20-hour job without
    checkpoints needs a node of its own: where it is bought."""
    c = Controller(config)
    holder = replace(spec("holder", 8, tier="FLEX", vram=40, duration=400 * 3600), checkpoint_interval_s=1800)
    [first] = buys(c.step(at(0), [market(SPOT, ON_DEMAND, book=None), *submit(holder)]))
    assert first.request.spot
    c.step(at(10), [filled(first, at(10))])
    c.step(at(300), ready("blk-1-n0", when=at(300)))
    c.step(at(301), [started("holder", "blk-1-n0")])
    later = 301 + hours * 3600
    [second] = buys(c.step(at(later), submit(spec("long", 8, tier="FLEX", vram=40, duration=20 * 3600))))
    return "spot" if second.request.spot else "on-demand"


def test_spot_risk_is_learnt_from_the_node_hours_held_without_an_interruption() -> None:
    # Published 10%/h: a 20-hour uncheckpointed job goes on demand. After 100 node-hours of spot with no
    # preemption where 10.5 were due, the hazard is priced at (5 + 0) / (5 + 10.5) of it: 0.034/h, 44% rework.
    assert _second_purchase_after_quiet_spot_hours(PUBLISHED_ONLY, 100) == "on-demand"
    assert _second_purchase_after_quiet_spot_hours(CONFIG, 100) == "spot"
    # An hour of quiet history barely moves the published rate.
    assert _second_purchase_after_quiet_spot_hours(CONFIG, 1) == "on-demand"


def test_a_preemption_counts_against_its_shape_and_a_release_does_not() -> None:
    c = Controller(CONFIG)
    [first] = buys(
        c.step(
            at(0),
            [market(SPOT, ON_DEMAND, book=None), *submit(spec("a", 8, tier="FLEX", vram=40, duration=1800))],
        )
    )
    c.step(at(10), [filled(first, at(10))])
    c.step(at(300), ready("blk-1-n0", when=at(300)))
    gone = node_state("blk-1-n0", NodeState.TERMINATED, at(3610), why="preempted", cause=CAUSE_PREEMPTED)
    c.step(at(3610), [gone])
    [(group, (n, held_s))] = c.state.spot_seen.items()
    assert n == 1 and held_s == pytest.approx(3600, abs=1)
    assert c.state.groups[group].offer is not None and c.state.groups[group].offer.spot
    # /autoscaler/status says how spot is priced now: one seen where 0.105 were due, (5 + 1) / (5 + 0.105)
    risk = c.autoscaler_status().spot_risk
    assert risk is not None and risk.seen == 1
    assert risk.expected == pytest.approx(0.105, abs=0.001)
    assert risk.factor == pytest.approx(6 / 5.105, rel=1e-3)
    assert [p for p, _, _ in risk.boots] == [AWS]


@given(seen=st.integers(0, 1000), expected=st.floats(0.0, 1e5), prior=st.floats(0.01, 1e4))
def test_the_calibration_lies_between_the_published_rates_and_what_was_seen(
    seen: int, expected: float, prior: float
) -> None:
    factor = interruption_calibration(seen, expected, prior)
    observed = seen / expected if expected > 0 else math.inf
    assert min(1.0, observed) - 1e-12 <= factor <= max(1.0, observed) + 1e-12
    assert interruption_calibration(seen, expected, math.inf) == 1.0
    assert interruption_calibration(0, 0.0, prior) == 1.0  # no history: the published rates
    assert interruption_calibration(seen + 1, expected, prior) > factor  # one more preemption: riskier


def _fast_purchase(config: ControllerConfig, hours: float) -> BuyCapacity:
    """Where an 8-GPU FAST service of ``hours`` is bought on AWS: spot at 10%/h or on demand."""
    job = spec("svc", 8, tier="FAST", vram=40, duration=hours * 3600)
    [buy] = buys(Controller(config).step(at(0), [market(SPOT, ON_DEMAND, book=None), *submit(job)]))
    return buy


def test_a_fast_wait_limit_keeps_a_long_service_off_hosts_whose_restarts_would_break_it() -> None:
    # No limit (the default): a service pays no rework, so spot's lower price wins.
    assert _fast_purchase(CONFIG, 24).request.spot
    # 600 s: 24 h at 0.105/h is 2.5 expected interruptions, each a 300 s VM boot, plus the first boot:
    # ~1,060 s on spot, 300 s on demand.
    limited = replace(CONFIG, fast_max_wait_s=600.0)
    buy = _fast_purchase(limited, 24)
    assert not buy.request.spot
    assert "FAST wait target" in buy.reason.message
    # A short service expects no interruption: spot keeps it within the limit.
    assert _fast_purchase(limited, 0.5).request.spot


def test_a_seller_s_boots_are_learnt_from_its_nodes() -> None:
    c = Controller(CONFIG)
    [first] = buys(
        c.step(at(0), [market(SPOT, ON_DEMAND, book=None), *submit(spec("a", 8, tier="FLEX", vram=40))])
    )
    c.step(at(10), [filled(first, at(10))])
    created = c.state.nodes["blk-1-n0"].created_at
    c.step(at(130), ready("blk-1-n0", when=at(130)))
    assert c.state.boot_seen == {AWS: (1, (at(130) - created).total_seconds())}
    # the prior (300 s for a cloud VM) counts as one boot
    assert expected_boot_s(AWS, *c.state.boot_seen[AWS]) == pytest.approx(
        (300 + 130 - (created - at(0)).total_seconds()) / 2
    )


def test_a_service_waits_a_boot_first_and_one_per_expected_interruption() -> None:
    assert expected_downtime_s(0.0, 24, 300, first_boot=True) == 300  # on demand: the first boot only
    assert expected_downtime_s(0.1, 24, 300, first_boot=False) == pytest.approx(720)
    assert expected_downtime_s(0.1, 24, 300, first_boot=True) == pytest.approx(1020)
    assert expected_downtime_s(math.inf, 1, 300, first_boot=False) == math.inf
    assert expected_boot_s(PRIME, 0, 0.0) == 120  # a pod seller's prior
    assert expected_boot_s("somewhere-new", 0, 0.0) == 300
    assert expected_boot_s(PRIME, 3, 90.0) == pytest.approx((120 + 90) / 4)


@pytest.mark.parametrize("key", ["interruption_prior", "fast_max_wait_s", "fast_restart_wait_s"])
@pytest.mark.parametrize("bad", [0, -1.0, math.nan, True, "10"])
def test_bad_spot_learning_and_fast_wait_settings_are_refused_with_the_field(key: str, bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        ControllerConfig.from_dict({key: bad})
    assert err.value.field == key
    assert ControllerConfig.from_dict({key: 7.5}).procurement == replace(
        ControllerConfig().procurement, **{key: 7.5}
    )


# An 8-GPU pod of a seller whose nodes boot in about two minutes, on demand, dearer than AWS's spot VMs.
POD_8 = Offer(
    provider=PRIME,
    instance_type="8xA100-pod",
    region="fi",
    price_per_hour=Decimal("1.00") * 8,
    gpu_model="A100",
    gpu_count=8,
    gpu_memory_gb=80,
    vcpu=96,
    memory_gb=1024,
)
RESTARTS = ControllerConfig(
    scale_groups=(
        ScaleGroupConfig(name="spot", providers=(AWS,), spot=True, max_slices=8),
        ScaleGroupConfig(name="pods", providers=(PRIME,), spot=False, max_slices=8),
    ),
    interruption_period_hours=1.0,
)


def _restart_of_a_service(config: ControllerConfig, hours: float = 2.0) -> BuyCapacity:
    """An 8-GPU FAST service of ``hours`` starts on an AWS spot VM that took 320 s to boot; an hour later
    the VM is preempted: the purchase that brings the service back."""
    c = Controller(config)
    job = spec("svc", 8, vram=40, duration=hours * 3600)
    [first] = buys(c.step(at(0), [market(SPOT, POD_8, book=None), *submit(job)]))
    assert (first.request.provider, first.request.spot) == (AWS, True)  # the cheapest host for a first run
    c.step(at(10), [filled(first, at(10))])
    assert [s.job_id for s in starts(c.step(at(330), ready("blk-1-n0", when=at(330))))] == ["svc"]
    c.step(at(331), [started("svc", "blk-1-n0")])
    gone = node_state("blk-1-n0", NodeState.TERMINATED, at(3600), why="preempted", cause=CAUSE_PREEMPTED)
    [again] = buys(c.step(at(3600), [gone]))
    return again


def test_a_service_back_from_an_interruption_restarts_where_it_is_back_within_its_wait_target() -> None:
    # It waited 330 s for its first node: 270 s are left of the 600. Another VM takes ~310 s (the 300 s
    # prior and the 320 s seen) plus the interruptions expected over the hour left; a pod about 120 s.
    again = _restart_of_a_service(RESTARTS)
    assert again.request.provider == PRIME
    assert "waiting 352 s (a boot of 310 s first" in again.reason.message
    assert "over the 270 s left of the 600 s a restarted FAST service may wait" in again.reason.message
    # Off (inf), a restart is priced like a first run: the spot VM again.
    off = _restart_of_a_service(replace(RESTARTS, fast_restart_wait_s=math.inf))
    assert (off.request.provider, off.request.spot) == (AWS, True)
    # A longer target leaves room for another VM boot.
    roomy = _restart_of_a_service(replace(RESTARTS, fast_restart_wait_s=1200.0))
    assert (roomy.request.provider, roomy.request.spot) == (AWS, True)
    # No host can bring it back in time (a 100 s target): the one back soonest.
    tight = _restart_of_a_service(replace(RESTARTS, fast_restart_wait_s=100.0))
    assert tight.request.provider == PRIME


def test_a_job_s_time_held_is_the_union_of_its_placements() -> None:
    assert time_held_s([]) == 0.0
    assert time_held_s([(0.0, 10.0), (5.0, 20.0), (30.0, 40.0)]) == 30.0  # a gang's parts overlap
    assert time_held_s([(30.0, 40.0), (0.0, 10.0), (2.0, 3.0)]) == 20.0
    assert expected_downtime_s(0.0, 5.0, 120.0, first_boot=True) == 120.0  # on demand: the next boot only
    assert expected_downtime_s(0.1, 5.0, 120.0, first_boot=True) == pytest.approx(180.0)


@given(spans=st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 1e4)), max_size=12))
def test_time_held_never_exceeds_the_span_it_covers_nor_the_sum_of_its_parts(
    spans: list[tuple[float, float]],
) -> None:
    intervals = [(a, a + d) for a, d in spans]
    held = time_held_s(intervals)
    assert held <= sum(d for _, d in spans) + 1e-6
    if intervals:
        assert held <= max(b for _, b in intervals) - min(a for a, _ in intervals) + 1e-6
        assert held >= max(d for _, d in spans) - 1e-6


@given(
    waits=st.dictionaries(st.sampled_from("abcdef"), st.floats(0, 5000), min_size=1),
    preferred=st.sets(st.sampled_from("abcdef")),
    budget=st.floats(0, 3000),
)
def test_a_restarted_service_goes_where_it_is_back_in_time_else_soonest(
    waits: dict[str, float], preferred: set[str], budget: float
) -> None:
    priced = {v: Decimal(1) for v in waits}
    costs = {v: c for v, c in priced.items() if v in preferred} or priced
    kept = HostCosts._back_soon(costs, priced, waits, budget)
    assert kept and set(kept) <= set(priced)
    if any(w <= budget for w in waits.values()):
        assert all(waits[v] <= budget for v in kept)
        if any(waits[v] <= budget for v in costs):
            assert set(kept) <= set(costs)  # the preferred provider's hosts first, as for any FAST job
    else:
        assert all(waits[v] == min(waits.values()) for v in kept)


def test_a_spot_order_leaves_room_for_the_price_to_move_and_never_passes_the_cap() -> None:
    # A 5-hour job goes on spot at $0.10/GPU-h: its limit is 10% over the price last seen, since spot prices
    # move before the order lands (an order at exactly the old price is refused when they rose).
    buy = _bought_cheap(5)
    assert buy.request.spot and buy.request.limit_price_per_gpu_hour == Decimal("0.11")
    assert "spot price in us-east-1 when last seen, $0.10/GPU-h, +10% for its move" in buy.reason.message
    # Configurable; 0 is the observed price itself.
    assert _bought_cheap(
        5, replace(CONFIG, spot_limit_headroom=0.25)
    ).request.limit_price_per_gpu_hour == Decimal("0.125")
    assert _bought_cheap(
        5, replace(CONFIG, spot_limit_headroom=0)
    ).request.limit_price_per_gpu_hour == Decimal("0.10")
    # On-demand prices do not move: the limit is the price (a 15-hour job goes on demand, above).
    on_demand = _bought_cheap(15)
    assert not on_demand.request.spot and on_demand.request.limit_price_per_gpu_hour == Decimal("1.30")
    # Never over the tier's cap: with FLEX capped at $0.105/GPU-h the limit is the cap.
    tiers = {
        **CONFIG.tiers,
        Tier.FLEX: replace(CONFIG.tiers[Tier.FLEX], max_price_per_gpu_hour=Decimal("0.105")),
    }
    assert _bought_cheap(5, replace(CONFIG, tiers=tiers)).request.limit_price_per_gpu_hour == Decimal("0.105")


def test_the_spot_limit_headroom_is_checked_when_configured() -> None:
    for bad in (-0.1, 1.5, True, "0.1", math.nan):
        with pytest.raises(ConfigError) as err:
            replace(CONFIG, spot_limit_headroom=bad)
        assert err.value.field == "spot_limit_headroom"
        assert "0 for the price itself" in str(err.value)
    assert ControllerConfig.from_dict({"spot_limit_headroom": 0.2}).spot_limit_headroom == 0.2
