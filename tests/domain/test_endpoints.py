"""Seed 004: serverless endpoint specs, field sync, ANY, CUDA checks, the locked live image, fallback order."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.endpoints import (
    LIVE_GPU_IMAGE,
    EndpointKind,
    LiveServerless,
    ServerlessEndpoint,
    ServerlessScalerType,
    endpoint_class,
    fallback_order,
)
from scalar.domain.errors import InvalidSpecError
from scalar.domain.gpus import CudaVersion, GpuGroup

G = GpuGroup
V = CudaVersion


def endpoint(**fields: Any) -> ServerlessEndpoint:
    fields.setdefault("name", "gpu-inference")
    fields.setdefault("image_name", "my-ml-app:latest")
    return ServerlessEndpoint.create(**fields)


def invalid(**fields: Any) -> InvalidSpecError:
    with pytest.raises(InvalidSpecError) as err:
        endpoint(**fields)
    return err.value


# ------------------------------------------------------------------------------------------ the seed's examples


def test_basic_gpu_endpoint() -> None:
    spec = endpoint(gpus=[G.AMPERE_24], workers_max=5, workers_min=0, cuda_versions=[V.V12_1])
    assert spec.gpus == (G.AMPERE_24,)
    assert spec.gpu_ids == "AMPERE_24"
    assert spec.allowed_cuda_versions == "12.1"
    assert (spec.workers_min, spec.workers_max) == (0, 5)
    assert spec.kind is EndpointKind.SERVERLESS


def test_defaults_are_the_seeds() -> None:
    spec = endpoint()
    assert spec.workers_max == 3
    assert spec.workers_min == 0
    assert spec.scaler_type is ServerlessScalerType.QUEUE_DELAY
    assert spec.scaler_value == 4
    assert spec.gpus == tuple(GpuGroup.all())  # [ANY], expanded
    assert spec.cuda_versions == ()
    assert spec.allowed_cuda_versions == ""
    assert (spec.gpu_count, spec.idle_timeout_s, spec.execution_timeout_ms) == (1, 5, 0)


def test_high_throughput_example_with_request_count_scaling() -> None:
    spec = endpoint(gpus=["ANY"], workers_max=20, workers_min=3, scaler_type="REQUEST_COUNT", scaler_value=50)
    assert spec.scaler_type is ServerlessScalerType.REQUEST_COUNT
    assert spec.gpus[0] is G.AMPERE_48 and len(spec.gpus) == 9


def test_none_means_default_but_zero_is_a_real_value() -> None:
    # The seed's ``Optional[int] = 3`` style: a falsy-default bug would turn these zeros into defaults.
    spec = endpoint(workers_min=0, workers_max=0, idle_timeout_s=0, execution_timeout_ms=0)
    assert (spec.workers_min, spec.workers_max, spec.idle_timeout_s, spec.execution_timeout_ms) == (
        0,
        0,
        0,
        0,
    )
    spec = endpoint(workers_min=None, workers_max=None, scaler_value=None)
    assert (spec.workers_min, spec.workers_max, spec.scaler_value) == (0, 3, 4)


# ------------------------------------------------------------------------------------------ sync both ways


def test_gpus_fill_gpu_ids() -> None:
    spec = endpoint(gpus=["HOPPER_141", "ADA_80_PRO", "AMPERE_80"])
    assert spec.gpu_ids == "HOPPER_141,ADA_80_PRO,AMPERE_80"


def test_gpu_ids_from_an_api_response_fill_gpus() -> None:
    spec = endpoint(gpu_ids=" AMPERE_48, ,ADA_24,")
    assert spec.gpus == (G.AMPERE_48, G.ADA_24)
    assert spec.gpu_ids == "AMPERE_48,ADA_24"


def test_cuda_versions_fill_allowed_cuda_versions_and_back() -> None:
    assert endpoint(cuda_versions=["12.1", "11.8"]).allowed_cuda_versions == "12.1,11.8"
    assert endpoint(allowed_cuda_versions="12.1, 11.8").cuda_versions == (V.V12_1, V.V11_8)


def test_both_forms_that_agree_are_accepted() -> None:
    spec = endpoint(gpus=["AMPERE_48", "ADA_24"], gpu_ids="AMPERE_48,ADA_24")
    assert spec.gpus == (G.AMPERE_48, G.ADA_24)
    spec = endpoint(gpus=["ANY"], gpu_ids=",".join(g.value for g in GpuGroup.all()))
    assert spec.gpus == tuple(GpuGroup.all())
    # allowed versions are a set: order does not make them disagree; the developer's order is kept
    spec = endpoint(cuda_versions=["12.1", "11.8"], allowed_cuda_versions="11.8,12.1")
    assert spec.cuda_versions == (V.V12_1, V.V11_8)


def test_gpus_and_gpu_ids_that_disagree_are_an_error() -> None:
    err = invalid(gpus=["AMPERE_48"], gpu_ids="ADA_24")
    assert err.field == "gpuIds"
    assert "'ADA_24' disagrees with gpus 'AMPERE_48'" in err.problem
    # the order is the preference order, so a different order disagrees too
    assert invalid(gpus=["AMPERE_48", "ADA_24"], gpu_ids="ADA_24,AMPERE_48").field == "gpuIds"


def test_cuda_fields_that_disagree_are_an_error() -> None:
    err = invalid(cuda_versions=["12.4"], allowed_cuda_versions="12.1")
    assert err.field == "allowedCudaVersions"
    assert "disagrees with cudaVersions '12.4'" in err.problem


def test_empty_api_strings_count_as_not_given() -> None:
    spec = endpoint(gpus=["ADA_24"], gpu_ids="", cuda_versions=["12.4"], allowed_cuda_versions="")
    assert (spec.gpu_ids, spec.allowed_cuda_versions) == ("ADA_24", "12.4")


def test_repeated_items_in_api_strings_keep_the_first_and_say_so() -> None:
    # tetra's all() sends AMPERE_48 twice in gpuIds
    spec = endpoint(gpu_ids="AMPERE_48,ADA_24,AMPERE_48")
    assert spec.gpus == (G.AMPERE_48, G.ADA_24)
    assert [n.code for n in spec.notes] == ["duplicate_api_item"]


def test_a_group_listed_twice_in_gpus_is_an_error() -> None:
    err = invalid(gpus=["ADA_24", "AMPERE_48", "ADA_24"])
    assert err.field == "gpus[2]"
    assert "listed twice" in err.problem


@given(st.lists(st.sampled_from(GpuGroup.all()), min_size=1, unique=True))
def test_gpus_to_gpu_ids_to_gpus_is_identity(groups: list[GpuGroup]) -> None:
    there = endpoint(gpus=groups)
    back = endpoint(gpu_ids=there.gpu_ids)
    assert list(back.gpus) == groups
    assert back == there


@given(
    st.lists(st.sampled_from(GpuGroup.all()), min_size=1, unique=True),
    st.lists(st.sampled_from([" ", "", "  "]), min_size=1, max_size=4),
)
def test_gpu_ids_with_spaces_and_empty_items_parse_the_same(groups: list[GpuGroup], pads: list[str]) -> None:
    messy = ",".join(f"{pads[i % len(pads)]}{g.value} " for i, g in enumerate(groups)) + ", ,"
    assert list(endpoint(gpu_ids=messy).gpus) == groups


@given(
    st.lists(st.sampled_from(GpuGroup.all()), min_size=1, unique=True),
    st.lists(st.sampled_from(list(CudaVersion)), unique=True),
)
def test_a_normalized_spec_normalizes_to_itself(groups: list[GpuGroup], versions: list[CudaVersion]) -> None:
    try:
        spec = endpoint(gpus=groups, cuda_versions=versions)
    except InvalidSpecError as err:
        # only the CUDA rule may refuse: some chosen group can run none of the allowed versions
        assert err.field.startswith("cudaVersions[")
        assert any(versions and max(versions) < g.min_cuda for g in groups)
        return
    again = endpoint(
        gpus=list(spec.gpus),
        gpu_ids=spec.gpu_ids,
        cuda_versions=list(spec.cuda_versions),
        allowed_cuda_versions=spec.allowed_cuda_versions,
    )
    assert again == spec


# ------------------------------------------------------------------------------------------ ANY


def test_any_expands_to_every_group_once_ampere_48_first() -> None:
    spec = endpoint(gpus=[G.ANY])
    assert spec.gpus[0] is G.AMPERE_48
    assert len(set(spec.gpus)) == len(spec.gpus) == len(GpuGroup) - 1


def test_any_mixed_with_groups_expands_in_place_to_the_rest() -> None:
    spec = endpoint(gpus=["HOPPER_141", "ANY"])
    assert spec.gpus[0] is G.HOPPER_141
    assert spec.gpus[1:] == tuple(g for g in GpuGroup.all() if g is not G.HOPPER_141)
    spec = endpoint(gpus=["ANY", "ADA_24"])
    assert spec.gpus[-1] is G.ADA_24 and spec.gpus.count(G.ADA_24) == 1


def test_any_twice_is_an_error() -> None:
    assert invalid(gpus=["ANY", "any"]).field == "gpus[1]"


def test_any_leaves_out_groups_no_allowed_cuda_version_can_run() -> None:
    spec = endpoint(gpus=["ANY"], cuda_versions=["11.8"])
    assert G.HOPPER_141 not in spec.gpus and G.ADA_80_PRO not in spec.gpus and G.ADA_32_PRO not in spec.gpus
    assert spec.gpus[0] is G.AMPERE_48
    note = next(n for n in spec.notes if n.code == "any_excludes_group")
    assert "ADA_32_PRO, ADA_80_PRO, HOPPER_141" in note.message


def test_an_empty_gpus_list_is_an_error() -> None:
    assert invalid(gpus=[]).field == "gpus"


# ------------------------------------------------------------------------------------------ CUDA


def test_cuda_too_old_for_hopper_h200() -> None:
    err = invalid(gpus=[G.HOPPER_141], cuda_versions=[V.V11_8])
    assert err.field == "cudaVersions[0]"
    assert err.problem == "CUDA 11.8 is too old for HOPPER_141 (Hopper needs 12.0+)"
    assert err.hint is not None and "12.0 or newer" in err.hint


def test_cuda_too_old_for_hopper_h100_in_the_seeds_ada_80_pro() -> None:
    err = invalid(gpus=[G.ADA_80_PRO], cuda_versions=[V.V11_8])
    assert err.field == "cudaVersions[0]"
    assert "CUDA 11.8 is too old for ADA_80_PRO (Hopper needs 12.0+)" in err.problem


def test_cuda_rule_from_the_api_field_names_the_api_field() -> None:
    err = invalid(gpu_ids="HOPPER_141", allowed_cuda_versions="11.8")
    assert err.field == "allowedCudaVersions[0]"


def test_one_usable_version_per_group_is_enough() -> None:
    # 11.8 serves the A40s, 12.4 the H200s: a valid endpoint, with a note on what H200 workers can use.
    spec = endpoint(gpus=["AMPERE_48", "HOPPER_141"], cuda_versions=["11.8", "12.4"])
    assert spec.cuda_versions_for(G.HOPPER_141) == (V.V12_4,)
    assert spec.cuda_versions_for(G.AMPERE_48) == (V.V11_8, V.V12_4)
    assert [n.code for n in spec.notes] == ["cuda_version_unusable"]
    assert spec.notes[0].resource == "HOPPER_141"


def test_the_error_names_the_newest_allowed_version() -> None:
    err = invalid(gpus=["ADA_32_PRO"], cuda_versions=["12.1", "12.4", "11.8"])
    assert err.field == "cudaVersions[1]"
    assert err.problem.startswith("CUDA 12.4 is too old for ADA_32_PRO (Blackwell needs 12.8+)")


def test_every_failing_group_is_named() -> None:
    err = invalid(gpus=["HOPPER_141", "AMPERE_80", "ADA_80_PRO"], cuda_versions=["11.8"])
    assert "HOPPER_141" in err.problem and "(also too old for ADA_80_PRO)" in err.problem


def test_unknown_cuda_version() -> None:
    err = invalid(cuda_versions=["12.4", "13.9"])
    assert err.field == "cudaVersions[1]"
    assert "'13.9' is not a valid CudaVersion" in err.problem


def test_invalid_gpu_group() -> None:
    err = invalid(gpus=["invalid_gpu"])
    assert err.field == "gpus[0]"
    assert err.problem.startswith("'invalid_gpu' is not a valid GpuGroup; use one of ")
    assert invalid(gpu_ids="ADA_24,invalid_gpu").field == "gpuIds[1]"


# ------------------------------------------------------------------------------------------ field errors


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"name": None}, "name", "is required"),
        ({"name": "  "}, "name", "is required"),
        ({"name": "bad name!"}, "name", "not a valid endpoint name"),
        ({"name": "x" * 65}, "name", "not a valid endpoint name"),
        ({"image_name": None}, "imageName", "is required"),
        ({"image_name": ""}, "imageName", "is required"),
        ({"image_name": "my image"}, "imageName", "whitespace"),
        ({"workers_min": 5}, "workersMin", "more than workersMax 3 (the default)"),
        ({"workers_min": 4, "workers_max": 2}, "workersMin", "more than workersMax 2"),
        ({"workers_min": -1}, "workersMin", ">= 0"),
        ({"workers_max": -1}, "workersMax", ">= 0"),
        ({"scaler_value": 0}, "scalerValue", ">= 1"),
        ({"gpu_count": 0}, "gpuCount", ">= 1"),
        ({"idle_timeout_s": -1}, "idleTimeout", ">= 0"),
        ({"execution_timeout_ms": -5}, "executionTimeoutMs", ">= 0"),
        ({"workers_max": True}, "workersMax", "whole number"),
        ({"scaler_type": "CPU_LOAD"}, "scalerType", "not a valid ServerlessScalerType"),
        ({"cuda_versions": ["12.4", "12.4"]}, "cudaVersions[1]", "listed twice"),
    ],
)
def test_field_errors_name_the_field(fields: dict[str, Any], field: str, words: str) -> None:
    err = invalid(**fields)
    assert err.field == field
    assert words in err.problem


def test_specs_are_frozen_and_direct_construction_is_checked_too() -> None:
    spec = endpoint()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.workers_max = 9  # type: ignore[misc]
    with pytest.raises(InvalidSpecError) as err:
        ServerlessEndpoint(name="x", image_name="i", gpus=(G.ANY,))
    assert err.value.field == "gpus[0]"
    with pytest.raises(InvalidSpecError) as err:
        ServerlessEndpoint(name="x", image_name="i", gpus=(G.HOPPER_141,), cuda_versions=(V.V11_8,))
    assert err.value.field == "cudaVersions[0]"


# ------------------------------------------------------------------------------------------ live


def test_live_endpoint_runs_the_locked_image() -> None:
    live = LiveServerless.create(name="live-gpu-service", gpus=[G.ADA_24], workers_max=8, workers_min=1)
    assert live.image_name == LIVE_GPU_IMAGE
    assert live.kind is EndpointKind.LIVE
    assert isinstance(live, ServerlessEndpoint)
    assert LiveServerless.create(name="l", image_name=LIVE_GPU_IMAGE).image_name == LIVE_GPU_IMAGE


def test_live_endpoint_refuses_another_image() -> None:
    with pytest.raises(InvalidSpecError) as err:
        LiveServerless.create(name="l", image_name="my-app:latest")
    assert err.value.field == "imageName"
    assert LIVE_GPU_IMAGE in err.value.problem
    with pytest.raises(InvalidSpecError):
        LiveServerless(name="l", image_name="my-app:latest")


def test_endpoint_class_by_kind() -> None:
    assert endpoint_class("live") is LiveServerless
    assert endpoint_class(EndpointKind.SERVERLESS) is ServerlessEndpoint
    with pytest.raises(InvalidSpecError) as err:
        endpoint_class("batch")
    assert err.value.field == "kind"


# ------------------------------------------------------------------------------------------ fallback


def test_fallback_follows_the_preference_order() -> None:
    # "If H200 unavailable, falls back to H100, then A100"
    spec = endpoint(gpus=[G.HOPPER_141, G.ADA_80_PRO, G.AMPERE_80])
    assert fallback_order(spec, set(GpuGroup.all())) == [G.HOPPER_141, G.ADA_80_PRO, G.AMPERE_80]
    assert fallback_order(spec, {G.AMPERE_80, G.ADA_80_PRO}) == [G.ADA_80_PRO, G.AMPERE_80]
    assert fallback_order(spec, {G.AMPERE_80, G.ADA_24}) == [G.AMPERE_80]
    assert fallback_order(spec, set()) == []


@given(
    st.lists(st.sampled_from(GpuGroup.all()), min_size=1, unique=True),
    st.sets(st.sampled_from(GpuGroup.all())),
)
def test_fallback_is_the_spec_order_restricted_to_available(
    groups: list[GpuGroup], available: set[GpuGroup]
) -> None:
    order = fallback_order(endpoint(gpus=groups), available)
    assert order == [g for g in groups if g in available]
