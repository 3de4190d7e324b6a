"""``scalar orderbook``: the price seed 000's algorithm would bid on a book, and why."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import typer

from scalar.cli.cluster_output import fetch
from scalar.cli.errors import fail, user_errors
from scalar.cli.inputs import InputError, parse_json_file
from scalar.cli.jobs import server_option
from scalar.cli.orderbook_live import ASK_COLUMNS, BID_COLUMNS, print_live_book
from scalar.cli.output import explain, make_table, print_json, say, show
from scalar.domain.money import usd
from scalar.domain.orderbook import (
    OrderbookAnalysis,
    analyze_orderbook,
    required_gpus_for,
)
from scalar.wire.orderbook import OrderbookFile, build_orderbook_response, format_timestamp

_GPUS_IN_NAME = re.compile(r"^(\d+)x", re.IGNORECASE)
_MICRO = Decimal("0.000001")
_HUNDREDTH = Decimal("0.01")


def _file_time(path: Path) -> datetime:
    try:
        mtime = path.stat().st_mtime
    except OSError as exc:  # pragma: no cover - the file was just read
        raise InputError(str(path), None, f"cannot be read ({exc})") from None
    return datetime.fromtimestamp(mtime, tz=UTC).replace(microsecond=0)


def _hours(value: object) -> str:
    text = str(value)
    return text[:-2] if text.endswith(".0") else text


def _print_table(analysis: OrderbookAnalysis, instance_type: str, nodes: int, gpus_per_node: int) -> None:
    scores = {s.index: s for s in analysis.scores}
    rows = []
    for level in analysis.asks:
        notes = []
        if level.index == analysis.optimal_index:
            notes.append("<- OPTIMAL")
        if level.index == analysis.min_viable_index:
            notes.append("min viable")
        score = scores.get(level.index)
        rows.append(
            [
                level.index,
                usd(level.price_per_gpu_hour),
                level.quantity_gpus,
                level.cumulative_quantity,
                _hours(level.duration_hours),
                None if score is None else f"{score.score:.3f}",
                ", ".join(notes),
            ]
        )
    title = (
        f"ASKS {instance_type}: {analysis.required_gpus} GPUs required "
        f"({nodes} node{'s' if nodes != 1 else ''} x {gpus_per_node} GPUs), USD per GPU-hour"
    )
    show(make_table(ASK_COLUMNS, rows, title))
    bid_rows = [[usd(b.price_per_gpu_hour), b.quantity_gpus, _hours(b.duration_hours)] for b in analysis.bids]
    show(make_table(BID_COLUMNS, bid_rows, f"BIDS {instance_type}"))

    lines: list[str] = []
    price = analysis.optimal_price_per_gpu_hour
    if price is None:
        lines.append("Optimal price: - (no asks)")
    else:
        flag = " (insufficient liquidity: lowest ask)" if analysis.insufficient_liquidity else ""
        lines.append(f"Optimal price: {usd(price)}/GPU-h at sorted ask {analysis.optimal_index}{flag}")
    if analysis.spread_per_gpu_hour is None:
        lines.append("Spread: - (needs both asks and bids)")
    else:
        best_ask, best_bid = analysis.best_ask, analysis.best_bid
        assert best_ask is not None and best_bid is not None
        lines.append(f"Spread: {usd(analysis.spread_per_gpu_hour)} ({usd(best_ask)} - {usd(best_bid)})")
    lines.append(
        f"Liquidity: asks {analysis.total_ask_liquidity} GPUs, bids {analysis.total_bid_liquidity} GPUs"
    )
    fill = analysis.fill
    if fill is None:
        lines.append("Fill: nothing can be taken from the asks")
    else:
        fraction = fill.slippage_fraction * 100
        lines.append(
            f"Fill: {fill.filled_gpus} of {fill.required_gpus} GPUs at a VWAP of "
            f"{usd(fill.vwap_per_gpu_hour.quantize(_MICRO))}/GPU-h "
            f"(best {usd(fill.best_price_per_gpu_hour)}, worst {usd(fill.worst_price_per_gpu_hour)}), "
            f"slippage {usd(fill.slippage_per_gpu_hour.quantize(_MICRO))}/GPU-h "
            f"({fraction.quantize(_HUNDREDTH)}%), {usd(fill.cost_per_hour)}/h in all"
        )
    lines.append(f"Why: {analysis.reason.message}")
    for warning in analysis.warnings:
        if warning is not analysis.reason:
            lines.append(f"Warning: {warning.message}")
    for line in lines:
        explain(line)


def register(app: typer.Typer) -> None:
    @app.command("orderbook")
    @user_errors
    def orderbook(
        book: Path | None = typer.Option(
            None,
            "--book",
            help="BOOK.json: {instance_type, asks[], bids[]} (see docs/formats/orderbook.md). "
            "Without it, the live book of the server (--server).",
        ),
        nodes: int = typer.Option(1, "--nodes", help="Number of nodes to buy (>= 1)."),
        gpus_per_node: int | None = typer.Option(
            None,
            "--gpus-per-node",
            help="GPUs per node (>= 1; default 8, or the N of NxMODEL on the server).",
        ),
        instance_type: str = typer.Option(
            "8xH100", "--instance-type", help="The live book to read (without --book): 8xH100, 8xH200..."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the GET /orderbook response as JSON."),
        server: str = server_option(),
    ) -> None:
        """Which price to bid for NODES x GPUS_PER_NODE GPUs on an orderbook (seed 000), and why: from a
        BOOK.json file, or from the running server's live book."""
        if nodes < 1:
            fail(f"--nodes: must be at least 1 (got {nodes})")
        if gpus_per_node is not None and gpus_per_node < 1:
            fail(f"--gpus-per-node: must be at least 1 (got {gpus_per_node})")
        if book is None:
            live = fetch(
                server,
                f"the {instance_type} book",
                lambda c: c.orderbook(instance_type, nodes, gpus_per_node),
            )
            if as_json:
                print_json(live)
                return
            print_live_book(live)
            return
        gpus_per_node = 8 if gpus_per_node is None else gpus_per_node
        parsed = parse_json_file(book, OrderbookFile)
        named = _GPUS_IN_NAME.match(parsed.instance_type)
        if named and int(named.group(1)) != gpus_per_node:
            sys.stderr.write(
                f"note: instance type {parsed.instance_type} suggests {named.group(1)} GPUs per node; "
                f"using --gpus-per-node {gpus_per_node}\n"
            )
        required = required_gpus_for(nodes, gpus_per_node)
        analysis = analyze_orderbook(parsed.ask_orders(), parsed.bid_orders(), required)
        last_updated = parsed.last_updated or _file_time(book)
        if as_json:
            response = build_orderbook_response(
                analysis, parsed.instance_type, nodes, gpus_per_node, last_updated
            )
            print_json(response.model_dump(mode="json"))
            return
        _print_table(analysis, parsed.instance_type, nodes, gpus_per_node)
        say(f"Last updated: {format_timestamp(last_updated)}")
