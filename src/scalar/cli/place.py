"""``scalar place``: where would Scalar put this job on this cluster, and why not elsewhere.

It scores as the controller does by default (``[controller] packing_score = "scalar"``: Scalar's score,
``scalar.domain.packing_scalar``, with seed 001's filters and expiry term), with the prior of a controller
that has been submitted this one job (CLUSTER.json names the jobs on its GPUs, not their shapes, so there is
nothing else to learn from). ``--score seed`` scores with seed 001's formula instead.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from scalar.cli.errors import user_errors
from scalar.cli.inputs import InputError, parse_json_file
from scalar.cli.output import Col, explain, make_table, print_json, show, wide_option
from scalar.domain.errors import InvalidSpecError
from scalar.domain.packing import PlacementDecision, schedule_job
from scalar.domain.packing_model import Job, Node
from scalar.domain.packing_scalar import EXPIRY_TICKS, Prior, ShapeWindow, job_shape
from scalar.domain.packing_text import fmt_duration, fmt_indices
from scalar.engine.config import SCALAR_SCORE, SEED_SCORE
from scalar.wire.cluster import ClusterFile, JobFile, placement_to_json


class PackingScore(StrEnum):
    """``--score``: the controller's ``packing_score`` values."""

    scalar = SCALAR_SCORE
    seed = SEED_SCORE


def controller_prior(job: Job) -> Prior:
    """The prior a controller that has seen no other job places ``job`` with: it starts with an empty
    window (``ShapeWindow``) and counts the job in when the job is submitted, before it is scheduled."""
    window = ShapeWindow()
    window.observe(job_shape(job))
    return window.prior


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


def _table(
    nodes: tuple[Node, ...], decision: PlacementDecision, now: datetime, wide: bool, score_name: PackingScore
) -> None:
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
            if score_name is PackingScore.scalar:
                why.append(
                    f"* {node.id}: GPUs {fmt_indices(decision.gpu_indices)}; Scalar's score {terms.score:g} "
                    f"(in tens of GPU milli), counting expiry penalty {terms.expiry_penalty:.4g} "
                    f"x {EXPIRY_TICKS:g}; utilization {terms.utilization:.4g}, index-gap fragmentation "
                    f"{terms.fragmentation:.4g}"
                )
            else:
                why.append(
                    f"* {node.id}: GPUs {fmt_indices(decision.gpu_indices)}; utilization "
                    f"{terms.utilization:.4g}, fragmentation {terms.fragmentation:.4g}, expiry penalty "
                    f"{terms.expiry_penalty:.4g}, provider bonus {terms.provider_bonus:.4g}"
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
    title = f"{decision.kind.value}: job {decision.job_id} ({score_name.value} score)"
    show(make_table(COLUMNS, rows, title=title, wide=wide))
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
        score: Annotated[
            PackingScore,
            typer.Option(
                "--score",
                help="scalar (default): the controller's default score, Scalar's, with the prior of a "
                "controller that has seen only this job; seed: seed 001's formula.",
            ),
        ] = PackingScore.scalar,
        as_json: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
        wide: bool = wide_option(),
    ) -> None:
        """Place one job on a cluster the way the controller would (its default score, Scalar's; --score
        seed for seed 001's), explaining every node."""
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
        prior = controller_prior(the_job) if score is PackingScore.scalar else None
        decision = schedule_job(the_job, nodes, at, prior=prior)
        if as_json:
            print_json({"packing_score": score.value, **placement_to_json(decision)})
        else:
            _table(nodes, decision, at, wide, score)
