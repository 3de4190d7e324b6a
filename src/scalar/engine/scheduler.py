"""The scheduling pass: pending jobs, in queue order, onto READY nodes.

Jobs are tried in ``order_pending`` order (priority higher first, then arrival). Each goes through
``schedule_job`` over the READY nodes, scored with Scalar's score (``domain.packing_scalar``, its prior
learnt from the jobs submitted so far: ``ClusterState.shapes``) or, with ``packing_score = "seed"``, seed
001's; a placement is booked with the domain's ``book_job`` (which
re-checks every resource, so nothing is ever double-booked) and becomes a ``StartWork``. A job that no
single node can hold (more GPUs than any READY node of its tier has) is placed as a *gang*: on ``k``
whole free nodes of one block, all of them or none.

Shortcuts keep a pass cheap and change no decision: nodes only fill up during a pass, so a job with
the same needs as one that already failed (and at least as long) fails too and is not evaluated again,
nor even visited: the pass walks the pending index (``scalar.engine.pending_index``, per-shape queues
merged in queue order) and asks a failed shape only for its next shorter job; and nodes the packer cannot
tell apart are scored once per job (``scalar.engine.packing_classes``).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from scalar.domain.errors import DomainError
from scalar.domain.market import NodeState
from scalar.domain.packing import (
    REJECTION_ORDER,
    NodeRejection,
    evaluate_node,
)
from scalar.domain.packing import need_text as need_text  # controller.py and autoscaler.py import it here
from scalar.domain.packing_model import Job, Node, order_pending
from scalar.domain.packing_text import fmt_indices
from scalar.domain.reasons import Reason
from scalar.engine.actions import StartWork, WorkPlacement
from scalar.engine.agents import NEEDS_AGENT_NODE
from scalar.engine.config import SCALAR_SCORE, ControllerConfig
from scalar.engine.groups import gang_parts
from scalar.engine.lifecycle import JobState
from scalar.engine.packing_classes import NodeClasses
from scalar.engine.pending_index import OrderKey, Shape
from scalar.engine.resale import offered_cuts, until_cut
from scalar.engine.state import ClusterState, JobRecord, PlacementSummary, RejectionCount, SkipLog

GANG_PLACED = "gang_placed"
GANG_NO_BLOCK = "gang_no_block"


def count_rejections(rejections: Sequence[NodeRejection]) -> tuple[RejectionCount, ...]:
    """Node rejections grouped by reason code, most common first (ties in the packer's filter order)."""
    counts = Counter(r.reason.code for r in rejections)
    first: dict[str, str] = {}
    for r in rejections:
        first.setdefault(r.reason.code, f"{r.node_id}: {r.reason.message}")
    order = {code: i for i, code in enumerate(REJECTION_ORDER)}
    codes = sorted(counts, key=lambda c: (-counts[c], order.get(c, len(order)), c))
    return tuple(RejectionCount(c, counts[c], first[c]) for c in codes)


class _Pass:
    """One scheduling pass over the READY nodes (mutable, private)."""

    def __init__(self, state: ClusterState, config: ControllerConfig, now: datetime) -> None:
        self.state = state
        self.config = config
        self.now = now
        self.margin = config.safety_margin_s
        # Scalar's score with the prior learnt from the jobs submitted so far, or seed 001's (``None``).
        self.prior = state.shapes.prior if config.packing_score == SCALAR_SCORE else None
        ready = [
            rec
            for rec in state.nodes.values()
            if rec.state is NodeState.READY and rec.node.block.end_time > now and not rec.draining
        ]
        ready.sort(key=lambda r: r.id)
        # A node named by a sell order in flight ends, for the packer, at the sale's cut (engine/resale.py):
        # only work that ends before it goes there, and the expiry filter says why the rest does not.
        self.cuts = offered_cuts(state)
        self.nodes: list[Node] = [until_cut(r.node, self.cuts) for r in ready]
        self.position = {n.id: i for i, n in enumerate(self.nodes)}
        # shape -> (duration of the job that failed, the summary every job of that shape and at least that
        # duration gets: one value shared by all of them, not one new sentence per skipped job)
        self.failed: dict[tuple[object, ...], tuple[float, PlacementSummary]] = {}
        self.reserved = reservations(state, config, now, [r.id for r in ready])
        # Jobs with a command run only on agent-backed nodes, pure reservations only on the others.
        self.agent_ids = frozenset(r.id for r in ready if r.agent)
        views = state.node_views if config.pending_index else None
        if views is not None and len(views) > 2 * len(ready) + 64:  # forget nodes gone from READY
            keep = {r.id for r in ready}
            views = state.node_views = {k: v for k, v in views.items() if k in keep}
        self.classes = NodeClasses(
            [n for n in self.nodes if n.id not in self.agent_ids], self.reserved, views
        )
        self.agent_classes = NodeClasses(
            [n for n in self.nodes if n.id in self.agent_ids], self.reserved, views
        )
        self.log: SkipLog | None = None  # what skipped jobs were told (the indexed walk only)
        self.key: OrderKey | None = None  # the order key of the job being tried (the indexed walk only)
        self.clears = 0  # how many times placed reservations reopened every shape (``failed`` cleared)
        self.largest: dict[object, int] = {}
        for node in self.nodes:
            kind = (node.tier, node.id in self.agent_ids)
            self.largest[kind] = max(self.largest.get(kind, 0), node.gpu_count)

    def refresh(self, node_id: str) -> None:
        i = self.position[node_id]
        self.nodes[i] = until_cut(self.state.nodes[node_id].node, self.cuts)
        self.classes_of(node_id).update(self.nodes[i], self.reserved.get(node_id))

    def classes_of(self, node_id: str) -> NodeClasses:
        return self.agent_classes if node_id in self.agent_ids else self.classes

    def run(self, records: Sequence[JobRecord]) -> None:
        """The reference walk: every pending job in queue order (``config.pending_index`` false)."""
        self.state.skipped = None
        by_id = {rec.spec.job_id: rec for rec in records}
        jobs = [rec.job for rec in records if rec.job is not None]
        for job in order_pending(jobs):
            self.try_job(by_id[job.id], job)

    def run_indexed(self) -> None:
        """The same walk over the pending index, visiting only the jobs ``try_job`` would evaluate.

        The queue is the merge, by order key, of one stream per shape plus one of the jobs capacity is
        held for (their shape includes the nodes held for them: each is tried on its own). After a job of
        a shape fails, its stream yields only the next job shorter than the failed one (``try_job`` skips
        the others without evaluating them); when a placed job's reservations lapse, every shape is open
        again (``failed`` is cleared) and every stream resumes after that job. The jobs
        passed over get their placement summary from ``state.skipped`` (``ClusterState.placement_of``)."""
        state = self.state
        index = state.pending_index
        self.log = SkipLog(index.seq)
        state.skipped = self.log
        held = {j for jobs in self.reserved.values() for j in jobs if j in index.entries}
        special = sorted((index.key(j), j) for j in held)
        shapes = list(index.queues)
        heap: list[tuple[OrderKey, int, str]] = [(k, -1 - i, j) for i, (k, j) in enumerate(special)]
        for si, shape in enumerate(shapes):
            self._push(heap, si, shape, None, math.inf, held)
        heapq.heapify(heap)
        clears = self.clears
        while heap:
            key, si, job_id = heapq.heappop(heap)
            rec = state.jobs[job_id]
            assert rec.job is not None
            self.key = key
            self.try_job(rec, rec.job)
            if self.clears != clears:  # every shape is open again, from here on
                clears = self.clears
                heap = [e for e in heap if e[1] < 0]
                for sj, shape in enumerate(shapes):
                    self._push(heap, sj, shape, key, math.inf, held)
                heapq.heapify(heap)
            elif si >= 0:
                static = shapes[si]
                seen = self.failed.get((*static[:8], frozenset(), static[8]))
                self._push(heap, si, static, key, math.inf if seen is None else seen[0], held)

    def _push(
        self,
        heap: list[tuple[OrderKey, int, str]],
        si: int,
        shape: Shape,
        after: OrderKey | None,
        shorter_than: float,
        held: set[str],
    ) -> None:
        """Push stream ``si``'s next job after ``after`` shorter than ``shorter_than`` (held jobs have
        their own stream)."""
        queue = self.state.pending_index.queues.get(shape)
        if queue is None:
            return
        found = queue.next_after(after, shorter_than)
        while found is not None and found[1] in held:
            found = queue.next_after(found[0], shorter_than)
        if found is not None:
            heapq.heappush(heap, (found[0], si, found[1]))

    def try_job(self, rec: JobRecord, job: Job) -> None:
        if self.log is not None:
            self.log.visited.add(job.id)
        mine = frozenset(n for n, jobs in self.reserved.items() if job.id in jobs)
        shape = (
            job.tier,
            job.gpu_count,
            job.vram_per_gpu_gb,
            job.cpu_cores,
            job.ram_gb,
            job.gpu_models,
            job.cuda_versions,
            job.share_gpu,
            mine,
            bool(rec.spec.command),
        )
        seen = self.failed.get(shape)
        if seen is not None and job.expected_duration_sec >= seen[0]:
            rec.placement = seen[1]
            return
        # schedule_job over the nodes not held for other jobs, each class of identical nodes scored once
        on_agents = bool(rec.spec.command)
        classes = self.agent_classes if on_agents else self.classes
        placement = classes.schedule(job, self.now, self.margin, self.prior)
        decision = placement.decision
        if decision.placed and decision.node_id is not None:
            if self.place(rec, job, ((decision.node_id, job, decision.gpu_indices),), decision.reason):
                return
        summary = PlacementSummary(
            decision.kind.value, decision.reason.message, (), placement.counts, self.now
        )
        if on_agents and not classes.nodes:
            summary = PlacementSummary(
                NEEDS_AGENT_NODE,
                f"job {job.id} runs a command, so it needs a READY node with a Scalar agent and there is none: "
                "start one with `scalar agent --controller URL --join-token TOKEN` (or `scalar up --demo`)",
                (),
                (),
                self.now,
            )
        largest = self.largest.get((job.tier, on_agents), 0)
        if job.gpu_count > largest > 0:
            kind = [n for n in self.nodes if (n.id in self.agent_ids) == on_agents]
            gang = self.try_gang(rec, job, self.allowed(job, kind))
            if gang is None:
                return
            summary = gang
        rec.placement = summary
        same = replace(
            summary, message=f"same needs as job {job.id}, which no node fits now: {summary.message}"
        )
        self.failed[shape] = (job.expected_duration_sec, same)
        if self.log is not None and not mine and self.key is not None:
            self.log.fail(self.state.pending_index.shape(job.id), self.key, same)

    def place(
        self,
        rec: JobRecord,
        job: Job,
        parts: Sequence[tuple[str, Job, tuple[int, ...]]],
        reason: Reason,
    ) -> bool:
        """Book every part (all or nothing) and start the job; False if the domain refused a booking."""
        booked: list[str] = []
        try:
            for node_id, part, indices in parts:
                self.state.book(rec, node_id, part, indices)
                booked.append(node_id)
        except DomainError as err:
            self.state.release(rec)
            self.state.note("job", job.id, Reason("booking_refused", f"booking refused: {err.message}"))
            for node_id in booked:
                self.refresh(node_id)
            return False
        for node_id in booked:
            self.refresh(node_id)
        self.unreserve(job.id)
        placements = tuple(WorkPlacement(node_id, indices) for node_id, _, indices in parts)
        self.state.move_job(rec, JobState.SCHEDULED, reason)
        rec.scheduled_at = self.now
        rec.placement = PlacementSummary("EXISTING_NODE", reason.message, tuple(booked), (), self.now)
        action = StartWork(
            action_id=self.state.next_id("act"),
            reason=reason,
            job_id=job.id,
            placements=placements,
            expected_duration_s=math.ceil(job.expected_duration_sec),
        )
        self.state.emit(action, (job.id, *booked))
        return True

    def allowed(self, job: Job, nodes: list[Node]) -> list[Node]:
        """``nodes`` minus those held for other jobs (capacity bought for them, still booting or just READY)."""
        if not self.reserved:
            return nodes
        return [n for n in nodes if job.id in self.reserved.get(n.id, (job.id,))]

    def unreserve(self, job_id: str) -> None:
        """A placed job no longer holds capacity: other jobs may now use what it did not take."""
        changed = False
        for node_id in list(self.reserved):
            jobs = self.reserved[node_id]
            if job_id in jobs:
                jobs.discard(job_id)
                changed = True
                if not jobs:
                    del self.reserved[node_id]
                self.classes_of(node_id).update(
                    self.nodes[self.position[node_id]], self.reserved.get(node_id)
                )
        if changed:
            self.failed.clear()  # more nodes are open to others: earlier failures may now fit
            self.clears += 1
            if self.log is not None and self.key is not None:
                self.log.clears.append(self.key)
            self.state.schedule_dirty = True  # and jobs tried before this one get another go next step

    def try_gang(self, rec: JobRecord, job: Job, nodes: list[Node]) -> PlacementSummary | None:
        """Place ``job`` on whole free nodes of one block; ``None`` when placed, else why not."""
        rejections: list[NodeRejection] = []
        by_block: dict[str, list[tuple[Node, tuple[int, ...]]]] = {}
        for node in nodes:
            per_node = node.gpu_count
            if per_node == 0 or per_node >= job.gpu_count:
                continue
            k = math.ceil(job.gpu_count / per_node)
            if self.state.nodes[node.id].jobs or node.free_gpu_count() < per_node:
                rejections.append(
                    NodeRejection(
                        node.id, Reason("not_whole_free", "holds other jobs; a gang needs whole free nodes")
                    )
                )
                continue
            largest = replace(job, gpu_count=gang_parts(job.gpu_count, k)[0])
            evaluation = evaluate_node(largest, node, self.now, safety_margin_sec=self.margin)
            if evaluation.reason is not None:
                rejections.append(NodeRejection(node.id, evaluation.reason))
                continue
            by_block.setdefault(node.block_id, []).append((node, evaluation.gpu_indices))
        options = []
        for block_id, members in by_block.items():
            k = math.ceil(job.gpu_count / members[0][0].gpu_count)
            if len(members) >= k:
                options.append((len(members), block_id, k))
        head = f"{job.tier.value} job {job.id} needs {need_text(job)} as a gang of whole nodes"
        if not options:
            best = max((len(m) for m in by_block.values()), default=0)
            counted = count_rejections(rejections)
            parts = ", ".join(f"{c.count} {c.code}" for c in counted)
            message = f"{head}: no block has enough whole free nodes (best has {best})" + (
                f"; {parts}" if parts else ""
            )
            return PlacementSummary(GANG_NO_BLOCK, message, (), counted, self.now)
        _, block_id, k = min(options)
        members = sorted(by_block[block_id], key=lambda m: m[0].id)[:k]
        sizes = gang_parts(job.gpu_count, k)
        parts_out: list[tuple[str, Job, tuple[int, ...]]] = []
        for (node, _), size in zip(members, sizes, strict=True):
            part = replace(job, gpu_count=size)
            evaluation = evaluate_node(part, node, self.now, safety_margin_sec=self.margin)
            parts_out.append((node.id, part, evaluation.gpu_indices))
        where = ", ".join(f"{nid} GPUs {fmt_indices(ix)}" for nid, _, ix in parts_out)
        reason = Reason(
            GANG_PLACED,
            f"{head}: placed on {k} whole nodes of block {block_id}: {where}.",
            "nodes",
            k,
            k,
        )
        if self.place(rec, job, parts_out, reason):
            return None
        return PlacementSummary(GANG_NO_BLOCK, f"{head}: booking refused", (), (), self.now)


def reservations(
    state: ClusterState, config: ControllerConfig, now: datetime, node_ids: Sequence[str]
) -> dict[str, set[str]]:
    """Node id -> the pending jobs it is held for. A node is held for the jobs its purchase serves while
    its slice boots and for ``reservation_s`` after the slice is READY; a failed slice holds nothing."""
    out: dict[str, set[str]] = {}
    for node_id in node_ids:
        node = state.nodes[node_id]
        sl = state.slices.get(node.slice_id)
        order = state.orders.get(sl.order_key) if sl is not None and sl.order_key else None
        if sl is None or order is None or not order.serves:
            continue
        if sl.state is NodeState.READY:
            if sl.state_at is None or (now - sl.state_at).total_seconds() >= config.reservation_s:
                continue
        elif sl.state not in (NodeState.BOOTING, NodeState.INITIALIZING):
            continue
        jobs = {j for j in order.serves if j in state.pending_ids}
        if jobs:
            out[node_id] = jobs
    return out


def next_lapse(
    state: ClusterState, config: ControllerConfig, reserved: dict[str, set[str]]
) -> datetime | None:
    """When the first reservation of a READY slice lapses (then other jobs may use its nodes)."""
    times = []
    for node_id in reserved:
        sl = state.slices[state.nodes[node_id].slice_id]
        if sl.state is NodeState.READY and sl.state_at is not None:
            times.append(sl.state_at + timedelta(seconds=config.reservation_s))
    return min(times, default=None)


def schedule(state: ClusterState, config: ControllerConfig, now: datetime) -> None:
    """Place what can be placed now; each placement emits a ``StartWork``.

    The pass is skipped when nothing can have changed its outcome since the last one: no job became
    pending, no GPU was freed, no node became READY and no reservation lapsed. (Between passes nodes only
    fill up and time only shortens what is left of them, so a job that did not fit still does not.)
    """
    due = state.next_schedule_at is not None and now >= state.next_schedule_at
    if not state.pending_ids or not (state.schedule_dirty or due):
        return
    state.schedule_dirty = False
    pass_ = _Pass(state, config, now)
    if config.pending_index:
        pass_.run_indexed()
    else:
        pass_.run([state.jobs[job_id] for job_id in state.pending_ids])
    state.next_schedule_at = next_lapse(state, config, pass_.reserved)
