"""``scalar place``: where would Scalar put this job on this cluster, and why not elsewhere (seed 001)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from scalar.cli.errors import user_errors
from scalar.cli.inputs import InputError, parse_json_file
from scalar.cli.output import Col, explain, make_table, print_json, show, wide_option
from scalar.domain.errors import InvalidSpecError
from scalar.domain.packing import PlacementDecision, schedule_job
from scalar.domain.packing_model import Node
from scalar.domain.packing_text import fmt_duration, fmt_indices
from scalar.wire.cluster import ClusterFile, JobFile, placement_to_json


def parse_now(text: str) -> datetime:
    """``--now`` as an ISO 8601 time with a time zone; anything else is an ``InputError``."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(
            "--now", None, f"{text!r} is not an ISO 8601 time; use e.g. 2025-06-01T12:00:00Z"
        ) from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise InputError("--now", None, f"{text!r} has no time zone; add Z (UTC) or an offset like +00:00")
    return value


def _input_error(path: Path, exc: InvalidSpecError) -> InputError:
    problem = exc.problem if exc.hint is None else f"{exc.problem}. To fix: {exc.hint}"
    return InputError(str(path), exc.field, problem)


COLUMNS = [
    Col("node", "id"),
    Col("provider", "key"),
    Col("gpu_model", "key", wide=True),
    Col("tier", "key"),
    Col("free_gpus", "num"),
    Col("expires_in", "key"),
    Col("score", "num"),
    Col("result", "key"),
]


def _table(nodes: tuple[Node, ...], decision: PlacementDecision, now: datetime, wide: bool) -> None:
    """One row per node (the chosen one marked ``*``), then why each node was or was not chosen."""
    rejected = {r.node_id: r for r in decision.rejections}
    rows: list[list[object]] = []
    why: list[str] = []
    for node in nodes:
        chosen = node.id == decision.node_id
        rejection = rejected.get(node.id)
        score: float | None = None
        result: str | None = None
        if chosen and decision.score is not None:
            terms = decision.score
            score, result = terms.score, "chosen"
            why.append(
                f"* {node.id}: GPUs {fmt_indices(decision.gpu_indices)}; utilization {terms.utilization:.4g}, "
                f"fragmentation {terms.fragmentation:.4g}, expiry penalty {terms.expiry_penalty:.4g}, "
                f"provider bonus {terms.provider_bonus:.4g}"
            )
        elif rejection is not None:
            score, result = rejection.score, rejection.reason.code
            why.append(f"  {node.id}: {rejection.reason.message}")
        rows.append(
            [
                f"* {node.id}" if chosen else node.id,
                node.provider,
                node.gpu_model,
                node.tier.value,
                f"{node.free_gpu_count()}/{node.gpu_count}",
                fmt_duration(node.time_to_expiry(now)),
                score,
                result,
            ]
        )
    show(make_table(COLUMNS, rows, title=f"{decision.kind.value}: job {decision.job_id}", wide=wide))
    for line in why:
        explain(line)
    explain(decision.summary)


def register(app: typer.Typer) -> None:
    @app.command("place")
    @user_errors
    def place(
        cluster: Annotated[
            Path,
            typer.Option("--cluster", help="CLUSTER.json: blocks and their nodes (docs/formats/place.md)."),
        ],
        job: Annotated[Path, typer.Option("--job", help="JOB.json: the job to place.")],
        now: Annotated[str, typer.Option("--now", help="The time of the decision, ISO 8601 with a zone.")],
        as_json: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
        wide: bool = wide_option(),
    ) -> None:
        """Place one job on a cluster the way Scalar's packer would (seed 001), explaining every node."""
        at = parse_now(now)
        cluster_in = parse_json_file(cluster, ClusterFile)
        job_in = parse_json_file(job, JobFile)
        try:
            nodes = cluster_in.to_nodes()
        except InvalidSpecError as exc:
            raise _input_error(cluster, exc) from None
        try:
            the_job = job_in.to_domain()
        except InvalidSpecError as exc:
            raise _input_error(job, exc) from None
        decision = schedule_job(the_job, nodes, at)
        if as_json:
            print_json(placement_to_json(decision))
        else:
            _table(nodes, decision, at, wide)
