"""Bad input is refused at submission with reasons; the config names the key it rejects."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal

import pytest

from scalar.domain.consolidation import ConsolidationPolicy
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


def test_config_to_dict_is_the_json_file_shape_and_reads_back() -> None:
    cfg = ControllerConfig.from_dict(
        {
            "scale_groups": [{"name": "sf", "providers": ["sfcompute"], "tiers": ["flex"], "spot": False}],
            "tiers": {"flex": {"max_price_per_gpu_hour": "2.5"}},
            "budgets": [{"scope": "global", "usd_per_hour": 50}],
            "consolidation": {"enabled": False, "max_moves": 3},
            "market_time_scales": {"sfcompute": 60},
            "backoff_s": 5,
        }
    )
    assert cfg.consolidation == ConsolidationPolicy(
        enabled=False, max_moves=3
    )  # a table is read into the policy
    data = json.loads(json.dumps(cfg.to_dict()))
    assert data["tiers"]["FLEX"] == {"max_price_per_gpu_hour": "2.5"}
    assert data["scale_groups"][0]["tiers"] == ["FLEX"] and data["backoff_s"] == 5
    assert data["consolidation"]["max_moves"] == 3 and data["budgets"][0]["usd_per_hour"] == "50"
    assert ControllerConfig.from_dict(data) == cfg


@pytest.mark.parametrize(
    ("data", "key", "problem", "hint"),
    [
        ({"speed": 1}, "speed", "unknown setting", "use one of agent_providers, backoff_s"),
        (
            {"scale_groups": [{"colour": "red"}]},
            "scale_groups[0].colour",
            "unknown setting",
            "use one of contract",
        ),
        ({"tiers": {"FLEX": {"cap": 1}}}, "tiers.FLEX.cap", "unknown setting", "use max_price_per_gpu_hour"),
        ({"tiers": {"flex": 3}}, "tiers.FLEX", "must be a table", None),
        ({"tiers": {"SLOW": {}}}, "tiers.SLOW", "unknown tier 'SLOW'; use one of FAST, FLEX", None),
        (
            {"scale_groups": [{"tiers": ["fast", "slow"]}]},
            "scale_groups[0].tiers[1]",
            "unknown tier 'slow'",
            None,
        ),
        ({"scale_groups": {"name": "x"}}, "scale_groups", "must be a list of scale groups", None),
        (
            {"scale_groups": [{"max_slices": -1}]},
            "scale_groups[0].max_slices",
            "must be a whole number >= 0",
            None,
        ),
        (
            {"budgets": [{"scope": "global", "usd_per_hour": "lots"}]},
            "budgets[0].usd_per_hour",
            "must be an amount",
            None,
        ),
        ({"consolidation": {"max_moves": -1}}, "consolidation.max_moves", "must be >= 0, got -1", None),
        ({"consolidation": {"moves": 1}}, "consolidation.moves", "unknown setting", "use one of enabled"),
        ({"request_timeout_s": "10"}, "request_timeout_s", "must be a number of seconds, got '10'", None),
    ],
)
def test_config_errors_say_what_is_wrong(
    data: dict[str, object], key: str, problem: str, hint: str | None
) -> None:
    with pytest.raises(ConfigError) as err:
        ControllerConfig.from_dict(data)
    assert err.value.field == key
    assert err.value.problem.startswith(problem)
    assert (err.value.hint or "").startswith(hint or "")


def test_the_file_model_has_the_engines_keys_and_defaults() -> None:
    from dataclasses import fields

    from scalar.engine.config_file import ControllerFile, ScaleGroupFile

    for model, value in (
        (ControllerFile, ControllerConfig()),
        (ScaleGroupFile, ControllerConfig().scale_groups[0]),
    ):
        assert list(model.model_fields) == [f.name for f in fields(value)]
    assert ControllerFile().to_config() == ControllerConfig()
    assert ControllerFile().model_dump() == ControllerConfig().to_dict()
