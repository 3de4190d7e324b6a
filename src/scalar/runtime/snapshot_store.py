"""The leader's published decision state in the database: written a step at a time, read whole.

``engine.snapshot`` splits the decision state into a small header and a part per live job. The leader
writes, in each step's transaction (``Leader.commit``):

- the header, as the ``runtime_state`` row ``controller:snapshot`` (and the market's part, when it changed,
  as ``controller:snapshot:market``);
- the parts of the jobs the step changed or made live, and deletes those of the jobs that stopped being
  live (``snapshot_parts`` table, kind ``job``, ``store/snapshot_parts.py``). Which jobs changed is read from their change
  stamps (``JobRecord.changed``) against the mark taken at the last publication, over the jobs that are or
  may again become live (PENDING, SCHEDULED, RUNNING, PREEMPTED, not yet judged) and the jobs added since;
  finished jobs are never looked at again. A job's row keeps its position in ``state.jobs`` (``ord``), so
  the reader gets the jobs in the controller's order;
- the nodes of the open blocks and live slices that changed (kind ``node``; ``NodeRecord.changed``, as
  for jobs), and deletes those no longer held;
- the jobs of the demand forecast that arrived since (kind ``arrived``, numbered in arrival order), and
  deletes those it forgot (``ClusterState.arrived_jobs`` is appended at the back and forgotten from the
  front: the new ones are those after the last one published, found by identity from the back).

A writer that has not published yet (a new leader, or after a failed transaction) writes every row afresh.
``read_published`` reads the header and the rows in one read transaction: one step's state, whole (the
rows and the header are only ever changed together, in the step's write transaction).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain, islice
from typing import Any

from scalar.engine.budget import BudgetLimit
from scalar.engine.codec import CodecError, encode
from scalar.engine.lifecycle import JobState
from scalar.engine.snapshot import LIVE_JOB_STATES, arrived_part, header, job_part, published_nodes
from scalar.engine.state import ClusterState, NodeRecord, change_mark
from scalar.store import Tx
from scalar.store.jsoncodec import dumps

SNAPSHOT_KEY = "controller:snapshot"  # runtime_state row: the header of the leader's decision state
MARKET_SNAPSHOT_KEY = "controller:snapshot:market"  # its scale groups, offers and books

JOB, NODE, ARRIVED = "job", "node", "arrived"  # the kinds of rows
COUNTS = ("job_count", "node_count", "arrived_count")  # the header's count of each kind's rows
FINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.REJECTED})


@dataclass(slots=True)
class Publication:
    """What one step writes: the header, the rows changed, the jobs no longer live (all: a full write)."""

    header: dict[str, Any]
    rows: list[tuple[str, int, str]]
    removed: list[str]
    full: bool
    mark: int
    seen: int
    nodes: list[tuple[str, int, str]] = field(default_factory=list)
    nodes_removed: list[str] = field(default_factory=list)
    node_positions: dict[str, int] = field(default_factory=dict)  # nodes added since
    node_keys: frozenset[str] = frozenset()  # the nodes published now
    arrived: list[tuple[str, int, str]] = field(default_factory=list)
    arrived_below: int = 0  # the forecast rows placed before it are forgotten
    arrived_next: int = 0
    arrived_last: object = None
    positions: dict[str, int] = field(default_factory=dict)  # jobs added since the last publication
    entries: dict[str, object] = field(default_factory=dict)  # published jobs' queue entries
    watch_drop: list[str] = field(default_factory=list)  # jobs final now: never looked at again

    def write(self, tx: Tx, at: datetime) -> None:
        tx.put_snapshot_parts(JOB, self.rows, removed=self.removed, replace=self.full)
        tx.put_snapshot_parts(NODE, self.nodes, removed=self.nodes_removed, replace=self.full)
        tx.put_snapshot_parts(ARRIVED, self.arrived, below=self.arrived_below, replace=self.full)
        tx.put_state(SNAPSHOT_KEY, self.header, at=at)


class SnapshotWriter:
    """The leader's side: ``prepare`` (outside the transaction), ``Publication.write`` (in it), then
    ``committed`` once the transaction committed, or ``reset`` when it did not."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget what was published: the next publication writes every row afresh."""
        self.mark: int | None = None
        self.seen = 0  # how many of state.jobs were looked at (jobs are only ever appended)
        self.position: dict[str, int] = {}  # watched job -> its position in state.jobs
        self.published: dict[str, object] = {}  # published job -> its queue entry then (None: not queued)
        self.node_position: dict[str, int] = {}  # every node -> its position in state.nodes
        self.nodes: frozenset[str] = frozenset()  # the nodes published
        self.arrived_next = 0  # the number the next forecast job gets
        self.arrived_last: object = None  # the last forecast job published (compared by identity)

    def prepare(self, state: ClusterState, budgets: tuple[BudgetLimit, ...]) -> Publication:
        mark = change_mark()
        full = self.mark is None
        since = self.mark or 0
        added = len(state.jobs) - (0 if full else self.seen)
        tail = list(islice(reversed(state.jobs), added))[::-1] if added else []
        base = len(state.jobs) - len(tail)
        nodes = published_nodes(state)
        out = Publication(header(state, budgets, nodes), [], [], full, mark, len(state.jobs))
        self._nodes(state, nodes, out, since)
        out.positions = {job_id: base + i for i, job_id in enumerate(tail)}
        published = {} if full else self.published
        watched = out.positions.items() if full else chain(self.position.items(), out.positions.items())
        entries = state.pending_index.entries
        jobs = state.jobs
        live = len(published)
        for job_id, position in watched:
            rec = jobs[job_id]
            if rec.state not in LIVE_JOB_STATES:
                if rec.state in FINAL:
                    out.watch_drop.append(job_id)
                if job_id in published:
                    out.removed.append(job_id)
                    live -= 1
                continue
            entry = entries.get(job_id)
            if job_id not in published:
                live += 1
            elif rec.changed <= since and published[job_id] is entry:
                continue
            out.rows.append((job_id, position, dumps(job_part(state, rec))))
            out.entries[job_id] = entry
        out.header["job_count"] = live
        self._arrived(state, out)
        return out

    def _nodes(
        self, state: ClusterState, nodes: Mapping[str, NodeRecord], out: Publication, since: int
    ) -> None:
        known = {} if out.full else self.node_position
        added = len(state.nodes) - len(known)
        tail = list(islice(reversed(state.nodes), added))[::-1] if added > 0 else []
        out.node_positions = {k: len(known) + i for i, k in enumerate(tail)}
        published = frozenset() if out.full else self.nodes
        for node_id, rec in nodes.items():
            if node_id in published and rec.changed <= since:
                continue
            position = known.get(node_id, out.node_positions.get(node_id, 0))
            out.nodes.append((node_id, position, dumps(encode(rec))))
        out.nodes_removed = [k for k in published if k not in nodes]
        out.node_keys = frozenset(nodes)
        out.header["node_count"] = len(nodes)

    def _arrived(self, state: ClusterState, out: Publication) -> None:
        queue = state.arrived_jobs
        new: list[Any] = []
        for item in reversed(queue):
            if item is self.arrived_last and not out.full:
                break
            new.append(item)
        new.reverse()
        first = 0 if out.full else self.arrived_next
        out.arrived = [(str(first + i), first + i, dumps(arrived_part(a))) for i, a in enumerate(new)]
        out.arrived_next = first + len(new)
        out.arrived_below = out.arrived_next - len(queue)
        out.arrived_last = queue[-1] if queue else None
        out.header["arrived_count"] = len(queue)

    def committed(self, pub: Publication) -> None:
        if pub.full:
            self.position = {}
            self.published = {}
        self.position.update(pub.positions)
        for job_id in pub.removed:
            del self.published[job_id]
        self.published.update(pub.entries)
        for job_id in pub.watch_drop:
            del self.position[job_id]
        self.mark = pub.mark
        self.seen = pub.seen
        if pub.full:
            self.node_position = {}
        self.node_position.update(pub.node_positions)
        self.nodes = pub.node_keys
        self.arrived_next = pub.arrived_next
        self.arrived_last = pub.arrived_last


def read_published(tx: Tx) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The decision state and its market part as ``engine.snapshot.restore`` takes them (``None``: nothing
    published yet). Call inside one read transaction. ``CodecError`` when the rows do not make a state."""
    data = tx.get_state(SNAPSHOT_KEY)
    market = tx.get_state(MARKET_SNAPSHOT_KEY)
    if data is None or market is None:
        return None
    rows = {kind: tx.snapshot_parts(kind) for kind in (JOB, NODE, ARRIVED)}
    return assembled(data, rows[JOB], rows[NODE], rows[ARRIVED]), market


def assembled(
    data: Mapping[str, Any],
    jobs: list[tuple[str, Any]],
    nodes: list[tuple[str, Any]],
    arrived: list[tuple[str, Any]],
) -> dict[str, Any]:
    """The header with its rows: ``restore``'s value. ``CodecError`` when the header counts other numbers
    of rows than were read (never, read in one transaction: a guard)."""
    if "jobs" in data:  # stored whole by an older version: ``restore`` refuses its version
        return dict(data)
    for name, rows in (("job_count", jobs), ("node_count", nodes), ("arrived_count", arrived)):
        if data.get(name) != len(rows):
            raise CodecError(name, f"the header counts {data.get(name)}, the rows hold {len(rows)}")
    return {
        **{k: v for k, v in data.items() if k not in COUNTS},
        "jobs": [[k, v] for k, v in jobs],
        "nodes": [[k, v] for k, v in nodes],
        "arrived_jobs": [v for _, v in arrived],
    }
