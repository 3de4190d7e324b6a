"""Seed 004: GPU groups, the CUDA compatibility matrix, and GPU choice by model size and by budget."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.errors import InvalidSpecError
from scalar.domain.gpu_selection import (
    fit_gpu_groups_for_model,
    rank_gpu_groups_for_budget,
    select_gpu_for_budget,
    select_gpu_for_model_size,
)
from scalar.domain.gpus import (
    Architecture,
    CudaVersion,
    GpuGroup,
    cuda_incompatibility,
    find_model,
    format_cuda_versions,
    format_gpu_ids,
    group_of_model,
    parse_cuda_versions,
    parse_gpu_ids,
    usable_cuda_versions,
)

G = GpuGroup
SPECIFIC = GpuGroup.all()

# samples/runpod_gpu_groups.json, "GpuGroup_docstring_models" (tetra 2025 groups): RunPod GPU type ids per group.
SAMPLE_GROUP_MODELS = {
    "ADA_24": ["NVIDIA GeForce RTX 4090"],
    "ADA_32_PRO": ["NVIDIA GeForce RTX 5090"],
    "ADA_48_PRO": ["NVIDIA RTX 6000 Ada Generation", "NVIDIA L40", "NVIDIA L40S"],
    "ADA_80_PRO": ["NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL"],
    "AMPERE_16": [
        "NVIDIA RTX A4000",
        "NVIDIA RTX A4500",
        "NVIDIA RTX 4000 Ada Generation",
        "NVIDIA RTX 2000 Ada Generation",
    ],
    "AMPERE_24": ["NVIDIA RTX A5000", "NVIDIA L4", "NVIDIA GeForce RTX 3090"],
    "AMPERE_48": ["NVIDIA A40", "NVIDIA RTX A6000"],
    "AMPERE_80": ["NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-80GB"],
    "HOPPER_141": ["NVIDIA H200"],
}


# ------------------------------------------------------------------------------------------ groups


def test_all_lists_every_group_once_with_ampere_48_first() -> None:
    # The seed's all() is [AMPERE_48] + every non-ANY member: AMPERE_48 twice. Fixed: once, still first.
    groups = GpuGroup.all()
    assert groups[0] is G.AMPERE_48
    assert len(groups) == len(set(groups)) == len(GpuGroup) - 1
    assert G.ANY not in groups
    assert groups[1:] == [g for g in GpuGroup if g not in (G.ANY, G.AMPERE_48)]


def test_groups_hold_the_models_of_the_runpod_sample() -> None:
    assert {g.value for g in SPECIFIC} == set(SAMPLE_GROUP_MODELS)
    for group in SPECIFIC:
        assert [m.runpod_id for m in group.gpu_types] == SAMPLE_GROUP_MODELS[group.value]


@pytest.mark.parametrize("group", SPECIFIC, ids=str)
def test_group_memory_is_the_number_in_its_name_and_every_model_has_it(group: GpuGroup) -> None:
    match = re.search(r"_(\d+)", group.value)
    assert match is not None
    assert group.memory_gb == int(match.group(1))
    assert all(m.memory_gb >= group.memory_gb for m in group.gpu_types)


def test_canonical_model_names_are_the_price_catalogs_names() -> None:
    # runpod_gpu_skypilot_v7.csv AcceleratorName values, and other catalogs' spellings (Prime Intellect, AWS).
    expected = {
        "A100-80GB": G.AMPERE_80,
        "A100-80GB-SXM": G.AMPERE_80,
        "H100": G.ADA_80_PRO,
        "H100-SXM": G.ADA_80_PRO,
        "H200-SXM": G.HOPPER_141,
        "H200": G.HOPPER_141,
        "L4": G.AMPERE_24,
        "L40": G.ADA_48_PRO,
        "L40S": G.ADA_48_PRO,
        "A6000": G.AMPERE_48,
        "A4000": G.AMPERE_16,
        "RTX6000Ada": G.ADA_48_PRO,
        "RTX4090": G.ADA_24,
        "RTX3090": G.AMPERE_24,
        "RTX5090": G.ADA_32_PRO,
        "RTXA6000": G.AMPERE_48,
        "RTX6000-Ada": G.ADA_48_PRO,
        "NVIDIA H100 80GB HBM3": G.ADA_80_PRO,
        "nvidia a40": G.AMPERE_48,
    }
    for name, group in expected.items():
        assert group_of_model(name) is group, name
    assert group_of_model("T4") is None
    found = find_model("A6000")
    assert found is not None and found[0].name == "RTXA6000"


def test_parse_group_accepts_the_seed_values_and_names_any_case() -> None:
    assert GpuGroup.parse("any", "gpus[0]") is G.ANY
    assert GpuGroup.parse("ANY", "gpus[0]") is G.ANY
    assert GpuGroup.parse(" ampere_48 ", "gpus[0]") is G.AMPERE_48


def test_an_unknown_group_names_the_field_and_the_valid_groups() -> None:
    with pytest.raises(InvalidSpecError) as err:
        GpuGroup.parse("invalid_gpu", "gpus[2]")
    assert err.value.field == "gpus[2]"
    assert err.value.problem.startswith("'invalid_gpu' is not a valid GpuGroup; use one of any, AMPERE_48")
    assert "HOPPER_141" in err.value.problem


def test_a_model_name_where_a_group_belongs_gets_a_hint_naming_its_group() -> None:
    with pytest.raises(InvalidSpecError) as err:
        GpuGroup.parse("H100", "gpus[0]")
    assert err.value.hint is not None and "ADA_80_PRO" in err.value.hint


# ------------------------------------------------------------------------------------------ CUDA


def test_cuda_versions_order_numerically() -> None:
    versions = list(CudaVersion)
    assert sorted(reversed(versions)) == versions
    assert CudaVersion.V11_8 < CudaVersion.V12_0 < CudaVersion.V12_8
    assert max(CudaVersion.V12_1, CudaVersion.V11_8) is CudaVersion.V12_1
    assert [v.value for v in versions] == ["11.8", *(f"12.{i}" for i in range(10)), "13.0", "13.1", "13.2"]


def test_unknown_cuda_version_names_the_field() -> None:
    with pytest.raises(InvalidSpecError) as err:
        CudaVersion.parse("13.9", "cudaVersions[1]")
    assert err.value.field == "cudaVersions[1]"
    assert "'13.9' is not a valid CudaVersion; use one of 11.8, 12.0" in err.value.problem


def test_the_seed_compatibility_matrix() -> None:
    assert (Architecture.AMPERE.min_cuda, Architecture.AMPERE.recommended_cuda) == (
        CudaVersion.V11_8,
        CudaVersion.V12_0,
    )
    assert (Architecture.ADA.min_cuda, Architecture.ADA.recommended_cuda) == (
        CudaVersion.V11_8,
        CudaVersion.V12_1,
    )
    assert (Architecture.HOPPER.min_cuda, Architecture.HOPPER.recommended_cuda) == (
        CudaVersion.V12_0,
        CudaVersion.V12_4,
    )


def test_h100_group_is_hopper_although_the_seed_files_it_under_ada() -> None:
    assert G.ADA_80_PRO.architecture is Architecture.HOPPER
    assert G.ADA_80_PRO.min_cuda is CudaVersion.V12_0
    assert not G.ADA_80_PRO.supports(CudaVersion.V11_8)
    text = cuda_incompatibility(G.ADA_80_PRO, [CudaVersion.V11_8])
    assert text is not None and "too old for ADA_80_PRO (Hopper needs 12.0+)" in text and "H100" in text


def test_rtx_5090_group_is_blackwell_and_needs_cuda_12_8() -> None:
    assert G.ADA_32_PRO.architecture is Architecture.BLACKWELL
    assert usable_cuda_versions(G.ADA_32_PRO, list(CudaVersion)) == tuple(
        v for v in CudaVersion if v >= CudaVersion.V12_8
    )


@pytest.mark.parametrize(
    "group", [G.AMPERE_16, G.AMPERE_24, G.AMPERE_48, G.AMPERE_80, G.ADA_24, G.ADA_48_PRO]
)
def test_ampere_and_ada_groups_run_cuda_11_8(group: GpuGroup) -> None:
    assert group.supports(CudaVersion.V11_8)
    assert cuda_incompatibility(group, [CudaVersion.V11_8]) is None


def test_hopper_needs_12_0_and_one_new_enough_allowed_version_is_enough() -> None:
    assert cuda_incompatibility(G.HOPPER_141, [CudaVersion.V11_8]) == (
        "CUDA 11.8 is too old for HOPPER_141 (Hopper needs 12.0+)"
    )
    assert cuda_incompatibility(G.HOPPER_141, [CudaVersion.V11_8, CudaVersion.V12_0]) is None
    assert cuda_incompatibility(G.HOPPER_141, []) is None  # no restriction
    assert usable_cuda_versions(G.HOPPER_141, [CudaVersion.V11_8, CudaVersion.V12_4]) == (CudaVersion.V12_4,)


# ------------------------------------------------------------------------------------------ wire strings


def test_gpu_ids_parsing_tolerates_spaces_and_empty_items() -> None:
    assert parse_gpu_ids(" AMPERE_48, ,ADA_24,, HOPPER_141 ,") == [G.AMPERE_48, G.ADA_24, G.HOPPER_141]
    assert parse_gpu_ids("") == []
    assert parse_cuda_versions("12.1, 11.8,") == [CudaVersion.V12_1, CudaVersion.V11_8]


def test_gpu_ids_errors_count_non_empty_items() -> None:
    with pytest.raises(InvalidSpecError) as err:
        parse_gpu_ids("ADA_24,, invalid_gpu")
    assert err.value.field == "gpuIds[1]"


@given(st.lists(st.sampled_from(SPECIFIC), unique=True))
def test_gpu_ids_round_trip(groups: list[GpuGroup]) -> None:
    assert parse_gpu_ids(format_gpu_ids(groups)) == groups


@given(st.lists(st.sampled_from(list(CudaVersion)), unique=True))
def test_allowed_cuda_versions_round_trip(versions: list[CudaVersion]) -> None:
    assert parse_cuda_versions(format_cuda_versions(versions)) == versions


# ------------------------------------------------------------------------------------------ by model size


def test_a_100_gb_model_fits_only_hopper_141() -> None:
    # The seed's bands offer AMPERE_80 and ADA_80_PRO for anything over 48 GB: 80 GB cannot hold 100 GB.
    assert select_gpu_for_model_size(100) == [G.HOPPER_141]
    fit = fit_gpu_groups_for_model(100)
    rejected = {r.resource: r for r in fit.rejected}
    assert rejected["AMPERE_80"].code == "insufficient_gpu_memory"
    assert rejected["AMPERE_80"].need == 120 and rejected["AMPERE_80"].have == 80
    assert "needs 120 GB with 1.2x headroom" in rejected["AMPERE_80"].message


def test_a_20_gb_model_gets_24_gb_groups_first_not_48() -> None:
    groups = select_gpu_for_model_size(20)
    assert groups[:2] == [G.AMPERE_24, G.ADA_24]  # 20 x 1.2 = 24 GB fits a 24 GB GPU
    assert G.AMPERE_16 not in groups


def test_a_16_gb_model_gets_the_seed_24_gb_groups_first() -> None:
    assert select_gpu_for_model_size(16)[:2] == [G.AMPERE_24, G.ADA_24]


def test_a_small_model_fits_the_16_gb_group() -> None:
    assert select_gpu_for_model_size(10)[0] is G.AMPERE_16


def test_headroom_is_a_parameter() -> None:
    # Without headroom a 48 GB model fits the 48 GB groups, as the seed's band says.
    assert select_gpu_for_model_size(48, headroom=1.0)[:2] == [G.AMPERE_48, G.ADA_48_PRO]
    assert select_gpu_for_model_size(48)[:3] == [G.AMPERE_80, G.ADA_80_PRO, G.HOPPER_141]


def test_a_model_too_big_for_any_gpu_gets_nothing_and_a_reason_per_group() -> None:
    fit = fit_gpu_groups_for_model(200)
    assert fit.groups == []
    assert len(fit.rejected) == len(SPECIFIC)


def test_several_gpus_per_worker_add_up_their_memory() -> None:
    assert G.AMPERE_80 in select_gpu_for_model_size(100, gpu_count=2)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_model_size_must_be_positive(bad: float) -> None:
    with pytest.raises(InvalidSpecError) as err:
        select_gpu_for_model_size(bad)
    assert err.value.field == "model_gb"


@given(
    st.floats(min_value=0.1, max_value=400, allow_nan=False),
    st.floats(min_value=1.0, max_value=2.0),
    st.integers(min_value=1, max_value=8),
)
def test_selection_keeps_exactly_the_groups_that_hold_the_model(
    model_gb: float, headroom: float, n: int
) -> None:
    fit = fit_gpu_groups_for_model(model_gb, headroom=headroom, gpu_count=n)
    need = model_gb * headroom
    assert all(c.group.memory_gb * n >= need for c in fit.chosen)
    assert {c.group for c in fit.chosen} == {g for g in SPECIFIC if g.memory_gb * n >= need}
    memories = [c.memory_gb for c in fit.chosen]
    assert memories == sorted(memories)
    assert len(fit.chosen) + len(fit.rejected) == len(SPECIFIC)


# ------------------------------------------------------------------------------------------ by budget

# samples/runpod_graphql_gpuTypes_response.json, securePrice per GPU-hour, keyed by RunPod GPU type id.
RUNPOD_SECURE = {
    "NVIDIA H100 80GB HBM3": Decimal("2.99"),
    "NVIDIA A100 80GB PCIe": Decimal("1.64"),
    "NVIDIA L4": Decimal("0.44"),
    "NVIDIA H200": Decimal("3.99"),
}


def test_budget_keeps_groups_within_it_cheapest_first() -> None:
    assert select_gpu_for_budget(Decimal("2.00"), RUNPOD_SECURE) == [G.AMPERE_24, G.AMPERE_80]
    assert select_gpu_for_budget(Decimal("5"), RUNPOD_SECURE) == [
        G.AMPERE_24,
        G.AMPERE_80,
        G.ADA_80_PRO,
        G.HOPPER_141,
    ]


def test_a_price_equal_to_the_budget_is_within_it() -> None:
    assert select_gpu_for_budget("0.44", RUNPOD_SECURE) == [G.AMPERE_24]
    assert select_gpu_for_budget("0.43", RUNPOD_SECURE) == []


def test_budget_reasons_carry_the_numbers() -> None:
    ranked = rank_gpu_groups_for_budget(2, RUNPOD_SECURE)
    assert ranked.chosen[0].cheapest_model == "L4"
    assert ranked.chosen[0].price_per_worker_hour == Decimal("0.44")
    over = next(r for r in ranked.rejected if r.resource == "HOPPER_141")
    assert (over.code, over.need, over.limit) == ("over_budget", "3.99", "2")
    unpriced = next(r for r in ranked.rejected if r.resource == "ADA_24")
    assert unpriced.code == "no_price"


def test_a_group_costs_its_cheapest_model_and_group_keys_count_too() -> None:
    prices = {
        "H100": Decimal("2.40"),
        "H100-SXM": Decimal("2.99"),
        G.AMPERE_48: Decimal("0.39"),
        "T4": Decimal("0.1"),
    }
    ranked = rank_gpu_groups_for_budget(Decimal("2.5"), prices)
    assert ranked.groups == [G.AMPERE_48, G.ADA_80_PRO]
    assert ranked.chosen[1].price_per_gpu_hour == Decimal("2.40")
    assert any(r.code == "unknown_gpu" and r.resource == "T4" for r in ranked.rejected)


def test_budget_is_per_worker_of_gpu_count_gpus() -> None:
    assert select_gpu_for_budget(Decimal("2"), RUNPOD_SECURE, gpu_count=2) == [G.AMPERE_24]


def test_bad_budget_inputs_name_the_field() -> None:
    with pytest.raises(InvalidSpecError) as err:
        select_gpu_for_budget(-1, RUNPOD_SECURE)
    assert err.value.field == "budget_per_hour"
    with pytest.raises(InvalidSpecError) as err:
        select_gpu_for_budget(1, {"L4": Decimal("-0.1")})
    assert err.value.field == "prices[L4]"
    with pytest.raises(InvalidSpecError) as err:
        select_gpu_for_budget(1, {G.ANY: Decimal("1")})
    assert err.value.field == "prices[any]"


@given(
    st.dictionaries(
        st.sampled_from(SPECIFIC), st.decimals(min_value=0, max_value=20, places=2), min_size=0, max_size=9
    ),
    st.decimals(min_value=0, max_value=20, places=2),
)
def test_budget_selection_is_exactly_the_affordable_groups_sorted(
    prices: dict[GpuGroup, Decimal], budget: Decimal
) -> None:
    ranked = rank_gpu_groups_for_budget(budget, prices)
    assert set(ranked.groups) == {g for g, p in prices.items() if p <= budget}
    costs = [c.price_per_worker_hour for c in ranked.chosen if c.price_per_worker_hour is not None]
    assert len(costs) == len(ranked.chosen) and costs == sorted(costs)
