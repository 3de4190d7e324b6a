"""``scalar status``, ``explain``, ``nodes``, ``blocks``, ``costs``, ``orderbook`` (live) and ``submit``'s cost
preview against a real control plane served on loopback.

The control plane's time is injected and driven here, so the cluster holds still while the commands read
it: one job RUNNING on bought capacity and one PENDING with its nodes rejected and a purchase in flight.
Most commands run in-process (typer's runner, real HTTP); one runs as a real ``scalar`` process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from typer.testing import CliRunner

from scalar.api.app import create_app
from scalar.cli.main import app
from scalar.runtime import ControlPlane
from tests.api.live_server import serve
from tests.conftest import CliResult
from tests.runtime.helpers import Clock, drive, job, settings_for

runner = CliRunner()


@dataclass
class Live:
    url: str
    plane: ControlPlane
    running: str
    pending: str


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("status-cli")
    clock = Clock()
    plane = ControlPlane(settings_for(f"sqlite:///{tmp}/scalar.db", tmp), clock=clock)
    plane.run_once()
    try:
        running = plane.submit_job(job(5, 600, vram_per_gpu_gb=40, name="small")).id  # an 8-GPU node
        drive([plane], clock, 20)
        pending = plane.submit_job(job(8, 600, vram_per_gpu_gb=40, name="big")).id
        drive([plane], clock, 1)
        assert plane.get_job(running).state == "RUNNING"  # type: ignore[union-attr]
        assert plane.get_job(pending).state == "PENDING"  # type: ignore[union-attr]
        with serve(create_app(plane)) as url:
            yield Live(url, plane, str(running), str(pending))
    finally:
        plane.stop()


def cli(live: Live, *args: str, stdin: str | None = None) -> Any:
    result = runner.invoke(app, [*args, "--server", live.url], input=stdin)
    return result


def ok(live: Live, *args: str) -> str:
    result = cli(live, *args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return str(result.stdout)


def as_json(live: Live, *args: str) -> Any:
    return json.loads(ok(live, *args, "--json"))


def table_row(out: str, first: str) -> list[str]:
    return next(line.split() for line in out.splitlines() if line.split()[:1] == [first])


def test_status_prints_counts_with_totals_and_json(live: Live) -> None:
    out = ok(live, "status")
    assert "leader" in out
    for header in ("STATE", "JOBS", "NODES", "SLICES", "PROVIDER", "SPEND_USD"):
        assert header in out
    assert table_row(out, "RUNNING") == ["RUNNING", "1"] and table_row(out, "PENDING") == ["PENDING", "1"]
    assert table_row(out, "FAILED") == ["FAILED", "0"]  # every state, 0 included
    assert table_row(out, "suspect") == ["suspect", "0", "0"]  # nodes and slices both count it
    assert "GPUs on READY nodes: 5 of 8 allocated, 3 idle" in out
    data = as_json(live, "status")
    assert data["jobs_total"] == 2 and data["health"]["role"] == "leader"
    assert table_row(out, "TOTAL")[:2] == ["TOTAL", "2"]
    assert Decimal(data["spend"]["accrued"]) > 0


def test_explain_names_the_rejected_nodes_with_counts(live: Live) -> None:
    out = ok(live, "explain", live.pending)
    data = as_json(live, "explain", live.pending)
    rejected = data["placement"]["nodes_rejected"]
    assert rejected >= 1
    assert out.startswith(f"PENDING: {data['reason']}")
    assert table_row(out, "queue_position") == ["queue_position", "1", "of", "1"]
    assert table_row(out, "nodes_rejected") == ["nodes_rejected", str(rejected)]
    code = data["placement"]["rejections"][0]["code"]
    assert table_row(out, code)[:2] == [code, str(data["placement"]["rejections"][0]["count"])]
    assert table_row(out, "TOTAL")[:2] == ["TOTAL", str(rejected)]
    assert "capacity_eta" in out and data["purchase"]["order_key"] in out
    assert "STORY" in out and "submitted" in out


def test_explain_of_an_unknown_job_is_a_clear_error(live: Live) -> None:
    result = cli(live, "explain", "job-nope")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: no job with id 'job-nope'") and "Traceback" not in result.stderr


def test_nodes_blocks_and_costs_print_tables_with_totals(live: Live) -> None:
    nodes = as_json(live, "nodes")
    out = ok(live, "nodes", "--wide")  # every column: the default leaves out provider, type, tier, VRAM
    node = next(n for n in nodes["nodes"] if live.running in n["jobs"])
    row = table_row(out, node["node_id"])
    assert row[1] == node["provider"] and row[5] == f"{node['gpus_allocated']}/{node['gpu_count']}" == "5/8"
    assert row[6] == "".join("A" if g["job_ids"] else "." for g in node["gpus"]) and row[6].count(".") == 3
    assert "A=" + live.running in out and "fragmentation" in out
    assert table_row(out, "TOTAL")[1:3] == ["-", "-"]

    blocks = as_json(live, "blocks")
    out = ok(live, "blocks")
    first = blocks["blocks"][0]
    assert first["block_id"] in out and "$" in table_row(out, first["block_id"])[3]  # USD per GPU-hour
    assert "TOTAL" in out and "open contracts cost" in out
    assert cli(live, "blocks", "--status", "gone").exit_code == 2

    costs = as_json(live, "costs", "--points", "4")
    out = ok(live, "costs", "--points", "4")
    assert len(costs["series"]) == 4
    total = table_row(out, "TOTAL")
    assert total[2] == f"${Decimal(costs['accrued']):,.4f}"
    assert "SPEND OVER TIME" in out and "#" in out
    assert cli(live, "costs", "--points", "1").exit_code == 2


def test_orderbook_reads_the_live_book_without_a_file(live: Live) -> None:
    data = as_json(live, "orderbook", "--instance-type", "8xH100", "--nodes", "2")
    out = ok(live, "orderbook", "--nodes", "2")
    assert data["metadata"] == {"required_gpus": 16, "node_count": 2, "gpus_per_node": 8}
    assert "<- OPTIMAL" in out and "Optimal price:" in out and "BIDS 8xH100" in out
    assert table_row(out, "TOTAL")[2] == str(data["total_ask_liquidity"])
    bad = cli(live, "orderbook", "--instance-type", "9xNOPE")
    assert bad.exit_code == 2 and "9xNOPE" in bad.stderr


def test_submit_previews_the_cost_and_asks_before_buying(live: Live) -> None:
    before = len(live.plane.list_jobs())
    big = ["submit", "--gpus", "8", "--vram-gb", "80", "--duration", "10m"]

    dry = cli(live, *big, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "COST PREVIEW" in dry.stdout and "dry run: nothing submitted" in dry.stdout
    assert table_row(dry.stdout, "needs_purchase") == ["needs_purchase", "yes"]
    preview = json.loads(cli(live, *big, "--dry-run", "--json").stdout)
    assert preview["needs_purchase"] and Decimal(preview["new_commitment"]) > 0
    assert preview["purchase"]["node_count"] * preview["purchase"]["gpus_per_node"] >= 8

    refused = cli(live, *big, stdin="n\n")
    assert refused.exit_code == 1 and "not submitted" in refused.stderr
    unanswered = cli(live, *big, stdin="")
    assert unanswered.exit_code == 2 and "pass -y" in unanswered.stderr
    assert len(live.plane.list_jobs()) == before  # nothing was submitted

    confirmed = cli(live, *big, stdin="y\n")
    assert confirmed.exit_code == 0 and "submitted job" in confirmed.stdout
    accepted = cli(live, *big, "-y", "--json")
    assert accepted.exit_code == 0 and json.loads(accepted.stdout)["state"] == "PENDING"
    assert len(live.plane.list_jobs()) == before + 2

    small = cli(live, "submit", "--gpus", "1", "--vram-gb", "8", "--duration", "1m", "--dry-run")
    assert table_row(small.stdout, "needs_purchase") == ["needs_purchase", "no"]  # fits on a READY node
    assert "already paid for" in small.stdout


def test_status_runs_as_a_real_process(live: Live, run_cli: Any) -> None:
    result: CliResult = run_cli("status", "--server", live.url, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["jobs_by_state"]["RUNNING"] >= 1


def test_only_a_purchase_with_a_cost_asks_for_confirmation() -> None:
    from scalar.cli.submit_preview import commits_money
    from scalar.wire.views import PreviewOut

    def preview(needs_purchase: bool, new_commitment: str) -> PreviewOut:
        return PreviewOut(
            job={},
            currency="USD",
            needs_purchase=needs_purchase,
            node=None,
            purchase=None,
            job_cost=None,
            new_commitment=new_commitment,
            reason="",
        )

    assert commits_money(preview(True, "12.500000"))
    assert not commits_money(preview(True, "0.000000"))  # nothing fits yet: waits
    assert not commits_money(preview(False, "3.000000"))
    assert commits_money(preview(True, "garbled"))  # unsure: ask
