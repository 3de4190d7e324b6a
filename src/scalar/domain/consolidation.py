"""Consolidation: restartable jobs leave an expensive, underused contract when that saves more than it costs.

A contract is released whole (``domain.release``), so moving jobs saves money only when it *empties* a
contract: every job on it moves to capacity that is already held, and the contract is released once idle.
``plan_moves`` decides which contracts to empty, pure and deterministic:

1. **Sources**: a contract whose GPUs are at most ``max_used_fraction`` in use, whose release saves money
   (``recovery`` > 0: a seller billing running time stops billing; a block paid whole saves only what its
   resale brings, which its caller states), and whose every job may move: ``restartable`` (never a job
   without it), FLEX (a FAST job is never moved) and held on one node (a gang is not split). Most expensive
   per GPU-hour first.
2. **Targets**: READY nodes of other contracts that pass the packer's filters for the job
   (``packing.evaluate_node``: tier, GPU model, CUDA, time left, CPU, RAM, VRAM) and cost less: a contract
   paid whole (its GPUs are paid for either way), or one strictly cheaper per GPU-hour that already holds a
   job (an idle one is about to be released). The cheapest target first, then the fullest (packing), then
   the node id. Every booking goes through ``book_job`` on a working copy, so two moves never take the same
   GPU.
3. **The economics**: the saving is what the contract costs from now until it would have emptied anyway
   (its longest job's expected remaining time, a FLEX job's work at its node's throughput, at most the
   contract's end), times ``recovery``; the restart
   cost is each moved job's lost progress (the time it has run) plus ``restart_overhead_s`` to stop and
   start it again (the boot and the wait), in GPU-hours at the source's price. A contract is emptied only
   when the saving exceeds the restart cost; the decision carries both numbers.

A contract that received jobs in this pass is never emptied in the same pass, and a contract is emptied
only towards strictly cheaper capacity, so moves never go round in circles.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from scalar.domain.contracts import work_rate
from scalar.domain.errors import DomainError, InvalidSpecError
from scalar.domain.money import usd_cents_plain, usd_text
from scalar.domain.packing import evaluate_node
from scalar.domain.packing_apply import book_job
from scalar.domain.packing_model import Job, Node
from scalar.domain.reasons import Reason
from scalar.domain.tier import Tier

_HOUR = Decimal(3600)
MOVE = "consolidation_move"
SKIP = "consolidation_skipped"


@dataclass(frozen=True, slots=True)
class ConsolidationPolicy:
    """``max_used_fraction``: a contract with at most this share of its GPUs in use is underused.
    ``restart_overhead_s``: what stopping a job and starting it on another READY node takes (the boot of its
    process and its wait). ``max_moves``: at most this many jobs move in one pass. ``enabled``: off, nothing
    ever moves."""

    enabled: bool = True
    max_used_fraction: float = 0.5
    restart_overhead_s: float = 120.0
    max_moves: int = 16

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_used_fraction) and 0 <= self.max_used_fraction <= 1):
            raise InvalidSpecError("max_used_fraction", f"must be in [0, 1], got {self.max_used_fraction}")
        if not (math.isfinite(self.restart_overhead_s) and self.restart_overhead_s >= 0):
            raise InvalidSpecError("restart_overhead_s", f"must be >= 0, got {self.restart_overhead_s}")
        if self.max_moves < 0:
            raise InvalidSpecError("max_moves", f"must be >= 0, got {self.max_moves}")


@dataclass(frozen=True, slots=True)
class HeldJob:
    """A job holding capacity: the packer's ``Job`` (its ``restartable`` flag and tier decide), the nodes it
    holds, how long it has run and whether it runs a command (then only agent nodes may host it)."""

    job: Job
    node_ids: tuple[str, ...]
    running_s: float
    agent: bool = False


@dataclass(frozen=True, slots=True)
class Contract:
    """One contract (block) of READY nodes: ``recovery`` is the share of its remaining cost that releasing
    it saves (1 for a seller billing running time); ``sunk`` says it is paid whole (its idle GPUs cost
    nothing more to use)."""

    block_id: str
    node_ids: tuple[str, ...]
    price_per_gpu_hour: Decimal
    end_time: datetime
    recovery: Decimal
    sunk: bool
    agent: bool = False


@dataclass(frozen=True, slots=True)
class Move:
    """``job_id`` leaves ``from_node`` for GPUs ``gpu_indices`` of ``to_node``."""

    job_id: str
    from_node: str
    to_node: str
    gpu_indices: tuple[int, ...]
    lost_s: float


@dataclass(frozen=True, slots=True)
class ConsolidationDecision:
    """One contract considered: emptied (``moves``) or kept, with the numbers and why."""

    block_id: str
    moves: tuple[Move, ...]
    saving: Decimal
    restart_cost: Decimal
    reason: Reason

    @property
    def emptied(self) -> bool:
        return bool(self.moves)


def plan_moves(
    contracts: Sequence[Contract],
    nodes: Mapping[str, Node],
    jobs: Sequence[HeldJob],
    now: datetime,
    policy: ConsolidationPolicy | None = None,
    *,
    safety_margin_s: float = 300.0,
) -> tuple[ConsolidationDecision, ...]:
    """Which underused contracts to empty now, and where each of their jobs goes (module docstring).

    ``nodes`` are the READY nodes (by id) the moves may use, ``jobs`` every job holding any of them. Only
    underused contracts with jobs get a decision (emptied, or kept with the reason)."""
    pol = policy or ConsolidationPolicy()
    if not pol.enabled or pol.max_moves == 0:
        return ()
    work = dict(nodes)
    by_node: dict[str, list[HeldJob]] = {}
    for held in jobs:
        for node_id in held.node_ids:
            by_node.setdefault(node_id, []).append(held)
    contract_of = {n: c for c in contracts for n in c.node_ids}
    decisions: list[ConsolidationDecision] = []
    received: set[str] = set()
    emptied: set[str] = set()
    moves_left = pol.max_moves

    def used(node_ids: Sequence[str]) -> tuple[int, int]:
        total = sum(work[n].gpu_count for n in node_ids if n in work)
        busy = sum(work[n].gpu_count - work[n].free_gpu_count() for n in node_ids if n in work)
        return busy, total

    candidates = []
    for c in contracts:
        if c.recovery <= 0 or not c.node_ids or any(n not in work for n in c.node_ids):
            continue
        busy, total = used(c.node_ids)
        held_here = {h.job.id: h for n in c.node_ids for h in by_node.get(n, ())}
        if busy == 0 or not held_here or total == 0 or busy > pol.max_used_fraction * total:
            continue
        candidates.append((c, busy, total, held_here))
    candidates.sort(key=lambda item: (-item[0].price_per_gpu_hour, item[0].block_id))

    for c, busy, total, held_here in candidates:
        if c.block_id in received:
            continue
        head = (
            f"contract {c.block_id} ({busy} of {total} GPUs in use at {usd_text(c.price_per_gpu_hour)}/GPU-h)"
        )
        blocked = _unmovable(list(held_here.values()), set(c.node_ids))
        if blocked is not None:
            decisions.append(_kept(c.block_id, Reason(SKIP, f"{head} stays: {blocked}")))
            continue
        if len(held_here) > moves_left:
            decisions.append(
                _kept(
                    c.block_id,
                    Reason(SKIP, f"{head} stays: its {len(held_here)} jobs exceed this pass's moves"),
                )
            )
            continue
        trial = dict(work)
        planned: list[Move] = []
        refused: str | None = None
        for held in sorted(held_here.values(), key=lambda h: (-h.job.gpu_count, h.job.id)):
            target = _target(held, c, contracts, contract_of, trial, by_node, now, safety_margin_s, emptied)
            if target is None:
                refused = f"no cheaper READY node has room for job {held.job.id} ({held.job.gpu_count} GPUs)"
                break
            node_id, indices = target
            trial[node_id] = book_job(trial[node_id], held.job, indices)
            planned.append(Move(held.job.id, held.node_ids[0], node_id, indices, held.running_s))
        if refused is not None:
            decisions.append(_kept(c.block_id, Reason(SKIP, f"{head} stays: {refused}")))
            continue
        remaining = max(0.0, (c.end_time - now).total_seconds())
        left = max(max(0.0, _run_s(h, nodes) - h.running_s) for h in held_here.values())
        horizon_s = Decimal(str(min(remaining, left)))
        gpus = Decimal(total)
        saving = c.price_per_gpu_hour * gpus * horizon_s / _HOUR * c.recovery
        lost_gpu_s = sum(
            Decimal(str(h.running_s + pol.restart_overhead_s)) * h.job.gpu_count for h in held_here.values()
        )
        cost = c.price_per_gpu_hour * lost_gpu_s / _HOUR
        numbers = (
            f"releasing it saves {usd_cents_plain(saving)} over the {float(horizon_s):.0f} s it would otherwise run "
            f"(x{c.recovery} recovered), restarting its {len(planned)} job(s) costs {usd_cents_plain(cost)} "
            f"({float(lost_gpu_s) / 3600:.3f} GPU-h of lost progress and restart)"
        )
        if saving <= cost:
            decisions.append(
                ConsolidationDecision(c.block_id, (), saving, cost, Reason(SKIP, f"{head} stays: {numbers}"))
            )
            continue
        where = ", ".join(f"{m.job_id} -> {m.to_node}" for m in planned)
        work = trial
        for m in planned:
            received.add(contract_of[m.to_node].block_id)
        emptied.add(c.block_id)
        moves_left -= len(planned)
        reason = Reason(MOVE, f"{head} is emptied: {numbers}; moves {where}", "saving", have=str(saving))
        decisions.append(ConsolidationDecision(c.block_id, tuple(planned), saving, cost, reason))
    return tuple(decisions)


def _run_s(held: HeldJob, nodes: Mapping[str, Node]) -> float:
    """How long ``held`` runs where it is: a FLEX job's expected duration is its work on the reference GPU,
    done at its node's relative throughput (``contracts.work_rate``); a FAST job runs its wall time."""
    node = nodes.get(held.node_ids[0]) if held.node_ids else None
    model = node.block.gpu_model if node is not None else None
    return held.job.expected_duration_sec / work_rate(model, held.job.tier)


def _kept(block_id: str, reason: Reason) -> ConsolidationDecision:
    return ConsolidationDecision(block_id, (), Decimal(0), Decimal(0), reason)


def _unmovable(held: Sequence[HeldJob], contract_nodes: set[str]) -> str | None:
    for h in sorted(held, key=lambda h: h.job.id):
        if not h.job.restartable:
            return f"job {h.job.id} is not restartable (never moved)"
        if h.job.tier is Tier.FAST:
            return f"job {h.job.id} is FAST (never moved)"
        if len(h.node_ids) != 1 or h.node_ids[0] not in contract_nodes:
            return f"job {h.job.id} is a gang over several nodes (not split)"
    return None


def _target(
    held: HeldJob,
    source: Contract,
    contracts: Sequence[Contract],
    contract_of: Mapping[str, Contract],
    trial: Mapping[str, Node],
    by_node: Mapping[str, list[HeldJob]],
    now: datetime,
    margin_s: float,
    emptied: set[str],
) -> tuple[str, tuple[int, ...]] | None:
    options = []
    for node_id, node in trial.items():
        c = contract_of.get(node_id)
        if c is None or c.block_id == source.block_id or c.block_id in emptied or c.agent != held.agent:
            continue
        holds_job = bool(by_node.get(node_id)) or node.free_gpu_count() < node.gpu_count
        if not (c.sunk or (c.price_per_gpu_hour < source.price_per_gpu_hour and holds_job)):
            continue
        evaluation = evaluate_node(held.job, node, now, safety_margin_sec=margin_s)
        if evaluation.reason is not None:
            continue
        price = Decimal(0) if c.sunk else c.price_per_gpu_hour
        options.append((price, node.free_gpu_count(), node_id, evaluation.gpu_indices))
    if not options:
        return None
    _, _, node_id, indices = min(options, key=lambda o: (o[0], o[1], o[2]))
    try:
        book_job(trial[node_id], held.job, indices)
    except DomainError:
        return None
    return node_id, tuple(indices)
