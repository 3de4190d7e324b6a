"""``scalar endpoint validate SPEC.json``: the normalized spec, or exit 2 naming the file and the field."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scalar.domain.endpoints import LIVE_GPU_IMAGE
from scalar.domain.gpus import GpuGroup
from tests.conftest import EXAMPLES, CliResult

Run = Callable[..., CliResult]
ALL = [g.value for g in GpuGroup.all()]


def validate_json(run_cli: Run, path: Path) -> dict[str, Any]:
    result = run_cli("endpoint", "validate", path, "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def write(tmp_path: Path, payload: Any, name: str = "spec.json") -> Path:
    path = tmp_path / name
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return path


def assert_user_error(result: CliResult, *words: str) -> None:
    assert result.returncode == 2, result.stdout
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")
    for word in words:
        assert word in result.stderr, result.stderr


def test_serverless_example_normalized(run_cli: Run) -> None:
    data = validate_json(run_cli, EXAMPLES / "endpoint_serverless.json")
    assert data == {
        "kind": "serverless",
        "name": "auto-scaling-inference",
        "imageName": "pytorch:latest",
        "gpus": ["AMPERE_80", "ADA_80_PRO"],
        "gpuIds": "AMPERE_80,ADA_80_PRO",
        "cudaVersions": ["12.4", "12.8"],
        "allowedCudaVersions": "12.4,12.8",
        "workersMin": 1,
        "workersMax": 10,
        "scalerType": "QUEUE_DELAY",
        "scalerValue": 4,
        "gpuCount": 1,
        "idleTimeout": 5,
        "executionTimeoutMs": 0,
        "locations": None,
    }


def test_any_example_expands_every_group_once(run_cli: Run) -> None:
    data = validate_json(run_cli, EXAMPLES / "endpoint_any.json")
    assert data["gpus"] == ALL
    assert data["gpuIds"] == ",".join(ALL)
    assert (data["scalerType"], data["scalerValue"]) == ("REQUEST_COUNT", 50)


def test_live_example_gets_the_locked_image(run_cli: Run) -> None:
    data = validate_json(run_cli, EXAMPLES / "endpoint_live.json")
    assert (data["kind"], data["imageName"]) == ("live", LIVE_GPU_IMAGE)
    assert data["gpus"] == ["ADA_24"]


def test_api_fields_example_parses_gpu_ids_and_notes_the_repeat(run_cli: Run) -> None:
    result = run_cli("endpoint", "validate", EXAMPLES / "endpoint_api_fields.json", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["gpus"] == ["AMPERE_48", "ADA_24", "ADA_48_PRO"]
    assert data["cudaVersions"] == ["12.1", "11.8"]
    assert data["imageName"] == "runpod/tetra-rp:latest"
    assert data["locations"] == "EU-RO-1"
    assert "note:" in result.stderr and "AMPERE_48" in result.stderr


def test_fallback_example_keeps_the_preference_order(run_cli: Run) -> None:
    data = validate_json(run_cli, EXAMPLES / "endpoint_fallback.json")
    assert data["gpus"] == ["HOPPER_141", "ADA_80_PRO", "AMPERE_80"]


def test_cuda_too_old_example_exits_2_naming_file_field_and_group(run_cli: Run) -> None:
    path = EXAMPLES / "endpoint_invalid_cuda.json"
    result = run_cli("endpoint", "validate", path)
    assert_user_error(
        result,
        f"{path}: field 'cudaVersions[0]': CUDA 11.8 is too old for HOPPER_141 (Hopper needs 12.0+)",
    )


def test_default_output_is_a_summary_table(run_cli: Run) -> None:
    result = run_cli("endpoint", "validate", EXAMPLES / "endpoint_fallback.json")
    assert result.returncode == 0, result.stderr
    for word in ("FIELD", "VALUE", "GPU GROUPS", "HOPPER_141", "H200", "Hopper", "12.0+", "fallback-example"):
        assert word in result.stdout


def test_the_normalized_output_validates_to_itself(run_cli: Run, tmp_path: Path) -> None:
    first = validate_json(run_cli, EXAMPLES / "endpoint_api_fields.json")
    again = validate_json(run_cli, write(tmp_path, first))
    assert again == first


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        (
            {"name": "x", "imageName": "i", "gpus": ["invalid_gpu"]},
            ["field 'gpus[0]'", "'invalid_gpu' is not a valid GpuGroup"],
        ),
        ({"name": "x", "gpus": ["ADA_24"]}, ["field 'imageName'", "is required"]),
        (
            {"name": "x", "imageName": "i", "workerMax": 3},
            ["field 'workerMax'", "unknown field", "workersMax"],
        ),
        ({"name": "x", "imageName": "i", "workersMin": "1"}, ["field 'workersMin'"]),
        (
            {"name": "x", "imageName": "i", "workersMin": 4, "workersMax": 2},
            ["field 'workersMin'", "more than workersMax 2"],
        ),
        (
            {"name": "x", "imageName": "i", "gpus": ["ADA_24"], "gpuIds": "AMPERE_48"},
            ["field 'gpuIds'", "disagrees"],
        ),
        ({"kind": "live", "name": "x", "imageName": "mine:1"}, ["field 'imageName'", LIVE_GPU_IMAGE]),
        ({"live": True, "kind": "serverless", "name": "x"}, ["field 'live'", "contradicts"]),
        (
            {"name": "x", "imageName": "i", "cudaVersions": ["13.9"]},
            ["field 'cudaVersions[0]'", "not a valid CudaVersion"],
        ),
        (
            {"name": "x", "imageName": "i", "gpuIds": "ADA_80_PRO", "allowedCudaVersions": "11.8"},
            ["field 'allowedCudaVersions[0]'", "ADA_80_PRO"],
        ),
        ([1, 2], ["spec.json"]),
    ],
)
def test_bad_specs_exit_2_naming_file_and_field(
    run_cli: Run, tmp_path: Path, payload: Any, words: list[str]
) -> None:
    path = write(tmp_path, payload)
    assert_user_error(run_cli("endpoint", "validate", path, "--json"), str(path), *words)


def test_unreadable_files_exit_2(run_cli: Run, tmp_path: Path) -> None:
    broken = write(tmp_path, "{not json", "broken.json")
    assert_user_error(run_cli("endpoint", "validate", broken), "broken.json", "not valid JSON")
    assert_user_error(run_cli("endpoint", "validate", tmp_path / "missing.json"), "missing.json", "not found")
