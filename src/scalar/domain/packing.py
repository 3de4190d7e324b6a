"""Seed 001's bin packing: which node and which GPUs a job goes to, or what to ask for when none fits.

``schedule_job(job, nodes, now)`` runs the seed's filters on every node, in the seed's order (tier, then
the job's allowed GPU models and CUDA versions (seed 004), expiry with the 300 s safety margin, CPU, RAM,
GPUs with enough VRAM), scores the nodes that pass with the seed's formula
(:mod:`scalar.domain.packing_score`) and places the job on the best one (:func:`placement_rank`). Higher
score wins; equal scores go to the lowest node id, so the answer does not depend on the order the nodes
come in. A job that lists ``gpu_models`` ranks by that list first (its order is a preference, seed 004),
then by the node's price per GPU-hour, then by score. Every node not chosen gets a :class:`Reason`, and the
decision one sentence.

When no node fits: ``REQUEST_MORE_CAPACITY`` for a FAST job, ``QUEUE_FOR_FLEX`` for a FLEX job, with the
seed's provider hint (Prime Intellect below 8 GPUs, SFCompute from 8). This is the single-node decision: a
job larger than every node is reported as such; splitting it across nodes is the control plane's call.

Cost: one pass over each node's GPUs, so O(nodes x GPUs per node).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from scalar.domain.contracts import work_rate
from scalar.domain.errors import InvalidSpecError
from scalar.domain.money import usd_fixed_plain
from scalar.domain.packing_model import Job, Node, nodes_by_id
from scalar.domain.packing_scalar import EXPIRY_TICKS, Prior, score_job
from scalar.domain.packing_score import (
    SCORE_TIE_DIGITS,
    SEED_WEIGHTS,
    ScoreBreakdown,
    ScoreWeights,
    combine,
    expiry_penalty,
    fit_gpus,
    fragmentation,
    provider_bonus,
    provider_hint,
    utilization_after,
)
from scalar.domain.packing_text import fmt_duration, fmt_indices, fmt_num, plural
from scalar.domain.reasons import Reason
from scalar.domain.tier import Tier

BIN_PACK_SAFETY_MARGIN_SEC = 300

# Why a node was not chosen, in the order the filters run.
TIER_MISMATCH = "tier_mismatch"
GPU_MODEL_NOT_ALLOWED = "gpu_model_not_allowed"
CUDA_MISMATCH = "cuda_mismatch"
EXPIRES_TOO_SOON = "expires_too_soon"
INSUFFICIENT_CPU = "insufficient_cpu"
INSUFFICIENT_RAM = "insufficient_ram"
INSUFFICIENT_GPUS = "insufficient_gpus"
LESS_PREFERRED_MODEL = "less_preferred_model"
HIGHER_PRICE = "higher_price"
LOWER_SCORE = "lower_score"
REJECTION_ORDER = (
    TIER_MISMATCH,
    GPU_MODEL_NOT_ALLOWED,
    CUDA_MISMATCH,
    EXPIRES_TOO_SOON,
    INSUFFICIENT_CPU,
    INSUFFICIENT_RAM,
    INSUFFICIENT_GPUS,
    LESS_PREFERRED_MODEL,
    HIGHER_PRICE,
    LOWER_SCORE,
)

# The decision's own reason.
PLACED = "placed"
NO_NODE_FITS = "no_node_fits"
LARGER_THAN_ANY_NODE = "larger_than_any_node"
NO_NODES = "no_nodes"


class PlacementKind(StrEnum):
    EXISTING_NODE = "EXISTING_NODE"
    REQUEST_MORE_CAPACITY = "REQUEST_MORE_CAPACITY"
    QUEUE_FOR_FLEX = "QUEUE_FOR_FLEX"


@dataclass(frozen=True, slots=True)
class NodeRejection:
    """Why ``node_id`` was not chosen. ``score`` is set when the node was a candidate that scored lower."""

    node_id: str
    reason: Reason
    score: float | None = None


@dataclass(frozen=True, slots=True)
class NodeEvaluation:
    """One node seen by the packer: either a rejection ``reason`` or the GPUs it offers and their score."""

    node: Node
    reason: Reason | None
    gpu_indices: tuple[int, ...] = ()
    score: ScoreBreakdown | None = None


@dataclass(frozen=True, slots=True)
class PlacementDecision:
    """Where the job goes (``EXISTING_NODE``) or what to do instead, with every reason.

    ``provider`` is the chosen node's provider, or the seed's hint for new capacity. ``reason`` is the
    decision's own reason; its message is the one-sentence ``summary``. ``rejections`` lists every node not
    chosen, in input order.
    """

    kind: PlacementKind
    job_id: str
    tier: Tier
    provider: str
    reason: Reason
    node_id: str | None = None
    gpu_indices: tuple[int, ...] = ()
    score: ScoreBreakdown | None = None
    rejections: tuple[NodeRejection, ...] = ()

    @property
    def placed(self) -> bool:
        return self.kind is PlacementKind.EXISTING_NODE

    @property
    def summary(self) -> str:
        return self.reason.message


def expected_run_s(job: Job, node: Node) -> float:
    """The wall time ``job`` is expected to run on ``node``: a FLEX job's work (``expected_duration_sec``,
    reference seconds) over the throughput of the node's GPUs (``domain.contracts.work_rate``: twice as long
    on a GPU half as fast as an A100), a FAST job's own duration (a service holds its GPU for its wall
    time). The expiry filter and the expiry term use it: a node's lease must outlive the run, not the work."""
    return job.expected_duration_sec / work_rate(node.block.gpu_model, job.tier)


def evaluate_node(
    job: Job,
    node: Node,
    now: datetime,
    *,
    safety_margin_sec: float = BIN_PACK_SAFETY_MARGIN_SEC,
    weights: ScoreWeights = SEED_WEIGHTS,
    prior: Prior | None = None,
) -> NodeEvaluation:
    """Run the filters on one node; if it passes, pick its GPUs and score them.

    With a ``prior`` the score is Scalar's (``scalar.domain.packing_scalar``) less the seed's expiry term
    (``EXPIRY_TICKS`` x ``expiry_penalty``); without, the seed's four terms."""
    if node.tier != job.tier:
        return NodeEvaluation(
            node,
            Reason(
                TIER_MISMATCH,
                f"{node.tier.value} node; the job is {job.tier.value}",
                resource="tier",
                need=job.tier.value,
                have=node.tier.value,
            ),
        )
    if not job.allows_model(node.gpu_model):
        allowed = ",".join(job.gpu_models or ())
        return NodeEvaluation(
            node,
            Reason(
                GPU_MODEL_NOT_ALLOWED,
                f"GPU model {node.gpu_model or 'unknown'} is not one the job allows ({allowed})",
                resource="gpu_model",
                need=allowed,
                have=node.gpu_model,
            ),
        )
    if not job.allows_cuda(node.cuda_version):
        allowed = ",".join(job.cuda_versions or ())
        return NodeEvaluation(
            node,
            Reason(
                CUDA_MISMATCH,
                f"CUDA {node.cuda_version} on this node is not a version the job allows ({allowed})",
                resource="cuda_version",
                need=allowed,
                have=node.cuda_version,
            ),
        )
    time_left = node.time_to_expiry(now)
    run_s = expected_run_s(job, node)
    time_needed = run_s + safety_margin_sec
    if time_left < time_needed:
        when = f"expires in {fmt_duration(time_left)}" if time_left > 0 else "has expired"
        on = "" if run_s == job.expected_duration_sec else f" on its {node.block.gpu_model}"
        return NodeEvaluation(
            node,
            Reason(
                EXPIRES_TOO_SOON,
                f"{when}; the job needs {fmt_duration(run_s)}{on} "
                f"+ {fmt_duration(safety_margin_sec)} safety margin",
                resource="time_s",
                need=time_needed,
                have=time_left,
                limit=safety_margin_sec,
            ),
        )
    block = node.block
    if node.cpu_used + job.cpu_cores > block.cpu_per_node:
        return NodeEvaluation(
            node,
            Reason(
                INSUFFICIENT_CPU,
                f"needs {fmt_num(job.cpu_cores)} free CPU cores, has {fmt_num(node.free_cpu())} "
                f"of {fmt_num(block.cpu_per_node)}",
                resource="cpu_cores",
                need=job.cpu_cores,
                have=node.free_cpu(),
                limit=block.cpu_per_node,
            ),
        )
    if node.ram_used_gb + job.ram_gb > block.ram_per_node_gb:
        return NodeEvaluation(
            node,
            Reason(
                INSUFFICIENT_RAM,
                f"needs {fmt_num(job.ram_gb)} GB free RAM, has {fmt_num(node.free_ram_gb())} "
                f"of {fmt_num(block.ram_per_node_gb)} GB",
                resource="ram_gb",
                need=job.ram_gb,
                have=node.free_ram_gb(),
                limit=block.ram_per_node_gb,
            ),
        )
    fit = fit_gpus(job, node)
    if fit.indices is None:
        return NodeEvaluation(node, _gpu_shortage(job, node, fit.usable, fit.held, fit.too_small))
    if prior is not None:
        ticks, indices = score_job(prior, job, node, fit.indices)
        expiry = expiry_penalty(time_left, run_s)
        terms = ScoreBreakdown(
            utilization_after(fit.total_vram_gb, fit.used_vram_gb, job),
            fragmentation(indices),
            expiry,
            0.0,
            ticks - EXPIRY_TICKS * expiry,
        )
        return NodeEvaluation(node, None, indices, terms)
    breakdown = combine(
        utilization_after(fit.total_vram_gb, fit.used_vram_gb, job),
        fragmentation(fit.indices),
        expiry_penalty(time_left, run_s),
        provider_bonus(node.provider, job.gpu_count),
        weights,
    )
    return NodeEvaluation(node, None, fit.indices, breakdown)


def _gpu_shortage(job: Job, node: Node, usable: int, held: int, too_small: int) -> Reason:
    count = job.gpu_count
    if count > node.gpu_count:
        message = f"needs {count} GPUs on one node; this node has {node.gpu_count}"
    else:
        kind = "unoccupied or shared" if job.share_gpu else "unoccupied"
        message = (
            f"needs {count} {kind} GPUs with {fmt_num(job.vram_per_gpu_gb)} GB VRAM free each, has {usable} "
            f"of {node.gpu_count} ({held} held by other jobs, {too_small} with too little VRAM free)"
        )
    return Reason(INSUFFICIENT_GPUS, message, resource="gpus", need=count, have=usable, limit=node.gpu_count)


RankKey = tuple[int, Decimal, float, str]
_NO_PRICE = Decimal(0)


def placement_rank(job: Job, evaluation: NodeEvaluation, node_id: str | None = None) -> RankKey:
    """How a candidate node ranks for ``job``: lowest key wins.

    ``(preference of its GPU model, its price per GPU-hour, -score, node id)``. For a job without
    ``gpu_models`` the first two are constant, so the ranking is the seed's (highest score, then lowest id).
    ``node_id`` stands in for the evaluation's node id (a class of identical nodes ranks as its lowest id).
    """
    assert evaluation.score is not None
    node = evaluation.node
    score = -round(evaluation.score.score, SCORE_TIE_DIGITS)
    name = node.id if node_id is None else node_id
    if job.gpu_models is None:
        return (0, _NO_PRICE, score, name)
    return (job.model_preference(node.gpu_model), node.block.price_per_gpu_hour, score, name)


def _rank_of(job: Job) -> Callable[[NodeEvaluation], RankKey]:
    return lambda evaluation: placement_rank(job, evaluation)


def schedule_job(
    job: Job,
    nodes: Sequence[Node],
    now: datetime,
    *,
    safety_margin_sec: float = BIN_PACK_SAFETY_MARGIN_SEC,
    weights: ScoreWeights = SEED_WEIGHTS,
    prior: Prior | None = None,
) -> PlacementDecision:
    """Place ``job`` on the best of ``nodes`` at time ``now`` (UTC-aware), or say what capacity to get.

    ``prior``: score with Scalar's score and this prior (the controller's default); ``None``: seed 001's."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise InvalidSpecError("now", f"{now.isoformat()} has no time zone", "pass a UTC-aware datetime")
    if len({node.id for node in nodes}) != len(nodes):
        nodes_by_id(nodes)  # raises, naming the repeated id
    evaluations = [
        evaluate_node(job, node, now, safety_margin_sec=safety_margin_sec, weights=weights, prior=prior)
        for node in nodes
    ]
    candidates = [e for e in evaluations if e.reason is None]
    best = min(candidates, key=_rank_of(job)) if candidates else None
    rejections = tuple(rejection_of(job, e, best) for e in evaluations if e is not best)
    head = f"{job.tier.value} job {job.id} needs {need_text(job, sharing=True)}"
    counts = _count_phrases(job, rejections, safety_margin_sec)
    if best is not None:
        return placed(job, best, head, counts, rejections)
    return _no_placement(job, nodes, rejections, head, counts)


def placed(
    job: Job,
    best: NodeEvaluation,
    head: str,
    counts: Sequence[str],
    rejections: tuple[NodeRejection, ...] = (),
) -> PlacementDecision:
    """The decision that puts ``job`` on ``best``, with its one-sentence reason.

    A job with ``gpu_models`` also hears which of its models it got and at what price."""
    assert best.score is not None
    score = best.score.score
    choice = ""
    if job.gpu_models is not None:
        position = job.model_preference(best.node.gpu_model) + 1
        price = best.node.block.price_per_gpu_hour
        choice = (
            f", {best.node.gpu_model} is choice {position} of {len(job.gpu_models)} GPU models"
            f" at {usd_fixed_plain(price)}/GPU-h"
        )
    summary = (
        f"{head}: placed on {best.node.id} GPUs {fmt_indices(best.gpu_indices)} (score {score:.4f}{choice})"
        + (f"; {', '.join(counts)}" if counts else "")
        + "."
    )
    return PlacementDecision(
        kind=PlacementKind.EXISTING_NODE,
        job_id=job.id,
        tier=job.tier,
        provider=best.node.provider,
        reason=Reason(PLACED, summary, resource="score", have=round(score, 6)),
        node_id=best.node.id,
        gpu_indices=best.gpu_indices,
        score=best.score,
        rejections=rejections,
    )


def _no_placement(
    job: Job, nodes: Sequence[Node], rejections: tuple[NodeRejection, ...], head: str, counts: list[str]
) -> PlacementDecision:
    largest = max((node.gpu_count for node in nodes), default=0)
    return no_placement(job, len(nodes), largest, head, counts, rejections)


def no_placement(
    job: Job,
    node_count: int,
    largest_gpu_count: int,
    head: str,
    counts: Sequence[str],
    rejections: tuple[NodeRejection, ...] = (),
) -> PlacementDecision:
    """The decision when no node takes ``job``: request capacity (FAST) or queue (FLEX), with its reason.

    ``node_count`` nodes were seen, the largest with ``largest_gpu_count`` GPUs; ``counts`` are the
    rejection phrases (``count_phrases``).
    """
    hint = provider_hint(job.gpu_count)
    if job.tier is Tier.FAST:
        kind, action = PlacementKind.REQUEST_MORE_CAPACITY, "request more capacity"
    else:
        kind, action = PlacementKind.QUEUE_FOR_FLEX, "queue for FLEX capacity"
    then = f"{action} (provider hint: {hint})"
    if not node_count:
        reason = Reason(
            NO_NODES, f"{head}: the cluster has no nodes; {then}.", resource="nodes", need=1, have=0
        )
    elif job.gpu_count > largest_gpu_count:
        reason = Reason(
            LARGER_THAN_ANY_NODE,
            f"{head}: no node has {job.gpu_count} GPUs (the largest has {largest_gpu_count}); {then}; "
            "splitting a job across nodes is the control plane's call.",
            resource="gpus",
            need=job.gpu_count,
            have=largest_gpu_count,
        )
    else:
        reason = Reason(
            NO_NODE_FITS,
            f"{head}: {', '.join(counts)}, none left; {then}.",
            resource="nodes",
            need=1,
            have=0,
            limit=node_count,
        )
    return PlacementDecision(
        kind=kind, job_id=job.id, tier=job.tier, provider=hint, reason=reason, rejections=rejections
    )


def rejection_of(job: Job, evaluation: NodeEvaluation, best: NodeEvaluation | None) -> NodeRejection:
    """Why the node of ``evaluation`` was not chosen: its filter's reason, or how it ranked below ``best``."""
    node_id = evaluation.node.id
    if evaluation.reason is not None:
        return NodeRejection(node_id, evaluation.reason)
    assert evaluation.score is not None and best is not None and best.score is not None
    mine, theirs = evaluation.score.score, best.score.score
    if job.gpu_models is not None:
        node, other = evaluation.node, best.node
        rank, best_rank = job.model_preference(node.gpu_model), job.model_preference(other.gpu_model)
        if rank != best_rank:
            reason = Reason(
                LESS_PREFERRED_MODEL,
                f"GPU model {node.gpu_model} is choice {rank + 1} of the job's GPU models; "
                f"{other.id} has {other.gpu_model} (choice {best_rank + 1})",
                resource="gpu_model",
                have=rank + 1,
                limit=best_rank + 1,
            )
            return NodeRejection(node_id, reason, mine)
        price, best_price = node.block.price_per_gpu_hour, other.block.price_per_gpu_hour
        if price != best_price:
            digits = 2 if round(price, 2) != round(best_price, 2) else 6
            reason = Reason(
                HIGHER_PRICE,
                f"costs {usd_fixed_plain(price, digits)}/GPU-h, more than {other.id}'s {usd_fixed_plain(best_price, digits)}/GPU-h "
                f"for the same GPU model choice",
                resource="price_per_gpu_hour",
                have=str(price),
                limit=str(best_price),
            )
            return NodeRejection(node_id, reason, mine)
    if round(mine, SCORE_TIE_DIGITS) == round(theirs, SCORE_TIE_DIGITS):
        message = f"scored {mine:.4f}, equal to {best.node.id}; equal scores go to the lowest node id"
    else:
        message = f"scored {mine:.4f}, below {best.node.id}'s {theirs:.4f}"
    reason = Reason(LOWER_SCORE, message, resource="score", have=round(mine, 6), limit=round(theirs, 6))
    return NodeRejection(node_id, reason, mine)


def need_text(job: Job, *, sharing: bool = False) -> str:
    """What ``job`` asks of GPUs: ``4x80 GB GPUs``, ``no GPU``; with ``sharing``, a job that may share a
    GPU says so (``1x20 GB GPU (sharing allowed)``), as the packer's explanations do."""
    if job.gpu_count == 0:
        return "no GPU"
    shared = " (sharing allowed)" if sharing and job.share_gpu else ""
    return f"{job.gpu_count}x{fmt_num(job.vram_per_gpu_gb)} GB {plural(job.gpu_count, 'GPU')}{shared}"


def _count_phrases(job: Job, rejections: Sequence[NodeRejection], safety_margin_sec: float) -> list[str]:
    """``["12 nodes lack 4 GPUs with 60 GB free", "3 expire within 2h05m"]``: most common cause first,
    equal counts in filter order."""
    return count_phrases(job, Counter(r.reason.code for r in rejections), safety_margin_sec)


def count_phrases(job: Job, counts: Mapping[str, int], safety_margin_sec: float) -> list[str]:
    """The packer's ``"12 nodes lack 4 GPUs with 60 GB free, 3 expire within 2h05m"``, from rejection counts
    by code: most common cause first, equal counts in filter order."""
    other_tier = Tier.FLEX.value if job.tier is Tier.FAST else Tier.FAST.value
    window = fmt_duration(job.expected_duration_sec + safety_margin_sec)
    gpus = f"{job.gpu_count} {plural(job.gpu_count, 'GPU')}"
    gpus += f" with {fmt_num(job.vram_per_gpu_gb)} GB free" if job.vram_per_gpu_gb > 0 else " free"
    phrases: list[str] = []
    present = [code for code in REJECTION_ORDER if counts.get(code, 0)]
    for code in sorted(present, key=lambda c: -counts[c]):
        n = counts[code]
        one = n == 1
        text = {
            TIER_MISMATCH: f"{'is' if one else 'are'} {other_tier}",
            GPU_MODEL_NOT_ALLOWED: f"{'has' if one else 'have'} a GPU model the job does not allow",
            CUDA_MISMATCH: f"{'has' if one else 'have'} a CUDA version the job does not allow",
            EXPIRES_TOO_SOON: f"expire{'s' if one else ''} within {window}",
            INSUFFICIENT_CPU: f"lack{'s' if one else ''} {fmt_num(job.cpu_cores)} free CPU cores",
            INSUFFICIENT_RAM: f"lack{'s' if one else ''} {fmt_num(job.ram_gb)} GB free RAM",
            INSUFFICIENT_GPUS: f"lack{'s' if one else ''} {gpus}",
            LESS_PREFERRED_MODEL: f"{'has' if one else 'have'} a less preferred GPU model",
            HIGHER_PRICE: f"cost{'s' if one else ''} more per GPU-hour",
            LOWER_SCORE: "scored lower",
        }[code]
        noun = f" {plural(n, 'node')}" if not phrases else ""
        phrases.append(f"{n}{noun} {text}")
    return phrases
