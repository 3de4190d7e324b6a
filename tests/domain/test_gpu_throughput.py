"""Relative throughput of GPU models: one published rate per model, A100 = 1.0."""

from __future__ import annotations

import math

import pytest

from scalar.domain.errors import DomainError, UnknownGpuModelError
from scalar.domain.gpus import (
    GPU_THROUGHPUT,
    REFERENCE_GPU_MODEL,
    TRACE_GPU_MODELS,
    relative_throughput,
)


def test_the_reference_model_does_one_unit_per_hour() -> None:
    assert REFERENCE_GPU_MODEL == "A100"
    assert relative_throughput(REFERENCE_GPU_MODEL) == 1.0


@pytest.mark.parametrize("model", sorted(GPU_THROUGHPUT))
def test_every_model_has_a_positive_rate_and_a_source(model: str) -> None:
    rate = relative_throughput(model)
    assert math.isfinite(rate) and rate > 0
    assert rate == GPU_THROUGHPUT[model].tflops / GPU_THROUGHPUT["A100"].tflops
    assert (
        GPU_THROUGHPUT[model].source.strip() and "|" not in GPU_THROUGHPUT[model].source
    )  # a docs table cell


def test_generations_rank_as_their_datasheets() -> None:
    order = ["P100", "T4", "V100", "A100", "H100", "B200"]
    rates = [relative_throughput(m) for m in order]
    assert rates == sorted(rates) and len(set(rates)) == len(rates)
    assert relative_throughput("H200") == relative_throughput("H100")  # same Hopper compute, more memory


@pytest.mark.parametrize("code", sorted(TRACE_GPU_MODELS))
def test_the_openb_trace_models_resolve_to_their_stand_ins(code: str) -> None:
    assert relative_throughput(code) == relative_throughput(TRACE_GPU_MODELS[code])
    assert relative_throughput(code.lower()) == relative_throughput(code)


def test_the_trace_models_differ_in_speed() -> None:
    assert relative_throughput("V100M16") == relative_throughput("V100M32") < relative_throughput("G2")
    assert relative_throughput("P100") < relative_throughput("T4") < relative_throughput("A10")


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("h100", "H100"),
        ("H100-SXM", "H100"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("H200-SXM", "H200"),
        ("A100-80GB-SXM", "A100-80GB"),
        ("A6000", "RTXA6000"),
        ("RTX6000-Ada", "RTX6000Ada"),
        ("NVIDIA GeForce RTX 4090", "RTX4090"),
    ],
)
def test_aliases_have_their_models_rate(alias: str, canonical: str) -> None:
    assert relative_throughput(alias) == relative_throughput(canonical)


@pytest.mark.parametrize("name", ["G1", "H1000", "", "tpu-v6e-1"])
def test_an_unknown_model_is_a_domain_error_with_a_fix(name: str) -> None:
    with pytest.raises(UnknownGpuModelError) as caught:
        relative_throughput(name)
    err = caught.value
    assert isinstance(err, DomainError)
    assert repr(name) in str(err) and err.hint is not None and "A100" in err.hint
