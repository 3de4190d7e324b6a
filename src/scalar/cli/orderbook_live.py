"""``scalar orderbook`` without ``--book``: the server's live book (GET /orderbook) as tables."""

from __future__ import annotations

from typing import Any

from scalar.cli.cluster_output import table
from scalar.cli.output import Col, explain, say, show, when
from scalar.domain.money import usd_trimmed

# The asks and bids tables, from a file (``--book``) or the server's live book.
ASK_COLUMNS = [
    Col("index", "num"),
    Col("price", "num"),
    Col("qty_gpus", "num"),
    Col("cumulative", "num"),
    Col("duration_hours", "num"),
    Col("score", "num"),
    Col("note", "key"),
]
BID_COLUMNS = [Col("price", "num"), Col("qty_gpus", "num"), Col("duration_hours", "num")]


def _usd(value: Any) -> str | None:
    """``2.3`` -> ``$2.30``, ``2.1875`` -> ``$2.1875``."""
    return None if value is None else usd_trimmed(value)


def print_live_book(r: dict[str, Any]) -> None:
    meta = r.get("metadata") or {}
    scores = {s.get("index"): s for s in r.get("scores") or []}
    optimal, viable = r.get("optimal_index"), r.get("min_viable_index")
    rows = []
    for i, ask in enumerate(r.get("asks") or []):
        notes = (["<- OPTIMAL"] if i == optimal else []) + (["min viable"] if i == viable else [])
        score = scores.get(i)
        rows.append(
            [
                i,
                _usd(ask.get("price")),
                ask.get("quantity_gpus"),
                ask.get("cumulative_quantity"),
                ask.get("duration_hours"),
                None if score is None else f"{score.get('score'):.3f}",
                ", ".join(notes),
            ]
        )
    nodes = meta.get("node_count")
    title = (
        f"ASKS {r.get('instance_type')}: {meta.get('required_gpus')} GPUs required "
        f"({nodes} node{'s' if nodes != 1 else ''} x {meta.get('gpus_per_node')} GPUs), USD per GPU-hour"
    )
    show(
        table(ASK_COLUMNS, rows, title, ["TOTAL", None, r.get("total_ask_liquidity"), None, None, None, None])
    )
    bids = [
        [_usd(b.get("price")), b.get("quantity_gpus"), b.get("duration_hours")] for b in r.get("bids") or []
    ]
    show(
        table(
            BID_COLUMNS,
            bids,
            f"BIDS {r.get('instance_type')}",
            ["TOTAL", r.get("total_bid_liquidity"), None],
        )
    )
    price = r.get("optimal_price")
    flag = " (insufficient liquidity: lowest ask)" if r.get("insufficient_liquidity") else ""
    say(
        f"Optimal price: {_usd(price) or '-'}/GPU-h at sorted ask {optimal if optimal is not None else '-'}{flag}"
    )
    say(f"Spread: {_usd(r.get('spread')) or '- (needs both asks and bids)'}")
    say(f"Liquidity: asks {r.get('total_ask_liquidity')} GPUs, bids {r.get('total_bid_liquidity')} GPUs")
    fill = r.get("fill")
    if fill:
        explain(
            f"Fill: {fill.get('filled_gpus')} of {fill.get('required_gpus')} GPUs at a VWAP of {_usd(fill.get('vwap'))}/GPU-h "
            f"(best {_usd(fill.get('best_price'))}, worst {_usd(fill.get('worst_price'))}), "
            f"{_usd(fill.get('cost_per_hour'))}/h in all"
        )
    explain(f"Why: {(r.get('reason') or {}).get('message', '-')}")
    for warning in r.get("warnings") or []:
        if warning != r.get("reason"):
            explain(f"Warning: {warning.get('message')}")
    say(f"Last updated: {when(r.get('last_updated')) or r.get('last_updated') or '-'}")
