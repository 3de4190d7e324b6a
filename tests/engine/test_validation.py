"""Bad input is refused at submission with reasons; the config names the key it rejects."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from scalar.domain.tier import Tier
from scalar.engine import (
    ConfigError,
    Controller,
    ControllerConfig,
    JobState,
    ScaleGroupConfig,
    validate_job_spec,
)
from tests.engine.builders import at, market, prime_offer, sf_offer, spec, submit

OFFERS = (sf_offer("2.00"), prime_offer("2.50", gpus=2))


def codes(reasons: list) -> list[str]:  # type: ignore[type-arg]
    return [r.code for r in reasons]


def test_a_sound_job_has_no_problems() -> None:
    assert validate_job_spec(spec("ok", 8), ControllerConfig(), OFFERS) == []


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (spec("neg", -1), ["negative_gpus"]),
        (spec("tier", 1, tier="SLOW"), ["unknown_tier"]),
        (spec("vram", 1, vram=-4), ["invalid_vram_per_gpu_gb"]),
        (spec("dur", 1, duration=0), ["invalid_expected_duration_sec"]),
        (spec("", 1), ["invalid_job_id"]),
        (spec("models", 1, models=()), ["invalid_gpu_models"]),
        (replace(spec("half", 1), gpu_count=2.5), ["invalid_gpu_count"]),
        (replace(spec("nan", 1), ram_gb=float("nan")), ["invalid_ram_gb"]),
        (replace(spec("notier", 1), tier=None), ["unknown_tier"]),
        (spec("a#1", 1), ["invalid_job_id"]),
    ],
)
def test_spec_problems_are_named(job: object, expected: list[str]) -> None:
    assert codes(validate_job_spec(job, ControllerConfig())) == expected  # type: ignore[arg-type]
    # Inside a step the same spec becomes a REJECTED job, never an exception.
    c = Controller()
    c.step(at(0), [market(*OFFERS), *submit(job)])  # type: ignore[arg-type]
    assert [j.state for j in c.jobs()] == [JobState.REJECTED]


def test_vram_above_any_offered_gpu_is_refused_with_the_numbers() -> None:
    [reason] = validate_job_spec(spec("big", 1, vram=141), ControllerConfig(), OFFERS)
    assert (reason.code, reason.need, reason.have) == ("vram_too_large", 141.0, 80)
    assert "largest GPU on offer has 80 GB" in reason.message


def test_a_job_larger_than_any_gang_can_hold_is_refused() -> None:
    # Default max_slices 4 x slice_size 1 x 8 GPUs = 32 GPUs at most.
    assert validate_job_spec(spec("32", 32), ControllerConfig(), OFFERS) == []
    [reason] = validate_job_spec(spec("33", 33), ControllerConfig(), OFFERS)
    assert (reason.code, reason.need, reason.have) == ("too_large", 33, 32)
    bigger = ControllerConfig(scale_groups=(ScaleGroupConfig(max_slices=8),))
    assert validate_job_spec(spec("33", 33), bigger, OFFERS) == []


def test_a_gpu_model_nobody_offers_is_refused() -> None:
    [reason] = validate_job_spec(spec("b200", 1, models=("B200",)), ControllerConfig(), OFFERS)
    assert reason.code == "gpu_model_not_offered" and "offered: H100" in reason.message
    assert validate_job_spec(spec("h100", 1, models=("nvidia-h100",)), ControllerConfig(), OFFERS) == []


def test_cpu_beyond_every_node_is_refused() -> None:
    [reason] = validate_job_spec(spec("cpu", 1, cpu=500), ControllerConfig(), OFFERS)
    assert (reason.code, reason.have) == ("cpu_too_large", 96)


def test_without_offers_only_the_spec_itself_is_checked() -> None:
    assert validate_job_spec(spec("big", 1000, vram=500), ControllerConfig(), ()) == []


def test_an_invalid_submission_inside_step_becomes_a_rejected_job_not_an_exception() -> None:
    c = Controller()
    actions = c.step(at(0), [market(*OFFERS), *submit(spec("bad", -2, tier="nope"), spec("good", 2))])
    bad = c.job("bad")
    assert bad is not None and bad.state is JobState.REJECTED
    assert bad.reason is not None and bad.reason.code == "invalid_spec"
    assert (
        "gpu_count must be >= 0, got -2" in bad.reason.message and "unknown tier 'nope'" in bad.reason.message
    )
    assert [a.for_jobs for a in actions] == [("good",)]
    why = c.explain("bad")
    assert why is not None and codes(list(why.validation)) == ["unknown_tier", "negative_gpus"]
    # The same id again is ignored, not re-judged.
    assert c.step(at(1), submit(spec("bad", 1))) == []
    assert c.job("bad").state is JobState.REJECTED  # type: ignore[union-attr]


def test_controller_validate_uses_the_offers_it_has_seen() -> None:
    c = Controller()
    assert c.validate(spec("x", 1, vram=100)) == []
    c.step(at(0), [market(*OFFERS)])
    assert codes(c.validate(spec("x", 1, vram=100))) == ["vram_too_large"]


# ---- config ------------------------------------------------------------------------------------------


def test_config_defaults() -> None:
    cfg = ControllerConfig()
    assert cfg.contract_length_s == 7 * 86_400
    assert cfg.cap_for(Tier.FLEX) == Decimal("10.0") and cfg.cap_for(Tier.FAST) is None
    assert ControllerConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"backoff_s": -1}, "backoff_s"),
        ({"request_timeout_s": 0}, "request_timeout_s"),
        ({"idle_release": 5}, "idle_release"),
        ({"scale_groups": [{"max_slices": -1}]}, "scale_groups[0].max_slices"),
        ({"scale_groups": [{"min_slices": 5, "max_slices": 2}]}, "scale_groups[0].min_slices"),
        ({"scale_groups": [{"tiers": ["SLOW"]}]}, "scale_groups[0].tiers[0]"),
        ({"scale_groups": [{"name": "a"}, {"name": "a"}]}, "scale_groups[1].name"),
        ({"scale_groups": [{"colour": "red"}]}, "scale_groups[0].colour"),
        ({"tiers": {"FLEX": {"max_price_per_gpu_hour": "-3"}}}, "tiers.FLEX.max_price_per_gpu_hour"),
        ({"tiers": {"FLEX": {"max_price_per_gpu_hour": "cheap"}}}, "tiers.FLEX.max_price_per_gpu_hour"),
        ({"tiers": {"SLOW": {}}}, "tiers.SLOW"),
    ],
)
def test_config_errors_name_the_key(data: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        ControllerConfig.from_dict(data)
    assert err.value.field == key


def test_config_from_dict_reads_the_file_shape() -> None:
    cfg = ControllerConfig.from_dict(
        {
            "scale_groups": [{"name": "sf", "providers": ["sfcompute"], "tiers": ["fast"], "max_slices": 2}],
            "tiers": {"FLEX": {"max_price_per_gpu_hour": 3.5}},
            "contract_length_s": 86_400,
        }
    )
    assert cfg.scale_groups[0].tiers == (Tier.FAST,)
    assert cfg.cap_for(Tier.FLEX) == Decimal("3.5")
    assert cfg.contract_length_s == 86_400
