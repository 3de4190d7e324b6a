"""``scalar nodes``: the GPU slot map (GET /nodes); ``scalar blocks``: the contracts (GET /blocks)."""

from __future__ import annotations

import string
from typing import Any

import typer

from scalar.cli.cluster_output import fetch, table, usd
from scalar.cli.errors import fail, user_errors
from scalar.cli.jobs import server_option
from scalar.cli.output import Col, duration, print_json, say, show, when, wide_option

FREE = "."
LETTERS = string.ascii_uppercase + string.ascii_lowercase
BLOCK_STATUSES = ("open", "released", "ended")


def gpu_map(node: dict[str, Any], letters: dict[str, str]) -> str:
    """One character per GPU: ``.`` free, a letter per job (the legend names them), ``*`` shared."""
    chars = []
    for gpu in node.get("gpus") or []:
        jobs = gpu.get("job_ids") or []
        if not jobs:
            chars.append(FREE)
        elif len(jobs) > 1:
            chars.append("*")
        else:
            chars.append(letters.setdefault(jobs[0], LETTERS[len(letters) % len(LETTERS)]))
    return "".join(chars) or "-"


NODE_COLUMNS = [
    Col("node_id", "id"),
    Col("provider", "key", wide=True),
    Col("instance_type", "id", wide=True),
    Col("tier", "key", wide=True),
    Col("state", "key"),
    Col("gpus", "num"),
    Col("gpu_map", "key"),
    Col("vram_gb", "num", wide=True),
    Col("expires_in", "key"),
]
BLOCK_COLUMNS = [
    Col("block_id", "id"),
    Col("provider", "key", wide=True),
    Col("instance_type", "id", wide=True),
    Col("status", "key"),
    Col("nodes", "num", wide=True),
    Col("gpus", "num"),
    Col("per_gpu_h", "num"),
    Col("start", "time", wide=True),
    Col("expires", "time"),
    Col("committed", "num", wide=True),
    Col("accrued", "num", wide=True),
]


def print_nodes(answer: dict[str, Any], wide: bool = False) -> None:
    letters: dict[str, str] = {}
    rows = []
    for n in answer.get("nodes") or []:
        vram = sum(g.get("vram_used_gb") or 0 for g in n.get("gpus") or [])
        rows.append(
            [
                n.get("node_id"),
                n.get("provider"),
                n.get("instance_type"),
                n.get("tier"),
                n.get("state"),
                f"{n.get('gpus_allocated')}/{n.get('gpu_count')}",
                gpu_map(n, letters),
                f"{vram:g}/{(n.get('vram_per_gpu_gb') or 0) * (n.get('gpu_count') or 0):g}",
                duration(n.get("expires_in_s")),
            ]
        )
    t = answer.get("totals") or {}
    total = [
        "TOTAL",
        None,
        None,
        None,
        None,
        f"{t.get('gpus_allocated', 0)}/{t.get('gpus_total', 0)}",
        None,
        f"{t.get('vram_used_gb', 0):g}/{t.get('vram_total_gb', 0):g}",
        None,
    ]
    if not rows:
        say(
            "no nodes yet: Scalar buys them when a job needs capacity (`scalar submit --gpus 1`), "
            "or add your own with `scalar node add user@host`; `scalar nodes --all` lists gone ones too"
        )
        return
    title = "NODES (GPU map: . free, a letter per job, * shared)"
    show(table(NODE_COLUMNS, rows, title, total, wide=wide))
    if letters:
        say("jobs: " + ", ".join(f"{c}={j}" for j, c in letters.items()))
    say(f"{answer.get('count', 0)} nodes, {t.get('ready_nodes', 0)} ready")
    say(
        f"utilization {float(t.get('utilization') or 0):.0%} of the GPUs on READY nodes; fragmentation "
        f"{float(t.get('fragmentation') or 0):.0%} ({t.get('stranded_gpus', 0)} of {t.get('gpus_idle', 0)} idle GPUs "
        f"sit on partly used nodes); {t.get('gpus_booting', 0)} GPUs booting"
    )


def print_blocks(answer: dict[str, Any], wide: bool = False, status: str | None = None) -> None:
    rows = [
        [
            b.get("block_id"),
            b.get("provider"),
            b.get("instance_type"),
            b.get("status"),
            b.get("node_count"),
            b.get("gpu_count"),
            usd(b.get("price_per_gpu_hour"), 4),
            when(b.get("start_time")),
            when(b.get("end_time")),
            usd(b.get("committed")),
            usd(b.get("accrued"), 4),
        ]
        for b in answer.get("blocks") or []
    ]
    t = answer.get("totals") or {}
    total = [
        "TOTAL",
        None,
        None,
        f"{t.get('open_blocks', 0)} open",
        sum(b.get("node_count") or 0 for b in answer.get("blocks") or []),
        sum(b.get("gpu_count") or 0 for b in answer.get("blocks") or []),
        None,
        None,
        None,
        usd(t.get("committed")),
        usd(t.get("accrued"), 4),
    ]
    if not rows:
        if status:
            say(f"no {status.lower()} blocks: `scalar blocks` lists every status")
        else:
            say("no contracts yet: Scalar buys capacity when a job needs it (`scalar submit --gpus 1`)")
        return
    show(table(BLOCK_COLUMNS, rows, "BLOCKS (contracts, USD)", total, wide=wide))
    say(
        f"{t.get('blocks', 0)} blocks; open contracts cost {usd(t.get('open_price_per_hour')) or '$0.00'}/h "
        f"for {t.get('open_gpus', 0)} GPUs"
    )


def register(app: typer.Typer) -> None:
    @app.command("nodes")
    @user_errors
    def nodes(
        include_gone: bool = typer.Option(False, "--all", help="Also list terminated and failed nodes."),
        limit: int | None = typer.Option(
            None, "--limit", help="One page of this many nodes (1-1000); default: every node."
        ),
        after: str | None = typer.Option(
            None, "--after", help="Start after this cursor (the `next` a previous page printed)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer."),
        wide: bool = wide_option(),
        server: str = server_option(),
    ) -> None:
        """Every node with its GPUs (which job is on each), tier, state and expiry; utilization and
        fragmentation totals (of the whole fleet, also with --limit)."""
        answer = fetch(server, "its nodes", lambda c: c.nodes(include_gone, limit, after))
        if as_json:
            print_json(answer)
            return
        print_nodes(answer, wide)
        if answer.get("next"):
            say(f"more nodes with --after {answer['next']}")

    @app.command("blocks")
    @user_errors
    def blocks(
        status: str | None = typer.Option(
            None, "--status", help="Only blocks in this status: open, released, ended."
        ),
        limit: int | None = typer.Option(
            None, "--limit", help="One page of this many blocks (1-1000); default: every block."
        ),
        after: str | None = typer.Option(
            None, "--after", help="Start after this cursor (the `next` a previous page printed)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer."),
        wide: bool = wide_option(),
        server: str = server_option(),
    ) -> None:
        """The contracts bought: provider, price paid per GPU-hour, start, expiry, committed and accrued."""
        if status is not None and status.lower() not in BLOCK_STATUSES:
            fail(f"--status: must be one of {', '.join(BLOCK_STATUSES)}, got {status!r}")
        answer = fetch(
            server, "its blocks", lambda c: c.blocks(status.lower() if status else None, limit, after)
        )
        if as_json:
            print_json(answer)
            return
        print_blocks(answer, wide, status)
        if answer.get("next"):
            say(f"more blocks with --after {answer['next']}")
