"""The packer's placement over many nodes at once: nodes the packer cannot tell apart are scored once.

``schedule_job`` evaluates every node for every job, O(jobs x nodes): 10,000 jobs on 1,000 nodes took
over 20 s. But the packer reads only a node's block (model, provider, CPU/RAM size, end time), tier, CPU
and RAM in use and its GPUs (index, VRAM, held or shared), never which job holds a GPU. Nodes equal in all
of that (a fresh block's nodes, or nodes filled the same way) get the same verdict and score, and among
equal scores the lowest node id wins. So a scheduling pass keeps the READY nodes in such *classes*
(updated as bookings change nodes), evaluates one node per class (its lowest id), and counts rejections
per class. The decision is exactly ``schedule_job``'s: the same node, GPUs and score, and the same reason
sentence with the same counts (``tests/engine/test_packing_classes.py`` compares them on random clusters).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from scalar.domain.packing import (  # the packer's own wording, reused as is
    REJECTION_ORDER,
    NodeEvaluation,
    PlacementDecision,
    RankKey,
    count_phrases,
    evaluate_node,
    need_text,
    no_placement,
    placed,
    placement_rank,
    rejection_of,
)
from scalar.domain.packing_model import Job, Node
from scalar.domain.packing_scalar import Prior
from scalar.engine.state import RejectionCount

ClassKey = tuple[object, ...]


def node_key(node: Node, reserved_for: frozenset[str] | None) -> ClassKey:
    """Everything the packer reads of a node (and who the node is held for): equal keys, equal verdicts."""
    return (_packer_view(node), reserved_for)


def _packer_view(node: Node) -> ClassKey:
    slots = tuple(
        (s.index, s.vram_total_gb, s.vram_used_gb, s.job_id is not None, bool(s.job_ids))
        for s in node.gpu_slots
    )
    return (node.block, node.tier, node.cpu_used, node.ram_used_gb, slots)


@dataclass(frozen=True, slots=True)
class ClassPlacement:
    """``schedule_job``'s decision (``rejections`` left empty) and its rejections counted per reason."""

    decision: PlacementDecision
    counts: tuple[RejectionCount, ...]


class NodeClasses:
    """The READY nodes of one scheduling pass, grouped by :func:`node_key`; each group sorted by id."""

    def __init__(
        self,
        nodes: Sequence[Node],
        reserved: Mapping[str, set[str]],
        views: dict[str, tuple[Node, ClassKey]] | None = None,
    ) -> None:
        """``views``: what the packer reads of each node, kept across passes by the caller (a ``Node`` is
        immutable: a booking makes a new one, so a view is reused only for the very same node)."""
        self.nodes: dict[str, Node] = {}
        self.key_of: dict[str, ClassKey] = {}
        self.members: dict[ClassKey, list[str]] = {}
        self.views = views
        for node in nodes:
            self._add(node, reserved.get(node.id))

    def _add(self, node: Node, reserved_for: set[str] | None) -> None:
        held = None if reserved_for is None else frozenset(reserved_for)
        if self.views is None:
            key = node_key(node, held)
        else:
            seen = self.views.get(node.id)
            if seen is None or seen[0] is not node:
                seen = self.views[node.id] = (node, _packer_view(node))
            key = (seen[1], held)
        self.nodes[node.id] = node
        self.key_of[node.id] = key
        bisect.insort(self.members.setdefault(key, []), node.id)

    def update(self, node: Node, reserved_for: set[str] | None) -> None:
        """A node changed (a booking) or who it is held for did."""
        old = self.key_of.pop(node.id)
        group = self.members[old]
        group.remove(node.id)
        if not group:
            del self.members[old]
        self._add(node, reserved_for)

    def schedule(
        self, job: Job, now: datetime, safety_margin_sec: float, prior: Prior | None = None
    ) -> ClassPlacement:
        """Exactly ``schedule_job(job, allowed nodes, now, prior=prior)``: the nodes held for other jobs
        left out. (Scalar's score, like the seed's, reads only what :func:`node_key` holds.)"""
        classes: list[tuple[list[str], NodeEvaluation]] = []
        for key, members in self.members.items():
            held_for = key[-1]
            if held_for is not None and job.id not in held_for:  # type: ignore[operator]
                continue
            rep = self.nodes[members[0]]
            evaluation = evaluate_node(job, rep, now, safety_margin_sec=safety_margin_sec, prior=prior)
            classes.append((members, evaluation))
        best: tuple[list[str], NodeEvaluation] | None = None
        best_rank: RankKey | None = None
        for entry in classes:
            if entry[1].reason is None and entry[1].score is not None:
                rank = placement_rank(job, entry[1], entry[0][0])
                if best_rank is None or rank < best_rank:
                    best, best_rank = entry, rank
        counts: Counter[str] = Counter()
        examples: dict[str, tuple[str, str]] = {}
        for members, evaluation in classes:
            rest = members[1:] if best is not None and members is best[0] else members
            if not rest:
                continue
            if evaluation.reason is not None:
                reason = evaluation.reason
            else:
                assert best is not None
                reason = rejection_of(job, replace(evaluation, node=self.nodes[rest[0]]), best[1]).reason
            counts[reason.code] += len(rest)
            seen = examples.get(reason.code)
            if seen is None or rest[0] < seen[0]:
                examples[reason.code] = (rest[0], reason.message)
        order = {code: i for i, code in enumerate(REJECTION_ORDER)}
        codes = sorted(counts, key=lambda c: (-counts[c], order.get(c, len(order)), c))
        counted = tuple(RejectionCount(c, counts[c], f"{examples[c][0]}: {examples[c][1]}") for c in codes)
        head = f"{job.tier.value} job {job.id} needs {need_text(job, sharing=True)}"
        phrases = count_phrases(job, counts, safety_margin_sec)
        if best is not None:
            return ClassPlacement(placed(job, best[1], head, phrases), counted)
        return ClassPlacement(self._no_placement(job, classes, head, phrases), counted)

    def _no_placement(
        self, job: Job, classes: list[tuple[list[str], NodeEvaluation]], head: str, phrases: list[str]
    ) -> PlacementDecision:
        total = sum(len(members) for members, _ in classes)
        largest = max((self.nodes[members[0]].gpu_count for members, _ in classes), default=0)
        return no_placement(job, total, largest, head, phrases)
