"""The engine buys by expected cost per unit of work: throughput, spot risk, and contracts sized to demand."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.market import NodeState
from scalar.domain.offers import AWS, PRIME, Offer
from scalar.engine import Controller, JobSpec
from scalar.engine.config import ConfigError, ControllerConfig, ScaleGroupConfig
from tests.engine.builders import (
    at,
    buys,
    filled,
    market,
    node_state,
    ready,
    sf_offer,
    spec,
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
