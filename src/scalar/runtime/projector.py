"""Projections and decisions for what one controller step changed, written in the step's transaction.

The API and CLI read the projection tables (``jobs``, ``nodes``, ``blocks``, ``orders``, ``scale_groups``) and
the ``decisions`` table; they never replay the log. After each step the projector looks at the story
entries the step added (every lifecycle move and notable non-move, with its key) to find what changed:

- a job's entry rewrites the job and the nodes it is on now or was on before (their free GPUs moved);
- a node's entry rewrites the node and its block; an order's entry rewrites the order, its block and the
  scale groups (slice counts); slices, autoscaler notes and market observations rewrite the scale groups;
- every ``refresh_s`` the open blocks (accrued cost) and the scale groups (backoff expiry) are rewritten.

Scale groups are compared with what was last written, so an unchanged group costs no write. Every new story
entry becomes one ``decisions`` row (entity id = the story's key).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scalar.engine import Controller
from scalar.engine.codec import encode
from scalar.engine.queries import block_view, group_views, node_view, order_view
from scalar.engine.state import StoryEntry
from scalar.runtime.jobs import job_dict
from scalar.store import NewDecision, Tx

REFRESH_S = 60.0


def decision_of(entry: StoryEntry) -> NewDecision:
    return NewDecision(
        entity_id=entry.key,
        at=entry.at,
        code=entry.reason.code,
        message=entry.reason.message,
        data={
            "kind": entry.kind,
            "from": entry.from_state,
            "to": entry.to_state,
            "stimulus_id": entry.stimulus_id,
            "reason": encode(entry.reason),
        },
    )


class Projector:
    """Remembers just enough between steps (where each job was, what each group looked like) to write only
    what changed. ``reset`` after a rebuild."""

    def __init__(self, refresh_s: float = REFRESH_S) -> None:
        self.refresh_s = refresh_s
        self._job_nodes: dict[str, tuple[str, ...]] = {}
        self._groups: dict[str, dict[str, Any]] = {}
        self._refreshed_at: datetime | None = None

    def reset(self, controller: Controller) -> None:
        self._job_nodes = {j: tuple(r.placements) for j, r in controller.state.jobs.items() if r.placements}
        self._groups = {}
        self._refreshed_at = None

    def write(
        self,
        tx: Tx,
        controller: Controller,
        now: datetime,
        *,
        story_from: int,
        batch_id: int | None,
        market_changed: bool = False,
    ) -> Callable[[], None]:
        """Write the projections and decisions of the step whose story starts at ``story_from``; returns
        the function that updates the projector's memory once the transaction has committed."""
        planned = self.plan(controller, now, story_from=story_from, market_changed=market_changed)
        planned.apply(tx, batch_id)
        return planned.committed

    def plan(
        self, controller: Controller, now: datetime, *, story_from: int, market_changed: bool = False
    ) -> ProjectionPlan:
        """The rows the step whose story starts at ``story_from`` changes, computed without a transaction
        (the leader computes a step outside any write transaction and writes the plan in a short one)."""
        state = controller.state
        entries = state.story[story_from:]
        jobs: dict[str, None] = {}
        nodes: dict[str, None] = {}
        blocks: dict[str, None] = {}
        orders: dict[str, None] = {}
        groups_dirty = market_changed
        for entry in entries:
            key, kind = entry.key, entry.kind
            if kind == "job" or (kind == "action" and key in state.jobs):
                jobs[key] = None
            elif kind == "node" or (kind == "action" and key in state.nodes):
                nodes[key] = None
            elif kind == "order" or (kind == "action" and key in state.orders):
                orders[key] = None
                groups_dirty = True
            elif kind in ("action", "sale") and key in state.blocks:  # a sale moves the block's accounting
                blocks[key] = None
            else:
                groups_dirty = True
        refresh = self._refreshed_at is None or (now - self._refreshed_at).total_seconds() >= self.refresh_s
        if refresh:
            groups_dirty = True
            blocks.update((b, None) for b, rec in state.blocks.items() if rec.open)
        rows: list[tuple[str, str, str | None, dict[str, Any], str | None]] = []
        job_nodes: dict[str, tuple[str, ...]] = {}
        for job_id in jobs:
            rec = state.jobs.get(job_id)
            if rec is None or rec.state is None:
                continue
            placed = tuple(rec.placements)
            job_nodes[job_id] = placed
            nodes.update((n, None) for n in placed + self._job_nodes.get(job_id, ()))
            data = job_dict(rec)
            rows.append(("jobs", job_id, data["state"], data, placed[0] if placed else None))
        for node_id in nodes:
            node = state.nodes.get(node_id)
            if node is None:
                continue
            blocks[node.block_id] = None
            view = node_view(node)
            rows.append(("nodes", node_id, view.state.value, encode(view), view.block_id))
        for key in orders:
            order = state.orders.get(key)
            if order is None or order.status is None:
                continue
            if order.block_id is not None:
                blocks[order.block_id] = None
            oview = order_view(order)
            rows.append(("orders", key, oview.status.value, encode(oview), oview.group))
        for block_id in blocks:
            block = state.blocks.get(block_id)
            if block is None:
                continue
            bview = block_view(block, state)
            rows.append(("blocks", block_id, bview.status, encode(bview), bview.group))
        written: dict[str, dict[str, Any]] = {}
        if groups_dirty:
            for gview in group_views(state):
                data = encode(gview)
                if self._groups.get(gview.name) != data:
                    rows.append(("scale_groups", gview.name, gview.availability, data, gview.provider))
                    written[gview.name] = data
        decisions = [decision_of(e) for e in entries]

        def committed() -> None:
            for job_id, placed in job_nodes.items():
                if placed:
                    self._job_nodes[job_id] = placed
                else:
                    self._job_nodes.pop(job_id, None)
            self._groups.update(written)
            if refresh:
                self._refreshed_at = now

        return ProjectionPlan(now, rows, decisions, committed)


@dataclass(frozen=True, slots=True)
class ProjectionPlan:
    """The projection rows and decisions of one step; ``apply`` writes them, ``committed`` runs after commit."""

    at: datetime
    rows: list[tuple[str, str, str | None, dict[str, Any], str | None]]
    decisions: list[NewDecision]
    committed: Callable[[], None]

    def apply(self, tx: Tx, batch_id: int | None) -> None:
        for table, id_, state, data, parent in self.rows:
            tx.upsert_projection(table, id_, state, data, parent_id=parent, at=self.at)
        if self.decisions:
            tx.record_decisions(self.decisions, batch_id=batch_id)
