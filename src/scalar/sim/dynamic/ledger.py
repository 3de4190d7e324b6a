"""What every policy pays, the way the seller bills it (one ledger, the same rules for every policy).

- A fixed-price node (on-demand or spot) is billed per second from its contract's start until it stops:
  released, preempted, failed, its contract ended, or the run ended (the simulation stops the clock when
  the last job finishes; a node still held then is counted as released at that moment).
- An SFCompute-style block (``sfcompute``) is billed for its whole window, as the seller bills it, whether
  it is released early or not. The hours it sells back into the book on release are not credited: the
  simulated market has no other buyer, so that money never comes back (this only ever counts against
  whoever buys there).

Paid GPU-hours follow the same rules; delivered GPU-hours are the work that completed (a sharing pod
counts its fraction of a GPU); idle GPU-hours are paid minus delivered: boots, empty nodes, fragments
nobody could use and work lost to preemption.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from scalar.domain.market import BlockGrant, NodeEvent, NodeState
from scalar.domain.offers import SFCOMPUTE
from scalar.domain.timefmt import exact_seconds

_HOUR = Decimal(3600)


def seconds(a: datetime, b: datetime) -> Decimal:
    return exact_seconds(b - a)


@dataclass(slots=True)
class BlockBill:
    grant: BlockGrant
    bought_at: datetime
    whole_window: bool
    stopped: dict[str, datetime] = field(default_factory=dict)  # node id -> when it stopped
    released_at: datetime | None = None

    @property
    def gpus_per_node(self) -> int:
        return self.grant.gpus_per_node

    def node_end(self, node_id: str, until: datetime) -> datetime:
        end = min(self.grant.end_time, until)
        stop = self.stopped.get(node_id)
        if stop is not None:
            end = min(end, stop)
        if self.released_at is not None:
            end = min(end, self.released_at)
        return max(end, self.grant.start_time)

    def paid_gpu_s(self, until: datetime) -> Decimal:
        g = self.grant
        if self.whole_window:
            return seconds(g.start_time, g.end_time) * g.gpus_per_node * len(g.node_ids)
        return sum(
            (seconds(g.start_time, self.node_end(n, until)) * g.gpus_per_node for n in g.node_ids),
            Decimal(0),
        )

    def cost(self, until: datetime) -> Decimal:
        return self.grant.price_per_gpu_hour * self.paid_gpu_s(until) / _HOUR


class Ledger:
    """Every block bought in one run, and when each of its nodes stopped."""

    def __init__(self) -> None:
        self.blocks: dict[str, BlockBill] = {}
        self.node_block: dict[str, str] = {}

    def bought(self, grant: BlockGrant, at: datetime) -> None:
        if grant.block_id in self.blocks:
            return
        self.blocks[grant.block_id] = BlockBill(grant, at, grant.provider == SFCOMPUTE)
        for node_id in grant.node_ids:
            self.node_block[node_id] = grant.block_id

    def released(self, block_id: str, at: datetime) -> None:
        bill = self.blocks.get(block_id)
        if bill is not None and bill.released_at is None:
            bill.released_at = at

    def observe(self, events: list[NodeEvent]) -> None:
        for e in events:
            if e.state in (NodeState.FAILED, NodeState.TERMINATED):
                bill = self.blocks.get(self.node_block.get(e.node_id, ""))
                if bill is not None:
                    bill.stopped.setdefault(e.node_id, e.at)

    def provider_of(self, node_id: str) -> str:
        return self.blocks[self.node_block[node_id]].grant.provider

    def cost(self, until: datetime) -> Decimal:
        return sum((b.cost(until) for b in self.blocks.values()), Decimal(0))

    def paid_gpu_hours(self, until: datetime) -> Decimal:
        return sum((b.paid_gpu_s(until) for b in self.blocks.values()), Decimal(0)) / _HOUR

    def by_kind(self, until: datetime) -> dict[str, dict[str, Decimal]]:
        """Cost and paid GPU-hours per ``provider:model[:spot]``, for the report."""
        out: dict[str, dict[str, Decimal]] = {}
        for b in self.blocks.values():
            g = b.grant
            key = f"{g.provider}:{g.gpu_model or '?'}{':spot' if g.spot else ''}"
            row = out.setdefault(key, {"cost": Decimal(0), "gpu_hours": Decimal(0), "nodes": Decimal(0)})
            row["cost"] += b.cost(until)
            row["gpu_hours"] += b.paid_gpu_s(until) / _HOUR
            row["nodes"] += len(g.node_ids)
        return dict(sorted(out.items()))


class Occupancy:
    """Which GPUs hold a job, over time: busy GPU-seconds are those with at least one job on them."""

    def __init__(self) -> None:
        self.holders: dict[tuple[str, int], int] = {}
        self.since: dict[tuple[str, int], datetime] = {}
        self.placed: dict[tuple[str, str], tuple[int, ...]] = {}
        self.busy_s = Decimal(0)

    def started(self, node_id: str, job_id: str, gpus: Sequence[int], at: datetime) -> None:
        key = (node_id, job_id)
        if key in self.placed:
            return
        self.placed[key] = tuple(gpus)
        for g in gpus:
            slot = (node_id, g)
            n = self.holders.get(slot, 0)
            if n == 0:
                self.since[slot] = at
            self.holders[slot] = n + 1

    def ended(self, node_id: str, job_id: str, at: datetime) -> None:
        gpus = self.placed.pop((node_id, job_id), None)
        if gpus is None:
            return
        for g in gpus:
            slot = (node_id, g)
            n = self.holders.get(slot, 0) - 1
            if n <= 0:
                self.holders.pop(slot, None)
                self.busy_s += seconds(self.since.pop(slot), at)
            else:
                self.holders[slot] = n

    def node_stopped(self, node_id: str, at: datetime) -> None:
        for node, job in [k for k in self.placed if k[0] == node_id]:
            self.ended(node, job, at)

    def busy_gpu_hours(self, until: datetime) -> Decimal:
        """GPU-hours with a job on them (GPUs still busy at ``until`` count up to it)."""
        still = sum((seconds(t, until) for t in self.since.values() if t < until), Decimal(0))
        return (self.busy_s + still) / _HOUR
