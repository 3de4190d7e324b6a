"""``scalar quote``: seed 002's placement from files, as a real process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, CliResult

Run = Callable[..., CliResult]

CLOUDS = EXAMPLES / "prices_gpu_clouds.json"
SEED_STYLE = EXAMPLES / "prices_seed_style.json"


def quote_json(run_cli: Run, prices: Path, req: Path, *extra: str) -> dict[str, object]:
    result = run_cli("quote", "--prices", prices, "--requirements", req, "--json", *extra)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    payload: dict[str, object] = json.loads(result.stdout)
    return payload


def write(tmp_path: Path, name: str, payload: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(payload))
    return path


def test_eight_h100s_from_real_cloud_prices(run_cli: Run) -> None:
    out = quote_json(run_cli, CLOUDS, EXAMPLES / "requirements_8xh100.json")
    # Fitting offers in the preferred regions: p5 spot usw2-az1 $12.6935, usw2-az4 $16.1301, on-demand $55.04.
    assert (out["provider"], out["region"], out["availabilityZone"]) == ("aws", "us-west-2", "usw2-az1")
    assert out["instanceType"] == "p5.48xlarge"
    assert out["pricePerHour"] == 12.6935
    assert out["pricePerGpuHour"] == pytest.approx(12.6935 / 8, abs=1e-6)
    alternatives = out["alternatives"]
    assert isinstance(alternatives, list)
    assert [a["pricePerHour"] for a in alternatives] == [16.1301, 55.04]
    for a in alternatives:
        assert set(a) == {
            "provider",
            "region",
            "availabilityZone",
            "instanceType",
            "pricePerHour",
            "pricePerGpuHour",
            "score",
        }
    scores = [out["score"], *(a["score"] for a in alternatives)]
    assert scores == sorted(scores, reverse=True)
    assert out["scorer"] == "default"
    removed = {f["filter"]: f["removed"] for f in out["removedBy"]}  # type: ignore[attr-defined]
    assert removed["gpuType"] == 7 and removed["maxInterruptionRate"] == 2


def test_the_seed_scorer_cannot_see_prices_above_ten_dollars(run_cli: Run) -> None:
    out = quote_json(run_cli, CLOUDS, EXAMPLES / "requirements_8xh100.json", "--scorer", "seed")
    # Every candidate scores 0 on price; the on-demand p5 (rate 0) wins at 4.3x the price.
    assert out["pricePerHour"] == 55.04 and out["scorer"] == "seed"


def test_one_gpu_on_a_budget(run_cli: Run) -> None:
    out = quote_json(run_cli, CLOUDS, EXAMPLES / "requirements_a100_budget.json")
    assert out["instanceType"] == "Standard_NC24ads_A100_v4" and out["pricePerHour"] == 0.444433
    assert out["availabilityZone"] is None


def test_seed_style_records_with_millisecond_timestamps_and_region_fallback(run_cli: Run) -> None:
    out = quote_json(run_cli, SEED_STYLE, EXAMPLES / "requirements_seed_t4.json")
    assert out["instanceType"] == "Standard_NC4as_T4_v3" and out["region"] == "westus2"
    reason_codes = [r["code"] for r in out["reasons"]]  # type: ignore[attr-defined]
    assert "region_fallback" in reason_codes and "bandwidth_not_checked" in reason_codes
    assert out["regionFallback"] is True


def test_default_output_is_a_table_with_price_per_gpu_hour(run_cli: Run) -> None:
    result = run_cli("quote", "--prices", CLOUDS, "--requirements", EXAMPLES / "requirements_8xh100.json")
    assert result.returncode == 0, result.stderr
    for header in ("RANK", "PROVIDER", "INSTANCE_TYPE", "OFFER", "PER_GPU_H", "SCORE"):
        assert header in result.stdout
    assert "usw2-az1" in result.stdout and "$1.59" in result.stdout and "$12.69/h" in result.stdout
    assert "1 (chosen)" in result.stdout


def test_no_match_exits_1_with_filter_counts_and_a_fix(run_cli: Run) -> None:
    result = run_cli("quote", "--prices", CLOUDS, "--requirements", EXAMPLES / "requirements_no_match.json")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    err = result.stderr
    assert err.startswith("error: No suitable instances")
    assert "maxPricePerHour (<= $13/h) removed 6" in err
    assert "maxInterruptionRate (interruption rate <= 0.05, unpublished = 0.1) removed 1" in err
    assert (
        "To fix:" in err
        and "raise maxPricePerHour to $55.04" in err
        and "raise maxInterruptionRate to 0.075" in err
    )


def test_a_zero_price_cap_is_a_real_limit_on_the_command_line(run_cli: Run, tmp_path: Path) -> None:
    req = write(tmp_path, "req.json", {"minCPU": 0, "minMemoryGB": 0, "maxPricePerHour": 0})
    result = run_cli("quote", "--prices", CLOUDS, "--requirements", req)
    assert result.returncode == 1 and "maxPricePerHour (<= $0/h) removed 18" in result.stderr


def test_omitted_min_cpu_and_memory_mean_no_minimum(run_cli: Run, tmp_path: Path) -> None:
    req = write(tmp_path, "req.json", {"gpuType": "nvidia-a100"})
    out = quote_json(run_cli, CLOUDS, req)
    removed = {f["filter"]: f["removed"] for f in out["removedBy"]}  # type: ignore[attr-defined]
    assert removed["minCPU"] == 0 and removed["minMemoryGB"] == 0
    assert out["instanceType"] in {"p4d.24xlarge", "Standard_ND96asr_v4"}  # the two A100 (40 GB) shapes


@pytest.mark.parametrize(
    ("prices", "field", "problem"),
    [
        (
            [{"provider": "aws", "region": "r", "instanceType": "x", "vcpu": 1, "memoryGB": 1}],
            "[0].pricePerHour",
            "Field required",
        ),
        (
            [
                {
                    "provider": "aws",
                    "region": "r",
                    "instanceType": "x",
                    "pricePerHour": -1,
                    "vcpu": 1,
                    "memoryGB": 1,
                }
            ],
            "[0].pricePerHour",
            "greater than or equal to 0",
        ),
        (
            [
                {
                    "provider": "aws",
                    "region": "r",
                    "instanceType": "x",
                    "pricePerHour": "1.5",
                    "vcpu": 1,
                    "memoryGB": 1,
                }
            ],
            "[0].pricePerHour",
            "valid number",
        ),
        (
            [
                {
                    "provider": "aws",
                    "region": "r",
                    "instanceType": "x",
                    "pricePerHour": 1,
                    "vcpu": 1,
                    "memoryGB": 1,
                    "interruptionRate": 2,
                }
            ],
            "[0].interruptionRate",
            "less than or equal to 1",
        ),
        (
            [
                {
                    "provider": "aws",
                    "region": "r",
                    "instanceType": "x",
                    "pricePerHour": 1,
                    "vcpu": 1,
                    "memoryGB": 1,
                    "timestamp": "yesterday",
                }
            ],
            "[0].timestamp",
            "ISO 8601",
        ),
        ({"provider": "aws"}, "(top level)", "valid list"),
    ],
)
def test_malformed_prices_exit_2_naming_file_and_field(
    run_cli: Run, tmp_path: Path, prices: object, field: str, problem: str
) -> None:
    path = write(tmp_path, "prices.json", prices)
    result = run_cli("quote", "--prices", path, "--requirements", EXAMPLES / "requirements_8xh100.json")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert str(path) in result.stderr and f"field '{field}'" in result.stderr and problem in result.stderr


@pytest.mark.parametrize(
    ("req", "field", "problem"),
    [
        ({"minCPU": 8, "maxPricePerHr": 10}, "maxPricePerHr", "Extra inputs are not permitted"),
        ({"minCPU": True}, "minCPU", "valid number"),
        ({"gpuType": ""}, "gpuType", "at least 1 character"),
        ({"maxInterruptionRate": 1.5}, "maxInterruptionRate", "less than or equal to 1"),
        ({"preferredRegions": "us-east-1"}, "preferredRegions", "valid list"),
    ],
)
def test_malformed_requirements_exit_2_naming_file_and_field(
    run_cli: Run, tmp_path: Path, req: object, field: str, problem: str
) -> None:
    path = write(tmp_path, "req.json", req)
    result = run_cli("quote", "--prices", CLOUDS, "--requirements", path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert str(path) in result.stderr and f"field '{field}'" in result.stderr and problem in result.stderr


def test_unreadable_files_and_unknown_scorer_exit_2(run_cli: Run, tmp_path: Path) -> None:
    missing = run_cli(
        "quote", "--prices", tmp_path / "nope.json", "--requirements", EXAMPLES / "requirements_8xh100.json"
    )
    assert missing.returncode == 2 and "nope.json: file not found" in missing.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    bad_json = run_cli("quote", "--prices", broken, "--requirements", EXAMPLES / "requirements_8xh100.json")
    assert bad_json.returncode == 2 and "is not valid JSON" in bad_json.stderr
    scorer = run_cli(
        "quote",
        "--prices",
        CLOUDS,
        "--requirements",
        EXAMPLES / "requirements_8xh100.json",
        "--scorer",
        "cheapest",
    )
    assert scorer.returncode == 2 and "Traceback" not in scorer.stderr
