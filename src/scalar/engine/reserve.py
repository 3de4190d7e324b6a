"""The restart reserve: free nodes kept in a spot group whose nodes host FAST services.

A FAST service interrupted on a spot node is down until it runs again: a new node's boot (a pod 25-180 s,
a VM 150-600 s) when nothing free can take it. Over a day-long service's run a spot node is interrupted
several times, and the FAST tier gives it ten minutes of waiting in all, so without spare capacity its
restarts go where they are back soonest (``cost_band``), often on-demand nodes for the rest of its day.

A group of spot nodes hosting ``n`` FAST services keeps ``n // fast_spare_per_services`` of its slices free
(READY and empty, or bought and on their way): an interrupted service restarts on one in the step that
learns of the interruption, and the group buys a new spare for the next one. The spare is what Kubernetes users build with
overprovisioning (low-priority placeholder pods that keep a node of headroom); here it is sized to the
services it protects and costs one slice per ``fast_spare_per_services`` of them. The routing step sees
the reserve as a floor under the group's ``min_slices`` (the slices that hold work plus the spares
wanted), and ``release_idle`` keeps a free slice while releasing it would leave fewer than wanted.

Only FAST services with at least :data:`MIN_REMAINING_S` of expected run left count: a short one is
unlikely to be interrupted before it ends. Gangs' slices are not spares (a gang's nodes come together).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scalar.domain.market import NodeState
from scalar.domain.reasons import Reason
from scalar.domain.tier import Tier
from scalar.engine.lifecycle import IN_FLIGHT_STATES
from scalar.engine.state import ClusterState

MIN_REMAINING_S = 3600.0  # a FAST service counts while at least an hour of its expected run is left
RESTART_RESERVE_CODE = "restart_reserve"


@dataclass(frozen=True, slots=True)
class Reserve:
    """One spot group's reserve: ``services`` FAST services on its nodes, ``wanted`` free slices to keep,
    ``free`` free slices now, out of ``live`` live slices (gangs' slices excluded)."""

    group: str
    services: int
    wanted: int
    free: int
    live: int

    @property
    def floor(self) -> int:
        """The slices the group keeps: those holding work, plus the spares wanted."""
        return max(0, self.live - self.free + self.wanted)

    @property
    def deficit(self) -> int:
        return max(0, self.wanted - self.free)

    def reason(self, per: int) -> Reason:
        return Reason(
            RESTART_RESERVE_CODE,
            f"{self.group} hosts {self.services} FAST service{'s' if self.services != 1 else ''} on spot "
            f"nodes: it keeps {self.wanted} slice{'s' if self.wanted != 1 else ''} free (one per {per} "
            f"services; {self.free} free now) so that a service interrupted there restarts at once, not "
            f"after a new node's boot",
            "slices",
            self.wanted,
            self.free,
        )


def fast_services(state: ClusterState, now: datetime) -> dict[str, int]:
    """Per spot group, the FAST services on its live nodes with at least :data:`MIN_REMAINING_S` left."""
    services: dict[str, int] = {}
    for node in state.nodes.values():
        if not node.live or not node.jobs:
            continue
        rec = state.groups.get(node.group)
        if rec is None or not rec.spot:
            continue
        for job_id in node.jobs:
            if _long_fast_service(state, job_id, now):
                services[node.group] = services.get(node.group, 0) + 1
    return services


def spared_groups(state: ClusterState, per: int, now: datetime) -> set[str]:
    """The spot groups that keep a reserve with one more FAST service on them: where a FAST job routed now
    restarts on a spare after each interruption (the cost band's view)."""
    if per <= 0:
        return set()
    services = fast_services(state, now)
    return {g for g, rec in state.groups.items() if rec.spot and (services.get(g, 0) + 1) // per > 0}


def restart_reserves(state: ClusterState, per: int, now: datetime) -> dict[str, Reserve]:
    """Every spot group's reserve with at least one slice wanted, at one free slice per ``per`` FAST services
    (``ControllerConfig.fast_spare_per_services``; 0: none)."""
    if per <= 0:
        return {}
    services = fast_services(state, now)
    wanted = {g: n // per for g, n in services.items() if n // per > 0}
    if not wanted:
        return {}
    live: dict[str, int] = {}
    candidates: dict[tuple[str, str | None], int] = {}  # (group, order key) -> free slices
    for sid in state.live_slice_ids:
        sl = state.slices[sid]
        if sl.group not in wanted or sl.gang_size is not None:
            continue
        live[sl.group] = live.get(sl.group, 0) + 1
        if _free(state, sid):
            key = (sl.group, sl.order_key)
            candidates[key] = candidates.get(key, 0) + 1
    free: dict[str, int] = {}
    for (group, order_key), n in candidates.items():
        order = state.orders.get(order_key) if order_key else None
        held = 0 if order is None else sum(1 for j in order.serves if j in state.pending_ids)
        free[group] = free.get(group, 0) + max(0, n - held)  # a slice held for a pending job is not spare
    return {
        g: Reserve(g, services[g], want, free.get(g, 0), live.get(g, 0)) for g, want in sorted(wanted.items())
    }


def _long_fast_service(state: ClusterState, job_id: str, now: datetime) -> bool:
    rec = state.jobs.get(job_id)
    job = rec.job if rec is not None else None
    if rec is None or job is None or job.tier is not Tier.FAST:
        return False
    ran_s = (
        0.0 if rec.started_at is None else (now - rec.started_at).total_seconds()
    )  # placed, not yet started
    left = job.expected_duration_sec - ran_s
    return left >= MIN_REMAINING_S


def _free(state: ClusterState, slice_id: str) -> bool:
    """A slice no work is on: READY with every node READY and empty, or still on its way."""
    sl = state.slices[slice_id]
    if sl.state in IN_FLIGHT_STATES:
        return True
    if sl.state is not NodeState.READY or not sl.node_ids:
        return False
    for node_id in sl.node_ids:
        node = state.nodes.get(node_id)
        if node is None or node.state is not NodeState.READY or node.jobs or node.draining:
            return False
    return True
