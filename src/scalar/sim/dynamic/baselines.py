"""The autoscalers Scalar is compared with, as small simulators sharing the loop, the market and the ledger.

Both buy single nodes of fixed-price offers (on-demand or spot: the orderbook is Scalar's own trick) on
contracts long enough never to end during the run (a cloud VM lives until it is terminated), start pods
on READY nodes, put pods killed by a node's end back in the queue, and give empty nodes back.

**Karpenter-style** (``karpenter``), after Karpenter's provisioner and disruption controller:

- pending pods, higher priority first (LS/Guaranteed before BE, as PriorityClasses would order them),
  then largest first (GPUs, then CPU, then memory): first-fit decreasing onto READY nodes in creation
  order, then onto nodes still booting that have room (Karpenter counts in-flight node claims);
- what is left is packed, still largest first, into new node claims: a pod joins the first claim for
  which some instance type can hold all its pods, else opens a new one; each claim launches the
  cheapest instance type that holds its pods, spot first when a spot type fits (Karpenter prefers spot
  when the NodePool allows both);
- an empty node is terminated at once (``consolidateAfter: 0s``, the default, ``WhenEmpty``).

**Ray autoscaler v2-style** (``ray-v2``), after ``ResourceDemandScheduler`` and its utilization scorer:

- pending requests in arrival order, first fit onto READY nodes, then onto booting nodes with room;
- for what is left, each candidate node type is scored by packing the remaining requests onto one empty
  node of it: ``(matching resource types, min over resources of v*u^3, mean of v*u^3)`` with ``u`` the
  used fraction of each resource (GPU, CPU, memory) and ``v`` its amount, as Ray does. The best score is
  launched, its packed requests removed, until nothing is left or nothing fits. Price plays no part
  (ties: the offer key, alphabetically);
- a node idle for ``idle_timeout_minutes`` (5, Ray's default) is terminated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from scalar.domain.market import CapacityRequest, NodeEvent, NodeState, OrderState
from scalar.domain.offers import SFCOMPUTE, Offer
from scalar.domain.tier import Tier
from scalar.providers.base import ProviderError
from scalar.sim.dynamic.cluster import SimNode, empty_node
from scalar.sim.dynamic.market import MarketSession
from scalar.sim.dynamic.workload import DynamicJob

KARPENTER = "karpenter"
RAY_V2 = "ray-v2"
KARPENTER_EMPTY_AFTER_S = 0.0
RAY_IDLE_TIMEOUT_S = 300.0
UNAVAILABLE_S = 180.0  # an offer refused for capacity is skipped this long (Karpenter's ICE cache: 3 min)
LONG_CONTRACT_S = 400 * 86_400  # a VM bought by a baseline lives until it is terminated


def _size_key(job: DynamicJob) -> tuple[float, float, float]:
    return (-job.gpus, -job.cpu_cores, -job.ram_gb)


class BaselineDriver:
    """Shared mechanics; subclasses choose placement order, launches and scale-down."""

    name = "baseline"
    empty_after_s = 0.0

    def __init__(self, session: MarketSession, horizon_s: float) -> None:
        self.session = session
        self.contract_s = max(3600, int(horizon_s) + 30 * 86_400)
        self.nodes: dict[str, SimNode] = {}
        self.pending: dict[str, DynamicJob] = {}
        self.running: dict[str, str] = {}  # job id -> node id
        self.jobs: dict[str, DynamicJob] = {}
        self.refused: set[str] = set()
        self.unavailable: dict[str, datetime] = {}
        self._keys = 0
        self.launches = 0

    # -- the loop's interface ---------------------------------------------------------------------------
    def step(self, now: datetime, arrivals: list[DynamicJob], events: list[NodeEvent]) -> None:
        for e in events:
            self._event(e, now)
        for job in arrivals:
            self.jobs[job.job_id] = job
            if not any(o.gpu_count >= job.gpu_count and empty_node(o).fit(job) for o in self._offers(now)):
                self.refused.add(job.job_id)  # no node type can ever hold it
                continue
            self.pending[job.job_id] = job
        if self.pending:
            self._schedule(now)
        if self.pending:
            self._provision(now)
        self._scale_down(now)

    def wake(self, now: datetime, tick_s: float) -> datetime | None:
        """A tick while pods wait; else when the first empty node is due to be given back."""
        if self.pending:
            return now + timedelta(seconds=tick_s)
        due = [
            n.idle_since + timedelta(seconds=self.empty_after_s)
            for n in self._live()
            if n.ready and n.empty and n.idle_since is not None
        ]
        later = [t for t in due if t > now]
        return min(later) if later else (now + timedelta(seconds=tick_s) if due else None)

    def given_up(self) -> set[str]:
        return self.refused

    # -- events -----------------------------------------------------------------------------------------
    def _event(self, e: NodeEvent, now: datetime) -> None:
        node = self.nodes.get(e.node_id)
        if node is None:
            return
        if e.job_id is not None:
            job = self.jobs.get(e.job_id)
            if job is not None and self.running.get(e.job_id) == node.node_id:
                node.remove(job, e.at)
                del self.running[e.job_id]
                if not e.job_succeeded:
                    self.pending[job.job_id] = job  # killed with its node: it runs again
        if e.state is NodeState.READY and not node.gone:
            node.ready = True
            if not node.jobs:
                node.idle_since = e.at
        elif e.state in (NodeState.FAILED, NodeState.TERMINATED):
            node.gone = True
            node.ready = False
            for job_id in list(node.jobs):
                job = self.jobs[job_id]
                node.remove(job, e.at)
                self.running.pop(job_id, None)
                self.pending[job_id] = job
            node.nominated.clear()

    # -- placing ----------------------------------------------------------------------------------------
    def order(self, jobs: Sequence[DynamicJob]) -> list[DynamicJob]:
        return list(jobs)

    def _live(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if not n.gone]

    def _schedule(self, now: datetime) -> None:
        ready = [n for n in self._live() if n.ready]
        for job in self.order(list(self.pending.values())):
            for node in ready:
                if (
                    job.job_id in node.nominated
                    or not node.nominated
                    or self._room_beyond_nominated(node, job)
                ):
                    if (node.end_time - now).total_seconds() < job.duration_s:
                        continue
                    gpus = node.fit(job)
                    if gpus is None:
                        continue
                    for other in self._live():
                        other.nominated.pop(job.job_id, None)
                    node.place(job, gpus)
                    self.session.start_work(
                        node.node_id, job.job_id, max(1, math.ceil(job.duration_s)), now, gpus
                    )
                    self.running[job.job_id] = node.node_id
                    del self.pending[job.job_id]
                    break

    def _room_beyond_nominated(self, node: SimNode, job: DynamicJob) -> bool:
        """Whether ``node`` still holds ``job`` after the pods nominated to it are placed (what-if)."""
        trial = _copy(node)
        for job_id in node.nominated:
            other = self.pending.get(job_id)
            if other is None:
                continue
            gpus = trial.fit(other)
            if gpus is not None:
                trial.place(other, gpus)
        return trial.fit(job) is not None

    def _nominate_in_flight(self, jobs: list[DynamicJob]) -> list[DynamicJob]:
        """Pods that fit on a booting node's remaining room are nominated to it; returns the rest."""
        booting = [n for n in self._live() if not n.ready]
        if not booting:
            return [j for j in jobs if not any(j.job_id in n.nominated for n in self._live())]
        trials = {n.node_id: _with_nominated(n, self.pending) for n in booting}
        left: list[DynamicJob] = []
        for job in jobs:
            if any(job.job_id in n.nominated for n in self._live()):
                continue
            for node in booting:
                trial = trials[node.node_id]
                gpus = trial.fit(job)
                if gpus is not None:
                    trial.place(job, gpus)
                    node.nominated[job.job_id] = None
                    break
            else:
                left.append(job)
        return left

    # -- buying -----------------------------------------------------------------------------------------
    def _offers(self, now: datetime) -> list[Offer]:
        return [o for o in self.session.offers(now) if o.provider != SFCOMPUTE and o.gpu_count >= 1]

    def _candidates(self, now: datetime) -> list[Offer]:
        """One offer per shape (the cheapest region), minus shapes recently out of capacity."""
        best: dict[tuple[str, str, bool], Offer] = {}
        for o in self._offers(now):
            until = self.unavailable.get(o.key)
            if until is not None and now < until:
                continue
            shape = (o.provider, o.instance_type, o.spot)
            seen = best.get(shape)
            if seen is None or (o.price_per_hour, o.key) < (seen.price_per_hour, seen.key):
                best[shape] = o
        return sorted(best.values(), key=lambda o: o.key)

    def _launch(self, offer: Offer, jobs: list[DynamicJob], now: datetime) -> bool:
        self._keys += 1
        key = f"{self.name}-{self._keys:06d}"
        tier = jobs[0].tier if jobs else Tier.FAST
        request = CapacityRequest(
            provider=offer.provider,
            instance_type=offer.instance_type,
            node_count=1,
            duration_s=self.contract_s,
            limit_price_per_gpu_hour=None,
            tier=tier,
            gpu_model=offer.gpu_model,
            gpus_per_node=int(offer.gpu_count),
            spot=offer.spot,
            region=offer.region,
        )
        try:
            order = self.session.buy(request, key, now)
        except ProviderError:
            order = None
        if order is None or order.state is not OrderState.FILLED or order.block is None:
            self.unavailable[offer.key] = now + timedelta(seconds=UNAVAILABLE_S)
            return False
        self.launches += 1
        for node in SimNode.from_grant(order.block):
            self.nodes[node.node_id] = node
            trial = _copy(node)
            for job in jobs:
                gpus = trial.fit(job)
                if gpus is not None:
                    trial.place(job, gpus)
                    node.nominated[job.job_id] = None
        return True

    def _provision(self, now: datetime) -> None:  # pragma: no cover - each baseline has its own
        raise NotImplementedError

    # -- giving back --------------------------------------------------------------------------------------
    def _scale_down(self, now: datetime) -> None:
        for node in self._live():
            if not node.ready or not node.empty or node.idle_since is None:
                continue
            if (now - node.idle_since).total_seconds() >= self.empty_after_s:
                self.session.release(node.provider, node.block_id, now)
                node.gone = True
                node.ready = False


def _copy(node: SimNode) -> SimNode:
    return SimNode(
        node_id=node.node_id,
        block_id=node.block_id,
        provider=node.provider,
        model=node.model,
        gpus=node.gpus,
        vram_gb=node.vram_gb,
        cpu=node.cpu,
        ram_gb=node.ram_gb,
        end_time=node.end_time,
        ready=node.ready,
        gpu_vram_used=list(node.gpu_vram_used),
        gpu_whole=list(node.gpu_whole),
        cpu_used=node.cpu_used,
        ram_used=node.ram_used,
        jobs=dict(node.jobs),
    )


def _with_nominated(node: SimNode, pending: dict[str, DynamicJob]) -> SimNode:
    trial = _copy(node)
    for job_id in node.nominated:
        job = pending.get(job_id)
        if job is not None:
            gpus = trial.fit(job)
            if gpus is not None:
                trial.place(job, gpus)
    return trial


class KarpenterDriver(BaselineDriver):
    name = KARPENTER
    empty_after_s = KARPENTER_EMPTY_AFTER_S

    def order(self, jobs: Sequence[DynamicJob]) -> list[DynamicJob]:
        return sorted(jobs, key=lambda j: (j.tier is not Tier.FAST, *_size_key(j), j.arrival_s, j.job_id))

    def _provision(self, now: datetime) -> None:
        left = self._nominate_in_flight(self.order(list(self.pending.values())))
        if not left:
            return
        offers = self._candidates(now)
        claims: list[tuple[list[DynamicJob], list[Offer]]] = []
        for job in left:
            for members, options in claims:
                fitting = [o for o in options if _holds(o, [*members, job])]
                if fitting:
                    members.append(job)
                    options[:] = fitting
                    break
            else:
                options = [o for o in offers if _holds(o, [job])]
                if options:
                    claims.append(([job], options))
        for members, options in claims:
            spot = [o for o in options if o.spot]
            pool = spot or options
            for offer in sorted(pool, key=lambda o: (o.price_per_hour, o.key)):
                if self._launch(offer, members, now):
                    break


class RayV2Driver(BaselineDriver):
    name = RAY_V2
    empty_after_s = RAY_IDLE_TIMEOUT_S

    def order(self, jobs: Sequence[DynamicJob]) -> list[DynamicJob]:
        return sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))

    def _provision(self, now: datetime) -> None:
        left = self._nominate_in_flight(self.order(list(self.pending.values())))
        offers = self._candidates(now)
        while left:
            best: tuple[tuple[float, ...], Offer, list[DynamicJob]] | None = None
            for offer in offers:  # sorted by key: among equal scores the first key wins
                packed, score = _ray_score(offer, left)
                if score is not None and (best is None or score > best[0]):
                    best = (score, offer, packed)
            if best is None:
                return
            _, offer, packed = best
            if not self._launch(offer, packed, now):
                offers = [o for o in offers if o.key != offer.key]
                continue
            taken = {j.job_id for j in packed}
            left = [j for j in left if j.job_id not in taken]


def _holds(offer: Offer, jobs: list[DynamicJob]) -> bool:
    trial = empty_node(offer)
    for job in jobs:
        gpus = trial.fit(job)
        if gpus is None:
            return False
        trial.place(job, gpus)
    return True


def _ray_score(offer: Offer, jobs: list[DynamicJob]) -> tuple[list[DynamicJob], tuple[float, ...] | None]:
    """Pack ``jobs`` (in order, first fit) onto an empty node of ``offer``; Ray's utilization score."""
    trial = empty_node(offer)
    packed: list[DynamicJob] = []
    for job in jobs:
        gpus = trial.fit(job)
        if gpus is not None:
            trial.place(job, gpus)
            packed.append(job)
    if not packed:
        return [], None
    used_gpus = sum(1 for w, u in zip(trial.gpu_whole, trial.gpu_vram_used, strict=True) if w or u > 0)
    resources = [(float(trial.gpus), float(used_gpus))]
    if trial.cpu > 0:
        resources.append((trial.cpu, trial.cpu_used))
    if trial.ram_gb > 0:
        resources.append((trial.ram_gb, trial.ram_used))
    asked = {"gpu"} | ({"cpu"} if any(j.cpu_cores > 0 for j in packed) else set())
    asked |= {"ram"} if any(j.ram_gb > 0 for j in packed) else set()
    names = ["gpu", "cpu" if trial.cpu > 0 else "", "ram" if trial.ram_gb > 0 else ""]
    matching = sum(1 for n in names if n and n in asked)
    utils = [v * (used / v) ** 3 for v, used in resources if v >= 1]
    if not utils:
        return packed, None
    return packed, (float(matching), min(utils), sum(utils) / len(utils))
