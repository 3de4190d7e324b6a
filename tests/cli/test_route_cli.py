"""``scalar route`` end to end: example files in, tables or JSON out; bad input exits 2 naming file and field."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, CliResult

Run = Callable[..., CliResult]
NOW = "2026-03-01T12:00:00Z"


def _json(result: CliResult) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _unmet(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {",".join(u["task_ids"]): u["reason"] for u in payload["unmet_entries"]}


def test_gpu_example_json(run_cli: Run) -> None:
    payload = _json(
        run_cli(
            "route",
            "--groups",
            EXAMPLES / "groups_gpu.json",
            "--demand",
            EXAMPLES / "demand_gpu.json",
            "--json",
            "--now",
            NOW,
        )
    )
    # Four 2-GPU H100 tasks share one 8-GPU slice; cpu-pool launches one slice for min_slices.
    assert payload["group_to_launch"] == {"h100-spot": 1, "cpu-pool": 1}
    demand = json.loads((EXAMPLES / "demand_gpu.json").read_text())
    assert payload["routed_entries"] == {"h100-spot": demand[:4], "a100-80gb": [demand[4]]}
    unmet = _unmet(payload)
    assert {k: v["code"] for k, v in unmet.items()} == {
        "t-6": "group_unavailable",
        "t-7": "no_matching_group",
        "t-8": "insufficient_resources",
        "t-9": "at_max_slices",
    }
    assert unmet["t-8"] | {"message": ""} == {
        "code": "insufficient_resources",
        "resource": "gpu_count",
        "need": 16,
        "have": 8,
        "limit": None,
        "message": "",
    }
    assert (unmet["t-9"]["need"], unmet["t-9"]["have"], unmet["t-9"]["limit"]) == (1, 0, 2)
    assert payload["launch_reasons"]["cpu-pool"]["code"] == "min_slices"
    assert [d["code"] for d in payload["decisions"][:5]] == [
        "new_slice",
        "planned_capacity",
        "planned_capacity",
        "planned_capacity",
        "in_flight_capacity",
    ]


def test_tpu_example_from_iris_config(run_cli: Run) -> None:
    payload = _json(
        run_cli(
            "route",
            "--groups",
            EXAMPLES / "groups_tpu.json",
            "--demand",
            EXAMPLES / "demand_tpu.json",
            "--json",
        )
    )
    assert payload["group_to_launch"] == {"tpu_v5e_16": 1}
    assert [e["coschedule_group_id"] for e in payload["routed_entries"]["tpu_v5e_16"]] == ["train"]
    unmet = {u["task_ids"][0]: u["reason"] for u in payload["unmet_entries"]}
    assert (unmet["eval-0"]["code"], unmet["eval-0"]["need"], unmet["eval-0"]["have"]) == (
        "coschedule_mismatch",
        8,
        16,
    )
    assert (unmet["probe-0"]["code"], unmet["probe-0"]["resource"]) == ("no_matching_group", "constraints")
    (pending,) = payload["pending_groups"]
    assert pending["slices"][0]["coscheduled"] is True
    assert [vm for vm in pending["slices"][0]["vms"]] == [[f"train-{i}"] for i in range(16)]


def test_default_output_is_tables(run_cli: Run) -> None:
    result = run_cli(
        "route",
        "--groups",
        EXAMPLES / "groups_gpu.json",
        "--demand",
        EXAMPLES / "demand_gpu.json",
        "--now",
        NOW,
    )
    assert result.returncode == 0, result.stderr
    for text in (
        "Groups to launch",
        "Routed entries",
        "Unmet entries",
        "h100-spot",
        "GROUP",
        "group_unavailable",
    ):
        assert text in result.stdout


def test_defaults_and_aliases(run_cli: Run, tmp_path: Path) -> None:
    groups = [
        {
            "name": "tpu",
            "max_slices": 2,
            "device_type": "TPU",
            "resources": {"cpu": 8, "ram": "16GiB", "tpu_count": 4},
        }
    ]
    demand = [
        {"task_ids": ["p"], "device_type": "tpu", "resources": {"tpu_chip_count": 4, "memory_bytes": "8GiB"}}
    ]
    payload = _json(
        run_cli(
            "route",
            "--groups",
            _write(tmp_path, "g.json", groups),
            "--demand",
            _write(tmp_path, "d.json", demand),
            "--json",
        )
    )
    assert payload["group_to_launch"] == {"tpu": 1}
    assert payload["routed_entries"]["tpu"] == [
        {
            "task_ids": ["p"],
            "coschedule_group_id": None,
            "device_type": "tpu",
            "device_variant": None,
            "preemptible": None,
            "resources": {"cpu": 0, "memory_bytes": 8 * 1024**3, "gpu_count": 0, "tpu_count": 4},
        }
    ]


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


GOOD_GROUP: dict[str, Any] = {
    "name": "h100",
    "max_slices": 2,
    "device_type": "gpu",
    "resources": {"cpu": 96, "memory_bytes": 1024, "gpu_count": 8},
}
GOOD_ENTRY: dict[str, Any] = {"task_ids": ["t-1"], "device_type": "gpu", "resources": {"gpu_count": 1}}


@pytest.mark.parametrize(
    ("groups", "demand", "bad_file", "field"),
    [
        ([GOOD_GROUP, GOOD_GROUP], [GOOD_ENTRY], "groups.json", "[1].name"),
        (
            [GOOD_GROUP | {"slice_state_counts": {"ready": -1}}],
            [GOOD_ENTRY],
            "groups.json",
            "[0].slice_state_counts.ready",
        ),
        ([GOOD_GROUP | {"min_slices": 3}], [GOOD_ENTRY], "groups.json", "[0].min_slices"),
        ([GOOD_GROUP | {"availability": "sleeping"}], [GOOD_ENTRY], "groups.json", "[0].availability"),
        ([GOOD_GROUP | {"max_slices": -1}], [GOOD_ENTRY], "groups.json", "[0].max_slices"),
        ([GOOD_GROUP | {"device_type": "fpga"}], [GOOD_ENTRY], "groups.json", "[0].device_type"),
        ([GOOD_GROUP], [GOOD_ENTRY | {"task_ids": []}], "demand.json", "[0].task_ids"),
        ([GOOD_GROUP], [GOOD_ENTRY, GOOD_ENTRY], "demand.json", "[1].task_ids"),
        (
            [GOOD_GROUP],
            [GOOD_ENTRY | {"resources": {"gpu_count": -2}}],
            "demand.json",
            "[0].resources.gpu_count",
        ),
        ([GOOD_GROUP], [GOOD_ENTRY | {"preemptible": "maybe"}], "demand.json", "[0].preemptible"),
    ],
    ids=[
        "duplicate-group-name",
        "negative-count",
        "min-above-max",
        "unknown-availability",
        "negative-max",
        "unknown-device",
        "empty-task-ids",
        "duplicate-task-id",
        "negative-gpus",
        "bad-preemptible",
    ],
)
def test_bad_input_exits_2_naming_file_and_field(
    run_cli: Run, tmp_path: Path, groups: Any, demand: Any, bad_file: str, field: str
) -> None:
    result = run_cli(
        "route",
        "--groups",
        _write(tmp_path, "groups.json", groups),
        "--demand",
        _write(tmp_path, "demand.json", demand),
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert bad_file in result.stderr and f"field '{field}'" in result.stderr, result.stderr


def test_missing_file_and_bad_now(run_cli: Run, tmp_path: Path) -> None:
    missing = run_cli("route", "--groups", tmp_path / "nope.json", "--demand", EXAMPLES / "demand_gpu.json")
    assert missing.returncode == 2 and "nope.json" in missing.stderr and "Traceback" not in missing.stderr
    bad_now = run_cli(
        "route",
        "--groups",
        EXAMPLES / "groups_gpu.json",
        "--demand",
        EXAMPLES / "demand_gpu.json",
        "--now",
        "soon",
    )
    assert bad_now.returncode == 2 and "--now" in bad_now.stderr and "Traceback" not in bad_now.stderr
