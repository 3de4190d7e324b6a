"""``scalar nodes``: the GPU slot map (GET /nodes); ``scalar blocks``: the contracts (GET /blocks); both
read as their models (``wire/views.py``'s ``NodesOut`` and ``BlocksOut``)."""

from __future__ import annotations

import string

import typer

from scalar.cli.cluster_output import fetch, table, usd
from scalar.cli.errors import fail, user_errors
from scalar.cli.jobs import server_option
from scalar.cli.output import Col, duration, print_json, say, show, when, wide_option
from scalar.wire.views import BlocksOut, NodeSlotsOut, NodesOut

FREE = "."
LETTERS = string.ascii_uppercase + string.ascii_lowercase
BLOCK_STATUSES = ("open", "released", "ended")


def gpu_map(node: NodeSlotsOut, letters: dict[str, str]) -> str:
    """One character per GPU: ``.`` free, a letter per job (the legend names them), ``*`` shared."""
    chars = []
    for gpu in node.gpus:
        jobs = gpu.job_ids
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


def print_nodes(answer: NodesOut, wide: bool = False) -> None:
    letters: dict[str, str] = {}
    rows = []
    for n in answer.nodes:
        vram = sum(g.vram_used_gb for g in n.gpus)
        rows.append(
            [
                n.node_id,
                n.provider,
                n.instance_type,
                n.tier,
                n.state,
                f"{n.gpus_allocated}/{n.gpu_count}",
                gpu_map(n, letters),
                f"{vram:g}/{n.vram_per_gpu_gb * n.gpu_count:g}",
                duration(n.expires_in_s),
            ]
        )
    t = answer.totals
    total = [
        "TOTAL",
        None,
        None,
        None,
        None,
        f"{t.gpus_allocated}/{t.gpus_total}",
        None,
        f"{t.vram_used_gb:g}/{t.vram_total_gb:g}",
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
    say(f"{answer.count} nodes, {t.ready_nodes} ready")
    say(
        f"utilization {t.utilization:.0%} of the GPUs on READY nodes; fragmentation "
        f"{t.fragmentation:.0%} ({t.stranded_gpus} of {t.gpus_idle} idle GPUs "
        f"sit on partly used nodes); {t.gpus_booting} GPUs booting"
    )


def print_blocks(answer: BlocksOut, wide: bool = False, status: str | None = None) -> None:
    rows = [
        [
            b.block_id,
            b.provider,
            b.instance_type,
            b.status,
            b.node_count,
            b.gpu_count,
            usd(b.price_per_gpu_hour, 4),
            when(b.start_time),
            when(b.end_time),
            usd(b.committed),
            usd(b.accrued, 4),
        ]
        for b in answer.blocks
    ]
    t = answer.totals
    total = [
        "TOTAL",
        None,
        None,
        f"{t.open_blocks} open",
        sum(b.node_count for b in answer.blocks),
        sum(b.gpu_count for b in answer.blocks),
        None,
        None,
        None,
        usd(t.committed),
        usd(t.accrued, 4),
    ]
    if not rows:
        if status:
            say(f"no {status.lower()} blocks: `scalar blocks` lists every status")
        else:
            say("no contracts yet: Scalar buys capacity when a job needs it (`scalar submit --gpus 1`)")
        return
    show(table(BLOCK_COLUMNS, rows, "BLOCKS (contracts, USD)", total, wide=wide))
    say(
        f"{t.blocks} blocks; open contracts cost {usd(t.open_price_per_hour) or '$0.00'}/h "
        f"for {t.open_gpus} GPUs"
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
        page = NodesOut.model_validate(answer)
        print_nodes(page, wide)
        if page.next:
            say(f"more nodes with --after {page.next}")

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
        contracts = BlocksOut.model_validate(answer)
        print_blocks(contracts, wide, status)
        if contracts.next:
            say(f"more blocks with --after {contracts.next}")
