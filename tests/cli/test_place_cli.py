"""``scalar place`` on the example files: the controller's default score (Scalar's) and, with ``--score seed``,
seed 001's decisions from files; bad input exits 2 naming the field."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, CliResult

CLUSTER = EXAMPLES / "cluster_example.json"
NOW = "2025-06-01T12:00:00Z"
Run = Callable[..., CliResult]


def place_json(
    run_cli: Run, job: str | Path, cluster: Path = CLUSTER, now: str = NOW, score: str | None = "seed"
) -> dict[str, Any]:
    """The decision as JSON; seed 001's score unless ``score`` says otherwise (``None``: the default)."""
    chosen = () if score is None else ("--score", score)
    result = run_cli("place", "--cluster", cluster, "--job", EXAMPLES / job, "--now", now, "--json", *chosen)
    assert result.returncode == 0, result.stderr
    payload: dict[str, Any] = json.loads(result.stdout)
    assert payload["packing_score"] == (score or "scalar")
    return payload


def codes(payload: dict[str, Any]) -> dict[str, str]:
    return {r["node_id"]: r["code"] for r in payload["reasons"]}


def test_example_3_shape_a_sharing_job_goes_to_the_fullest_node(run_cli: Run) -> None:
    out = place_json(run_cli, "job_share_4x20gb.json")

    assert out["kind"] == "EXISTING_NODE"
    assert (out["node_id"], out["gpu_indices"]) == ("node-c", [0, 1, 2, 3])
    assert (out["job_id"], out["tier"], out["provider"]) == ("job-share-1", "FAST", "prime")
    assert out["score"] == pytest.approx(0.895)
    assert codes(out) == {
        "node-a": "lower_score",
        "node-b": "lower_score",
        "node-d": "expires_too_soon",
        "node-e": "tier_mismatch",
    }
    by_node = {r["node_id"]: r for r in out["reasons"]}
    assert (by_node["node-a"]["have"], by_node["node-a"]["limit"]) == (
        pytest.approx(0.145),
        pytest.approx(0.895),
    )
    assert by_node["node-d"]["need"] == 7200 + 300
    assert set(by_node["node-d"]) == {"node_id", "code", "resource", "need", "have", "limit", "message"}
    assert out["summary"].startswith(
        "FAST job job-share-1 needs 4x20 GB GPUs (sharing allowed): placed on node-c"
    )


def test_a_non_sharing_job_skips_the_shared_gpus_and_an_expiring_node_scores_lower(run_cli: Run) -> None:
    out = place_json(run_cli, "job_4x60gb.json")

    assert (out["node_id"], out["gpu_indices"]) == ("node-b", [0, 1, 2, 3])
    assert codes(out)["node-c"] == "insufficient_gpus"
    by_node = {r["node_id"]: r for r in out["reasons"]}
    assert (by_node["node-c"]["need"], by_node["node-c"]["have"], by_node["node-c"]["limit"]) == (4, 0, 8)
    # node-d ends in 1h30m: it passes the 1h + 5m filter but pays the expiry penalty 0.25.
    assert by_node["node-d"]["code"] == "lower_score"
    assert by_node["node-d"]["have"] == pytest.approx(0.375 - 0.3 * 0.25)
    assert out["score_terms"] == {
        "utilization": 0.875,
        "fragmentation": 0.0,
        "expiry_penalty": 0.0,
        "provider_bonus": 0.1,
    }


def test_a_job_larger_than_any_node_requests_capacity_from_sfcompute(run_cli: Run) -> None:
    out = place_json(run_cli, "job_10gpus.json")

    assert out["kind"] == "REQUEST_MORE_CAPACITY"
    assert (out["node_id"], out["gpu_indices"], out["score"]) == (None, [], None)
    assert out["provider"] == "sfcompute"
    assert out["reason"]["code"] == "larger_than_any_node"
    assert "no node has 10 GPUs (the largest has 8)" in out["summary"]
    assert len(out["reasons"]) == 5


def test_a_flex_job_for_a_model_nobody_has_is_queued(run_cli: Run) -> None:
    out = place_json(run_cli, "job_flex_h200.json")

    assert (out["kind"], out["provider"]) == ("QUEUE_FOR_FLEX", "prime")
    assert codes(out) == {
        "node-a": "tier_mismatch",
        "node-b": "tier_mismatch",
        "node-c": "tier_mismatch",
        "node-d": "tier_mismatch",
        "node-e": "gpu_model_not_allowed",
    }
    assert "4 nodes are FAST, 1 has a GPU model the job does not allow, none left" in out["summary"]


def test_example_2_fragmentation_from_files(run_cli: Run) -> None:
    out = place_json(run_cli, "job_4x40gb.json", cluster=EXAMPLES / "cluster_fragmentation.json")

    assert (out["node_id"], out["gpu_indices"], out["score"]) == ("node-b-contiguous", [0, 1, 2, 3], 0.5)
    (loser,) = out["reasons"]
    assert loser["node_id"] == "node-a-fragmented"
    assert loser["have"] == pytest.approx(0.5 - 0.5 * 0.75)


# --- the controller's default score --------------------------------------------------------------------------


def test_the_default_is_the_controllers_score_with_seed_001s_filters_and_expiry_term(run_cli: Run) -> None:
    out = place_json(run_cli, "job_4x60gb.json", score=None)

    # with a prior of this one job, node-a and node-b both keep room for the next one like it (0 ticks);
    # the tie goes to the lowest id. node-d ends in 1h30m: expiry penalty 0.25, 30 ticks each.
    assert (out["node_id"], out["gpu_indices"], out["score"]) == ("node-a", [0, 1, 2, 3], 0.0)
    assert out["score_terms"]["provider_bonus"] == 0.0  # not part of Scalar's score
    by_node = {r["node_id"]: r for r in out["reasons"]}
    assert {k: r["code"] for k, r in by_node.items()} == {
        "node-b": "lower_score",
        "node-c": "insufficient_gpus",
        "node-d": "lower_score",
        "node-e": "tier_mismatch",
    }
    assert (by_node["node-d"]["have"], by_node["node-d"]["limit"]) == (-7.5, 0.0)
    share = {r["node_id"]: r for r in place_json(run_cli, "job_share_4x20gb.json", score=None)["reasons"]}
    seed = {r["node_id"]: r for r in place_json(run_cli, "job_share_4x20gb.json")["reasons"]}
    assert share["node-d"]["code"] == "expires_too_soon"  # 1h30m left for a 2 h job: filtered out,
    assert share["node-d"] == seed["node-d"]  # by the same filter under either score


def test_the_default_score_does_not_leave_gpus_no_job_like_this_one_can_use(
    run_cli: Run, tmp_path: Path
) -> None:
    """Seed 001 fills the fuller node (utilization); Scalar's score sees that it would leave 2 GPUs no
    4-GPU job can use and takes the empty node, as the controller would."""
    cluster = json.loads(CLUSTER.read_text())
    cluster["blocks"] = cluster["blocks"][:1]
    held = {"vram_total_gb": 80.0, "vram_used_gb": 80.0, "job_id": "job-train-1"}
    free = {"vram_total_gb": 80.0, "vram_used_gb": 0.0}
    cluster["nodes"] = [
        {"id": "node-a", "block_id": "blk-prime-1", "cpu_used": 8, "ram_used_gb": 64.0,
         "gpu_slots": [{"index": i, **(held if i < 2 else free)} for i in range(8)]},
        {"id": "node-b", "block_id": "blk-prime-1"},
    ]  # fmt: skip
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(cluster))

    scalar = place_json(run_cli, "job_4x60gb.json", cluster=path, score="scalar")
    seed = place_json(run_cli, "job_4x60gb.json", cluster=path, score="seed")

    assert (seed["node_id"], seed["gpu_indices"]) == ("node-a", [2, 3, 4, 5])
    assert (scalar["node_id"], scalar["gpu_indices"], scalar["score"]) == ("node-b", [0, 1, 2, 3], 0.0)
    (loser,) = scalar["reasons"]
    assert (loser["node_id"], loser["code"], loser["have"]) == ("node-a", "lower_score", -200.0)
    assert place_json(run_cli, "job_4x60gb.json", cluster=path, score=None) == scalar


def test_the_default_output_is_a_table_with_the_chosen_node_marked_and_the_summary(run_cli: Run) -> None:
    result = run_cli(
        "place",
        "--cluster",
        CLUSTER,
        "--job",
        EXAMPLES / "job_4x60gb.json",
        "--now",
        "2025-06-01T14:00:00+02:00",
    )

    assert result.returncode == 0, result.stderr
    assert "NODE" in result.stdout and "SCORE" in result.stdout and "RESULT" in result.stdout
    assert "(scalar score)" in result.stdout
    assert "* node-a" in result.stdout
    assert "insufficient_gpus" in result.stdout
    assert "counting expiry penalty 0 x 30" in " ".join(result.stdout.split())
    assert "placed on node-a GPUs 0-3" in result.stdout


def test_score_seed_prints_seed_001s_terms(run_cli: Run) -> None:
    args = ("--cluster", CLUSTER, "--job", EXAMPLES / "job_4x60gb.json", "--now", NOW, "--score", "seed")
    result = run_cli("place", *args)

    assert result.returncode == 0, result.stderr
    assert "(seed score)" in result.stdout and "* node-b" in result.stdout
    assert "provider bonus 0.1" in " ".join(result.stdout.split())


# --- bad input ------------------------------------------------------------------------------------------------


def _cluster() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CLUSTER.read_text())
    return copy.deepcopy(data)


def _job() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / "job_4x60gb.json").read_text())
    return data


def _unknown_block(c: dict[str, Any]) -> None:
    c["nodes"][1]["block_id"] = "blk-nope"


def _duplicate_node(c: dict[str, Any]) -> None:
    c["nodes"][2]["id"] = "node-a"


def _duplicate_block(c: dict[str, Any]) -> None:
    c["blocks"][1]["id"] = "blk-prime-1"


def _duplicate_index(c: dict[str, Any]) -> None:
    c["nodes"][1]["gpu_slots"][3]["index"] = 2


def _vram_over(c: dict[str, Any]) -> None:
    c["nodes"][1]["gpu_slots"][5]["vram_used_gb"] = 90.0


def _negative_cpu(c: dict[str, Any]) -> None:
    c["nodes"][0]["cpu_used"] = -1


def _cpu_over(c: dict[str, Any]) -> None:
    c["nodes"][0]["cpu_used"] = 65


def _naive_time(c: dict[str, Any]) -> None:
    c["blocks"][0]["end_time"] = "2025-06-01T22:00:00"


def _unknown_tier(c: dict[str, Any]) -> None:
    c["nodes"][3]["tier"] = "SLOW"


def _both_holders(c: dict[str, Any]) -> None:
    c["nodes"][2]["gpu_slots"][0]["job_id"] = "job-x"


def _end_before_start(c: dict[str, Any]) -> None:
    c["blocks"][2]["end_time"] = "2025-05-31T00:00:00Z"


def _typo_field(c: dict[str, Any]) -> None:
    c["nodes"][0]["ram_used"] = 1


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (_unknown_block, "nodes[1].block_id", "blk-nope"),
        (_duplicate_node, "nodes[2].id", "twice"),
        (_duplicate_block, "blocks[1].id", "twice"),
        (_duplicate_index, "nodes[1].gpu_slots[3].index", "twice"),
        (_vram_over, "nodes[1].gpu_slots[5].vram_used_gb", "more than vram_total_gb"),
        (_negative_cpu, "nodes[0].cpu_used", "greater than or equal to 0"),
        (_cpu_over, "nodes[0].cpu_used", "cpu_per_node"),
        (_naive_time, "blocks[0].end_time", "timezone"),
        (_unknown_tier, "nodes[3].tier", "unknown tier"),
        (_both_holders, "nodes[2].gpu_slots[0].job_ids", "not both"),
        (_end_before_start, "blocks[2].end_time", "before start_time"),
        (_typo_field, "nodes[0].ram_used", "xtra"),
    ],
    ids=lambda v: getattr(v, "__name__", None) or str(v)[:20],
)
def test_a_bad_cluster_file_exits_2_naming_file_and_field(
    run_cli: Run, tmp_path: Path, mutate: Callable[[dict[str, Any]], None], field: str, words: str
) -> None:
    cluster = _cluster()
    mutate(cluster)
    path = tmp_path / "bad_cluster.json"
    path.write_text(json.dumps(cluster))

    result = run_cli("place", "--cluster", path, "--job", EXAMPLES / "job_4x60gb.json", "--now", NOW)

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "bad_cluster.json" in result.stderr
    assert f"'{field}'" in result.stderr
    assert words in result.stderr


@pytest.mark.parametrize(
    ("key", "value", "field", "words"),
    [
        ("tier", "MEDIUM", "tier", "unknown tier"),
        ("gpu_count", -1, "gpu_count", "greater than or equal to 0"),
        ("gpu_count", 2.5, "gpu_count", "integer"),
        ("vram_per_gpu_gb", "lots", "vram_per_gpu_gb", "number"),
        ("gpu_models", [], "gpu_models", "empty"),
        ("share_gpu", "yes", "share_gpu", "boolean"),
    ],
)
def test_a_bad_job_file_exits_2_naming_file_and_field(
    run_cli: Run, tmp_path: Path, key: str, value: object, field: str, words: str
) -> None:
    job = _job()
    job[key] = value
    path = tmp_path / "bad_job.json"
    path.write_text(json.dumps(job))

    result = run_cli("place", "--cluster", CLUSTER, "--job", path, "--now", NOW)

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "bad_job.json" in result.stderr
    assert f"'{field}'" in result.stderr
    assert words in result.stderr


@pytest.mark.parametrize(
    ("now", "words"),
    [("yesterday", "not an ISO 8601 time"), ("2025-06-01T12:00:00", "no time zone")],
)
def test_a_bad_now_exits_2(run_cli: Run, now: str, words: str) -> None:
    result = run_cli("place", "--cluster", CLUSTER, "--job", EXAMPLES / "job_4x60gb.json", "--now", now)

    assert result.returncode == 2
    assert "--now" in result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_file_and_broken_json_exit_2(run_cli: Run, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"blocks": [')

    missing = run_cli(
        "place", "--cluster", tmp_path / "nope.json", "--job", EXAMPLES / "job_4x60gb.json", "--now", NOW
    )
    invalid = run_cli("place", "--cluster", broken, "--job", EXAMPLES / "job_4x60gb.json", "--now", NOW)

    assert (missing.returncode, invalid.returncode) == (2, 2)
    assert "nope.json" in missing.stderr and "not found" in missing.stderr
    assert "broken.json" in invalid.stderr and "not valid JSON" in invalid.stderr
    assert "Traceback" not in missing.stderr + invalid.stderr
