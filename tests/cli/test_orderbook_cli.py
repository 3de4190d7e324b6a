"""``scalar orderbook``: the seed's GET /orderbook answer from a BOOK.json file."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, CliResult

SEED_BOOK = EXAMPLES / "book_seed000.json"
COMPLEX_BOOK = EXAMPLES / "book_complex.json"

Run = Callable[..., CliResult]


def run_json(run_cli: Run, *args: str | Path) -> dict[str, Any]:
    result = run_cli("orderbook", *args, "--json")
    assert result.returncode == 0, result.stderr
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def write_book(tmp_path: Path, book: dict[str, Any], name: str = "book.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(book))
    return path


def test_seed_book_for_8_nodes_answers_the_formula_25_00_at_index_2(run_cli: Run) -> None:
    out = run_json(run_cli, "--book", SEED_BOOK, "--nodes", "8")

    assert out["instance_type"] == "8xH100"
    assert (out["optimal_price"], out["optimal_index"]) == (25, 2)
    assert out["spread"] == 1
    assert (out["total_ask_liquidity"], out["total_bid_liquidity"]) == (432, 120)
    assert [a["cumulative_quantity"] for a in out["asks"]] == [32, 96, 224, 272, 368, 432]
    assert out["asks"][0] == {
        "price": 24,
        "quantity_gpus": 32,
        "duration_hours": 168,
        "cumulative_quantity": 32,
    }
    assert out["bids"][0] == {"price": 23, "quantity_gpus": 16, "duration_hours": 24}
    assert out["metadata"] == {"required_gpus": 64, "node_count": 8, "gpus_per_node": 8}
    assert out["last_updated"] == "2025-01-09T12:00:00Z"
    assert out["insufficient_liquidity"] is False
    assert out["fill"]["vwap"] == 24.25
    assert out["fill"]["worst_price"] == 24.5
    assert out["fill"]["filled_gpus"] == 64
    assert out["fill"]["slippage"] == {"per_gpu_hour": 0.25, "fraction": 0.010417}
    chosen = [s for s in out["scores"] if s["optimal"]]
    assert [s["index"] for s in chosen] == [2]
    assert chosen[0]["score"] == pytest.approx(1.492)
    assert out["reason"]["code"] == "optimal_level"
    assert out["warnings"] == []


def test_the_table_marks_the_optimal_row_and_explains_it(run_cli: Run) -> None:
    result = run_cli("orderbook", "--book", SEED_BOOK, "--nodes", "8")

    assert result.returncode == 0, result.stderr
    optimal_rows = [line for line in result.stdout.splitlines() if "OPTIMAL" in line]
    assert len(optimal_rows) == 1 and "$25.00" in optimal_rows[0]
    assert "Optimal price: $25.00/GPU-h at sorted ask 2" in result.stdout
    assert "Spread: $1.00 ($24.00 - $23.00)" in result.stdout
    assert "Liquidity: asks 432 GPUs, bids 120 GPUs" in result.stdout
    words = " ".join(result.stdout.split())  # an explanation wraps at $COLUMNS (when set)
    assert "VWAP of $24.25/GPU-h" in words
    assert "score 1.492 vs 1.477" in words
    assert "Last updated: 2025-01-09T12:00:00Z" in result.stdout


def test_gpus_per_node_changes_the_requirement(run_cli: Run) -> None:
    out = run_json(run_cli, "--book", SEED_BOOK, "--nodes", "4", "--gpus-per-node", "4")

    assert out["metadata"] == {"required_gpus": 16, "node_count": 4, "gpus_per_node": 4}
    assert out["fill"]["vwap"] == 24  # 16 GPUs fit in the cheapest ask


def test_insufficient_liquidity_is_flagged_and_falls_back_to_the_lowest_ask(run_cli: Run) -> None:
    out = run_json(run_cli, "--book", SEED_BOOK, "--nodes", "100")

    assert out["insufficient_liquidity"] is True
    assert (out["optimal_price"], out["optimal_index"]) == (24, 0)
    assert out["fill"]["filled_gpus"] == 432
    assert out["scores"] == []
    assert [w["code"] for w in out["warnings"]] == ["insufficient_liquidity"]
    assert out["warnings"][0]["need"] == 800 and out["warnings"][0]["have"] == 432


def test_complex_book_indexes_the_sorted_asks(run_cli: Run) -> None:
    out = run_json(run_cli, "--book", COMPLEX_BOOK, "--nodes", "2")

    assert [a["price"] for a in out["asks"]] == [2.9, 2.95, 3, 3, 3.1, 3.5]
    assert [a["quantity_gpus"] for a in out["asks"]][2:4] == [10, 3]  # equal prices keep input order
    assert (out["optimal_price"], out["optimal_index"]) == (3.5, 5)
    assert out["asks"][out["optimal_index"]]["price"] == out["optimal_price"]
    assert out["last_updated"] == "2025-03-02T07:30:00Z"  # given with +01:00, printed in UTC


def test_empty_book_answers_null_with_warnings(run_cli: Run, tmp_path: Path) -> None:
    book = write_book(
        tmp_path, {"instance_type": "8xH100", "asks": [], "last_updated": "2025-01-01T00:00:00Z"}
    )

    out = run_json(run_cli, "--book", book, "--nodes", "1")

    assert (out["optimal_price"], out["optimal_index"], out["spread"]) == (None, None, None)
    assert out["bids"] == [] and out["fill"] is None
    assert {w["code"] for w in out["warnings"]} == {"no_asks", "no_bids"}


def test_last_updated_defaults_to_the_files_modification_time(run_cli: Run, tmp_path: Path) -> None:
    book = write_book(
        tmp_path, {"instance_type": "8xH100", "asks": [{"price": 2, "quantity_gpus": 8, "duration_hours": 1}]}
    )
    moment = datetime(2024, 6, 1, 9, 30, tzinfo=UTC).timestamp()
    os.utime(book, (moment, moment))

    out = run_json(run_cli, "--book", book, "--nodes", "1")

    assert out["last_updated"] == "2024-06-01T09:30:00Z"


def test_an_instance_type_that_disagrees_with_gpus_per_node_gets_a_note(run_cli: Run, tmp_path: Path) -> None:
    book = write_book(
        tmp_path, {"instance_type": "4xA100", "asks": [{"price": 2, "quantity_gpus": 8, "duration_hours": 1}]}
    )

    result = run_cli("orderbook", "--book", book, "--nodes", "1")

    assert result.returncode == 0
    assert "4xA100 suggests 4 GPUs per node" in result.stderr


def _ask(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"price": 2.5, "quantity_gpus": 8, "duration_hours": 168}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


@pytest.mark.parametrize(
    ("book", "field"),
    [
        ({"instance_type": "x", "asks": [_ask(), _ask(), _ask(price=-1)]}, "asks[2].price"),
        ({"instance_type": "x", "asks": [_ask(price=0)]}, "asks[0].price"),
        ({"instance_type": "x", "asks": [_ask(price="2.5")]}, "asks[0].price"),
        ({"instance_type": "x", "asks": [_ask(quantity_gpus=-4)]}, "asks[0].quantity_gpus"),
        ({"instance_type": "x", "asks": [_ask(quantity_gpus=1.5)]}, "asks[0].quantity_gpus"),
        ({"instance_type": "x", "asks": [_ask(duration_hours=None)]}, "asks[0].duration_hours"),
        ({"instance_type": "x", "asks": [_ask(duration_hours=0)]}, "asks[0].duration_hours"),
        ({"instance_type": "x", "asks": [], "bids": [_ask(), _ask(price=None)]}, "bids[1].price"),
        ({"asks": []}, "instance_type"),
        ({"instance_type": "x"}, "asks"),
        ({"instance_type": "x", "asks": [], "last_updated": "2025-01-01T00:00:00"}, "last_updated"),
        ({"instance_type": "x", "asks": [], "typo": 1}, "typo"),
    ],
)
def test_bad_books_exit_2_naming_the_file_and_field(
    run_cli: Run, tmp_path: Path, book: dict[str, Any], field: str
) -> None:
    path = write_book(tmp_path, book, "bad_book.json")

    result = run_cli("orderbook", "--book", path, "--nodes", "1")

    assert result.returncode == 2
    assert "bad_book.json" in result.stderr
    assert f"'{field}'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_file_that_is_not_json_exits_2(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")

    result = run_cli("orderbook", "--book", path, "--nodes", "1")

    assert result.returncode == 2
    assert "broken.json" in result.stderr and "not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "0"], "--nodes"),
        (["--nodes", "-2"], "--nodes"),
        (["--nodes", "1", "--gpus-per-node", "0"], "--gpus-per-node"),
    ],
)
def test_nodes_and_gpus_per_node_must_be_positive(run_cli: Run, args: list[str], message: str) -> None:
    result = run_cli("orderbook", "--book", SEED_BOOK, *args)

    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_book_file_exits_2(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli("orderbook", "--book", tmp_path / "nope.json", "--nodes", "1")

    assert result.returncode == 2
    assert "nope.json" in result.stderr and "not found" in result.stderr
