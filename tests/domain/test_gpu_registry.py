"""The GPU registry: every spelling of a model names it, memory tells variants apart, and every user of GPU
names (catalog, providers, groups, packer) agrees on one canonical name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.errors import UnknownGpuModelError
from scalar.domain.gpus import (
    GPU_MODELS,
    GPU_MODELS_BY_NAME,
    GPU_THROUGHPUT,
    RUNPOD_GPU_TYPES,
    Architecture,
    GpuGroup,
    GpuModel,
    canonical_gpu_model,
    find_gpu_model,
    gpu_model,
    group_of_model,
    runpod_gpu_type,
    same_gpu_model,
)
from scalar.domain.packing_model import Job
from scalar.domain.tier import Tier

DOCS = Path(__file__).resolve().parents[2] / "docs" / "gpus.md"
SPELLINGS = [(model, spelling) for model in GPU_MODELS for spelling in model.names]


def respell(name: str, draw: st.DrawFn) -> str:
    """``name`` as another source might write it: any case, any separator, a brand word in front."""
    words = [w for w in re.split(r"[\s_\-]+", name) if w]
    sep = draw(st.sampled_from([" ", "-", "_"]))
    text = sep.join(w.upper() if draw(st.booleans()) else w.lower() for w in words)
    return (
        draw(st.sampled_from(["", "NVIDIA ", "nvidia-", "Tesla "])) + text + draw(st.sampled_from(["", " "]))
    )


@st.composite
def a_spelling(draw: st.DrawFn) -> tuple[GpuModel, str]:
    model, spelling = draw(st.sampled_from(SPELLINGS))
    return model, respell(spelling, draw)


@given(a_spelling())
def test_every_alias_round_trips_to_its_canonical_model(case: tuple[GpuModel, str]) -> None:
    model, spelling = case
    assert find_gpu_model(spelling) is model
    assert canonical_gpu_model(spelling) == model.name
    assert (
        canonical_gpu_model(canonical_gpu_model(spelling)) == model.name
    )  # canonical names are fixed points
    assert same_gpu_model(spelling, model.name) and same_gpu_model(model.name, spelling)


@given(a_spelling(), a_spelling())
def test_two_spellings_compare_equal_exactly_when_they_name_one_model(
    a: tuple[GpuModel, str], b: tuple[GpuModel, str]
) -> None:
    assert same_gpu_model(a[1], b[1]) == (a[0] is b[0])


@given(a_spelling(), a_spelling(), a_spelling())
def test_the_packer_accepts_a_node_in_any_spelling_of_a_model_the_job_lists(
    node: tuple[GpuModel, str], first: tuple[GpuModel, str], second: tuple[GpuModel, str]
) -> None:
    job = Job("j", Tier.FAST, 1, 0.0, 0.0, 0.0, 60.0, gpu_models=(first[1], second[1]))
    listed = [first[0].name, second[0].name]
    assert job.allows_model(node[1]) == (node[0].name in listed)
    expected = listed.index(node[0].name) if node[0].name in listed else 2
    assert job.model_preference(node[1]) == expected


def test_the_markets_names_stay_canonical() -> None:
    for name in ("H100", "H200", "A100", "A100-80GB", "L40S", "RTXA6000", "RTX6000Ada", "V100-32GB", "T4g"):
        assert GPU_MODELS_BY_NAME[name].name == canonical_gpu_model(name) == name
    assert canonical_gpu_model("nvidia-a100") == "A100"  # the seed's spelling
    assert canonical_gpu_model(" nvidia-x9 ") == "X9"  # unknown: cleaned, so two spellings of it still meet


@given(st.sampled_from(["A100", "V100", "NVIDIA A100", "Tesla V100"]), st.floats(1, 400))
def test_memory_picks_the_nearest_size_when_the_name_gives_none(name: str, memory_gb: float) -> None:
    model = find_gpu_model(name, memory_gb)
    assert model is not None
    family = [m for m in GPU_MODELS if m.family == model.family]
    assert len(family) == 2
    distance = {
        m.name: abs(memory_gb / m.memory_gb - 1) if memory_gb >= m.memory_gb else m.memory_gb / memory_gb - 1
        for m in family
    }
    assert distance[model.name] <= min(distance.values()) + 1e-9


@pytest.mark.parametrize(
    ("name", "memory_gb", "model"),
    [
        ("A100", 79.2, "A100-80GB"),
        ("A100", 39.4, "A100"),
        ("A100", None, "A100"),
        ("A100-80GB", 39.4, "A100-80GB"),  # a size in the name wins over the measured one
        ("NVIDIA A100-PCIE-40GB", 80.0, "A100"),
        ("V100", 31.7, "V100-32GB"),
        ("H100", 93.0, "H100"),  # one size only: the memory changes nothing
        ("Tesla V100S-PCIE-32GB", None, None),  # a different chip (V100S) is not guessed
    ],
)
def test_named_sizes_and_measured_memory(name: str, memory_gb: float | None, model: str | None) -> None:
    found = find_gpu_model(name, memory_gb)
    assert (found.name if found else None) == model


@pytest.mark.parametrize("name", ["", "  ", "tpu-v6e-1", "MI300X", "H1000", "GPU"])
def test_unknown_names_are_none_or_a_domain_error_naming_the_known_models(name: str) -> None:
    assert find_gpu_model(name) is None
    with pytest.raises(UnknownGpuModelError) as caught:
        gpu_model(name)
    assert caught.value.hint is not None and "A100-80GB" in caught.value.hint


def test_every_model_has_a_throughput_and_every_throughput_a_model() -> None:
    assert set(GPU_THROUGHPUT) == set(GPU_MODELS_BY_NAME)
    assert len(GPU_MODELS_BY_NAME) == len(GPU_MODELS)


def test_every_runpod_type_is_its_models_device_and_groups_hold_whole_models() -> None:
    for gpu_type in RUNPOD_GPU_TYPES:
        assert runpod_gpu_type(gpu_type.runpod_id) is gpu_type
        assert find_gpu_model(gpu_type.runpod_id) is gpu_type.model
        assert find_gpu_model(gpu_type.name) is gpu_type.model  # the instance-type spelling is an alias
        assert gpu_type.memory_gb >= gpu_type.model.memory_gb
    for group in GpuGroup.all():
        for gpu_type in group.gpu_types:
            assert group_of_model(gpu_type.model.name) is group
            assert group_of_model(gpu_type.runpod_id) is group


def test_architectures_are_in_generation_order_and_amd_has_no_cuda() -> None:
    ranks = [a.rank for a in Architecture]
    assert ranks == sorted(ranks)
    assert (
        Architecture.AMPERE.rank
        < Architecture.ADA.rank
        < Architecture.HOPPER.rank
        < Architecture.BLACKWELL.rank
    )
    with pytest.raises(ValueError, match="ROCm"):
        _ = Architecture.VEGA.min_cuda


def test_docs_list_every_model_with_its_memory_and_spellings() -> None:
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("## Models")[1].split("##")[0]
    rows = {
        m.group(1): m.group(2) for m in re.finditer(r"^\| `([A-Za-z0-9-]+)` \| (\d+) \|", table, re.MULTILINE)
    }
    assert rows == {model.name: str(model.memory_gb) for model in GPU_MODELS}
    for model in GPU_MODELS:
        for spelling in model.names:
            assert f"`{spelling}`" in table, spelling
    rates = text.split("## Relative throughput")[1]
    for name, rate in GPU_THROUGHPUT.items():
        assert re.search(rf"^\| `{re.escape(name)}` \| {rate.tflops:g} \|", rates, re.MULTILINE), name
