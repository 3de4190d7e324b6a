"""Booking a placement onto nodes, and releasing it: pure, returns new nodes, refuses double booking.

The control plane and the simulator book with :func:`apply_placement` after :func:`schedule_job`. Booking
re-checks everything it changes (the decision may be stale): each GPU must take the job under the sharing
rules, VRAM, CPU and RAM must not go above the node's totals, and a job is booked on a node only once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from scalar.domain.errors import DomainError
from scalar.domain.packing import PlacementDecision, PlacementKind
from scalar.domain.packing_model import GpuSlot, Job, Node
from scalar.domain.packing_text import fmt_num

# A VRAM/CPU/RAM residue this small after a release is float noise, not usage.
_NOISE = 1e-9
# Usage is kept on a grid of 1e-9 (cores, GB): sums of fractional requests (3.152 cores, 7.36 GB) would
# otherwise drift, and a node with exactly one core left would read 0.99999999999999 and refuse a 1-core job.
_DIGITS = 9


def _more(value: float, amount: float) -> float:
    return round(value + amount, _DIGITS)


class PlacementConflictError(DomainError):
    """A booking would double-book a GPU, over-commit a resource, or does not match its decision."""


def _book_slot(slot: GpuSlot, job: Job, node_id: str) -> GpuSlot:
    where = f"GPU {slot.index} of node {node_id}"
    if slot.job_id is not None:
        raise PlacementConflictError(
            f"{where} is already held by job {slot.job_id}; job {job.id} cannot be booked on it.",
            "schedule the job again on the current nodes",
        )
    shares = job.shares_on(slot)
    if slot.job_ids and not shares:
        raise PlacementConflictError(
            f"{where} is shared by {', '.join(slot.job_ids)}; job {job.id} does not share GPUs "
            f"(share_gpu={job.share_gpu}, needs {fmt_num(job.vram_per_gpu_gb)} of "
            f"{fmt_num(slot.vram_total_gb)} GB).",
            "schedule the job again on the current nodes",
        )
    if slot.vram_used_gb + job.vram_per_gpu_gb > slot.vram_total_gb:
        raise PlacementConflictError(
            f"{where} has {fmt_num(slot.vram_free_gb)} GB VRAM free; job {job.id} needs "
            f"{fmt_num(job.vram_per_gpu_gb)} GB.",
            "schedule the job again on the current nodes",
        )
    used = _more(slot.vram_used_gb, job.vram_per_gpu_gb)
    if shares:
        return replace(slot, vram_used_gb=used, job_ids=(*slot.job_ids, job.id))
    return replace(slot, vram_used_gb=used, job_id=job.id)


def book_job(node: Node, job: Job, gpu_indices: Sequence[int]) -> Node:
    """``node`` with ``job`` booked on ``gpu_indices``, its CPU and its RAM; raise on any conflict."""
    if len(gpu_indices) != job.gpu_count:
        raise PlacementConflictError(
            f"job {job.id} needs {job.gpu_count} GPUs but {len(gpu_indices)} were given for node {node.id}."
        )
    wanted = set(gpu_indices)
    if len(wanted) != len(gpu_indices):
        raise PlacementConflictError(f"GPU indices {list(gpu_indices)} for job {job.id} repeat an index.")
    if any(slot.holds(job.id) for slot in node.gpu_slots):
        raise PlacementConflictError(f"job {job.id} is already booked on node {node.id}.")
    known = {slot.index for slot in node.gpu_slots}
    missing = sorted(wanted - known)
    if missing:
        raise PlacementConflictError(f"node {node.id} has no GPU with index {missing[0]}.")
    if node.cpu_used + job.cpu_cores > node.block.cpu_per_node:
        raise PlacementConflictError(
            f"node {node.id} has {fmt_num(node.free_cpu())} CPU cores free; job {job.id} needs "
            f"{fmt_num(job.cpu_cores)}."
        )
    if node.ram_used_gb + job.ram_gb > node.block.ram_per_node_gb:
        raise PlacementConflictError(
            f"node {node.id} has {fmt_num(node.free_ram_gb())} GB RAM free; job {job.id} needs "
            f"{fmt_num(job.ram_gb)} GB."
        )
    slots = tuple(_book_slot(slot, job, node.id) if slot.index in wanted else slot for slot in node.gpu_slots)
    return replace(
        node,
        gpu_slots=slots,
        cpu_used=_more(node.cpu_used, job.cpu_cores),
        ram_used_gb=_more(node.ram_used_gb, job.ram_gb),
    )


def _less(value: float, amount: float) -> float:
    rest = round(value - amount, _DIGITS)
    return 0.0 if rest < _NOISE else rest


def release_job(node: Node, job: Job) -> Node:
    """``node`` with ``job`` taken off every GPU it holds, and its VRAM, CPU and RAM given back."""
    if not any(slot.holds(job.id) for slot in node.gpu_slots) and job.gpu_count > 0:
        raise PlacementConflictError(f"job {job.id} is not booked on node {node.id}; nothing to release.")
    slots: list[GpuSlot] = []
    for slot in node.gpu_slots:
        if not slot.holds(job.id):
            slots.append(slot)
            continue
        used = _less(slot.vram_used_gb, job.vram_per_gpu_gb)
        if slot.job_id == job.id:
            slots.append(replace(slot, vram_used_gb=used, job_id=None))
        else:
            rest = tuple(j for j in slot.job_ids if j != job.id)
            slots.append(replace(slot, vram_used_gb=used, job_ids=rest))
    return replace(
        node,
        gpu_slots=tuple(slots),
        cpu_used=_less(node.cpu_used, job.cpu_cores),
        ram_used_gb=_less(node.ram_used_gb, job.ram_gb),
    )


def apply_placement(nodes: Sequence[Node], decision: PlacementDecision, job: Job) -> tuple[Node, ...]:
    """The nodes after booking ``decision`` for ``job``; unchanged when the decision placed nothing.

    Raises :class:`PlacementConflictError` when the decision is for another job, names an unknown node, or
    would double-book a GPU or over-commit VRAM, CPU or RAM.
    """
    if decision.job_id != job.id:
        raise PlacementConflictError(f"the decision is for job {decision.job_id}, not job {job.id}.")
    if decision.kind is not PlacementKind.EXISTING_NODE:
        return tuple(nodes)
    for position, node in enumerate(nodes):
        if node.id == decision.node_id:
            booked = book_job(node, job, decision.gpu_indices)
            return (*nodes[:position], booked, *nodes[position + 1 :])
    raise PlacementConflictError(
        f"node {decision.node_id} of the decision is not among the nodes given.",
        "schedule the job again on the current nodes",
    )
