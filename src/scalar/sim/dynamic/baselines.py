"""The autoscalers Scalar is compared with, run as their users run them, sharing the loop, market and ledger.

Every baseline buys single nodes of fixed-price offers (the orderbook is Scalar's own trick) on contracts
that outlast the run (a cloud VM or pod lives until it is terminated), starts pods on READY nodes, puts
pods killed with their node back in the queue (they restart from their last checkpoint, see
:mod:`scalar.sim.dynamic.progress`), and ranks offers by dollars per *work unit* (a GPU-hour on the
reference model; :func:`scalar.sim.dynamic.speed.price_per_work_hour`), as Scalar is told to.

Each configuration is written next to the published behaviour it models (:data:`PER_POD`,
:data:`KARPENTER_CONFIG`, :data:`RAY_CONFIG`); docs/simulator-dynamic.md, "Baselines", says more.

- ``per-pod`` / ``per-pod-fast``: one node per pod, the cheapest offer that holds it, bought when the pod
  arrives and released when it ends: the "separate instance per task" baseline of Eva (EuroSys'25) and
  what SkyPilot does for a task (``sky launch`` picks the cheapest resources that satisfy the request). The
  ``-fast`` variant keeps FAST pods on the pod sellers (Prime Intellect, RunPod: boot in at most 180 s).
- ``karpenter``: Karpenter v1's provisioner and disruption controller with the defaults of a v1 NodePool.
- ``ray-v2``: Ray's autoscaler v2 with an operator's cluster config.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from scalar.domain.market import CapacityRequest, NodeEvent, NodeState, OrderState
from scalar.domain.offers import AWS, AZURE, GCP, PRIME, RUNPOD, SFCOMPUTE, Offer
from scalar.domain.tier import Tier
from scalar.providers.base import ProviderError
from scalar.sim.dynamic.cluster import SimNode, empty_node
from scalar.sim.dynamic.market import MarketSession, killed
from scalar.sim.dynamic.speed import price_per_work_hour
from scalar.sim.dynamic.workload import DynamicJob

PER_POD = "per-pod"
PER_POD_FAST = "per-pod-fast"
KARPENTER = "karpenter"
RAY_V2 = "ray-v2"
UNAVAILABLE_S = 180.0  # an offer refused for capacity is skipped this long (Karpenter's ICE cache: 3 min)
FIXED_PRICE = (PRIME, RUNPOD, AWS, AZURE, GCP)
POD_SELLERS = (PRIME, RUNPOD)  # container pods: boot in 25-180 s in the built-in market
CLOUDS = (AWS, AZURE, GCP)  # VMs: 150-600 s


@dataclass(frozen=True, slots=True)
class PerPodConfig:
    """One node per pod (Eva's per-task baseline; SkyPilot's ``sky launch`` per task).

    ``providers``: every fixed-price seller (spot or on-demand, whichever is cheapest per work unit);
    ``fast_providers``: where FAST pods may go (``None``: anywhere; ``per-pod-fast``: the pod sellers).
    """

    providers: tuple[str, ...] = FIXED_PRICE
    fast_providers: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class KarpenterConfig:
    """A Karpenter v1 NodePool as its docs give the defaults (karpenter.sh/docs/concepts/nodepools and
    disruption, v1.0):

    - ``consolidationPolicy: WhenEmptyOrUnderutilized`` (v1's default): a node is a candidate when it is
      empty or when its pods fit elsewhere or on a cheaper replacement;
    - ``consolidateAfter: 0s``: a node is a candidate as soon as no pod has arrived or left for that long;
    - ``budgets: nodes: 10%`` (the default disruption budget): at most 10% of the nodes (at least one) are
      disrupted at once;
    - spot nodes are only *deleted* by consolidation, never replaced by a cheaper spot node: spot-to-spot
      consolidation is behind the ``SpotToSpotConsolidation`` feature gate, off by default; an on-demand
      node may be replaced by a cheaper node, spot included, when the NodePool allows spot;
    - ``karpenter.sh/capacity-type: [spot, on-demand]``: spot preferred when a spot type fits (Karpenter
      launches the cheapest spot type and falls back to on-demand);
    - a moved pod restarts (Kubernetes evicts it) and loses its progress unless it checkpoints; no pod
      carries ``karpenter.sh/do-not-disrupt``.

    ``providers``: one NodePool over the clouds that have a Karpenter provider (AWS, GA; Azure, AKS node
    auto-provisioning; GCP, alpha). This is generous: a real cluster is in one cloud. Pod sellers (Prime
    Intellect, RunPod) sell containers, not nodes a Kubernetes cluster can join.
    """

    providers: tuple[str, ...] = CLOUDS
    consolidate_after_s: float = 0.0
    budget_fraction: float = 0.10
    spot_to_spot: bool = False


@dataclass(frozen=True, slots=True)
class RayConfig:
    """An operator's Ray cluster config for autoscaler v2 (docs.ray.io, "Cluster YAML Configuration
    Options" and ``python/ray/autoscaler/v2/scheduler.py``):

    - ``available_node_types``: for each GPU model and node size (GPUs per node), the cheapest spot and the
      cheapest on-demand type per work unit at the window's start, and the size's largest host (most
      vCPUs) so that CPU-heavy pods have a home; listed cheapest first (Ray breaks score ties in list
      order);
    - ``max_workers: 64`` per node type (the market's capacity per location);
    - ``upscaling_speed: 1.0`` (Ray's default): at most ``max(5, 1.0 x running nodes)`` nodes pending;
    - ``idle_timeout_minutes: 5`` (Ray's default);
    - the scheduler's utilisation scorer picks the node type for the pending requests (GPU, CPU, memory);
      price enters only through the list's order.

    ``providers``: the clouds Ray's cluster launcher supports (AWS, Azure, GCP).
    """

    providers: tuple[str, ...] = CLOUDS
    max_workers_per_type: int = 64
    upscaling_speed: float = 1.0
    idle_timeout_s: float = 300.0
    min_pending: int = 5


PER_POD_CONFIG = PerPodConfig()
PER_POD_FAST_CONFIG = PerPodConfig(fast_providers=POD_SELLERS)
KARPENTER_CONFIG = KarpenterConfig()
RAY_CONFIG = RayConfig()


def _size_key(job: DynamicJob) -> tuple[float, float, float]:
    return (-job.gpus, -job.cpu_cores, -job.ram_gb)


def _rank(offer: Offer, jobs: Sequence[DynamicJob]) -> tuple[float, str]:
    """Dollars per work unit of the whole node for these jobs (FAST: per GPU-hour), then the key."""
    return (price_per_work_hour(offer, [j.tier for j in jobs]) * offer.gpu_count, offer.key)


class BaselineDriver:
    """Shared mechanics; subclasses choose placement order, launches and scale-down."""

    name = "baseline"
    empty_after_s = 0.0
    providers: tuple[str, ...] = FIXED_PRICE

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
        self.moves = 0
        self._dirty = True

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
        self._after(now)
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
        due.extend(self._timers(now))
        later = [t for t in due if t > now]
        return min(later) if later else (now + timedelta(seconds=tick_s) if due else None)

    def given_up(self) -> set[str]:
        return self.refused

    def _timers(self, now: datetime) -> list[datetime]:
        return []

    def _after(self, now: datetime) -> None:
        """What a baseline does once pods are placed and nodes asked for (Karpenter: consolidation)."""

    # -- events -----------------------------------------------------------------------------------------
    def _event(self, e: NodeEvent, now: datetime) -> None:
        node = self.nodes.get(e.node_id)
        if node is None:
            return
        if e.job_id is not None:
            job = self.jobs.get(e.job_id)
            if job is not None and self.running.get(e.job_id) == node.node_id:
                node.remove(job, e.at)
                node.changed_at = e.at
                del self.running[e.job_id]
                if killed(e):
                    self.pending[job.job_id] = job  # killed with its node: it runs again
        if e.state is NodeState.READY and not node.gone:
            node.ready = True
            node.changed_at = e.at
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

    def _accepts(self, node: SimNode, job: DynamicJob) -> bool:
        return node.replaced_by is None and (node.owner is None or node.owner == job.job_id)

    def _schedule(self, now: datetime) -> None:
        ready = [n for n in self._live() if n.ready]
        for job in self.order(list(self.pending.values())):
            for node in ready:
                if not self._accepts(node, job):
                    continue
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
                    self._start(node, job, gpus, now)
                    del self.pending[job.job_id]
                    break

    def _start(self, node: SimNode, job: DynamicJob, gpus: tuple[int, ...], now: datetime) -> None:
        node.place(job, gpus)
        node.changed_at = now
        self._dirty = True
        self.session.start_work(node.node_id, job.job_id, max(1, math.ceil(job.expected_s)), now, gpus)
        self.running[job.job_id] = node.node_id

    def _room_beyond_nominated(self, node: SimNode, job: DynamicJob) -> bool:
        """Whether ``node`` still holds ``job`` after the pods nominated to it are placed (what-if)."""
        return _with_nominated(node, self.pending).fit(job) is not None

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
                if node.owner is not None:
                    continue
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
    def _offers(self, now: datetime, job: DynamicJob | None = None) -> list[Offer]:
        providers = self._providers_for(job)
        return [
            o
            for o in self.session.offers(now)
            if o.provider != SFCOMPUTE and o.provider in providers and o.gpu_count >= 1
        ]

    def _providers_for(self, job: DynamicJob | None) -> tuple[str, ...]:
        return self.providers

    def _candidates(self, now: datetime, job: DynamicJob | None = None) -> list[Offer]:
        """One offer per shape (the cheapest region), minus shapes recently out of capacity."""
        best: dict[tuple[str, str, bool], Offer] = {}
        for o in self._offers(now, job):
            until = self.unavailable.get(o.key)
            if until is not None and now < until:
                continue
            shape = (o.provider, o.instance_type, o.spot)
            seen = best.get(shape)
            if seen is None or (o.price_per_hour, o.key) < (seen.price_per_hour, seen.key):
                best[shape] = o
        return sorted(best.values(), key=lambda o: o.key)

    def _launch(
        self, offer: Offer, jobs: list[DynamicJob], now: datetime, owner: str | None = None
    ) -> SimNode | None:
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
            return None
        self.launches += 1
        launched: SimNode | None = None
        for node in SimNode.from_grant(order.block):
            node.owner = owner
            self.nodes[node.node_id] = node
            launched = launched or node
            trial = _copy(node)
            for job in jobs:
                gpus = trial.fit(job)
                if gpus is not None:
                    trial.place(job, gpus)
                    node.nominated[job.job_id] = None
        return launched

    def _provision(self, now: datetime) -> None:  # pragma: no cover - each baseline has its own
        raise NotImplementedError

    # -- giving back --------------------------------------------------------------------------------------
    def _release(self, node: SimNode, now: datetime) -> None:
        self.session.release(node.provider, node.block_id, now)
        node.gone = True
        node.ready = False

    def _scale_down(self, now: datetime) -> None:
        for node in self._live():
            if not node.ready or not node.empty or node.idle_since is None:
                continue
            if (now - node.idle_since).total_seconds() >= self.empty_after_s:
                self._release(node, now)


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
        spot=node.spot,
        price_per_hour=node.price_per_hour,
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


def _holds(offer: Offer, jobs: list[DynamicJob]) -> bool:
    trial = empty_node(offer)
    for job in jobs:
        gpus = trial.fit(job)
        if gpus is None:
            return False
        trial.place(job, gpus)
    return True


# ---------------------------------------------------------------------------------------------- per pod


class PerPodDriver(BaselineDriver):
    """One node per pod, the cheapest per work unit that holds it; released as soon as the pod ends."""

    empty_after_s = 0.0

    def __init__(
        self,
        session: MarketSession,
        horizon_s: float,
        config: PerPodConfig = PER_POD_CONFIG,
        name: str = PER_POD,
    ) -> None:
        super().__init__(session, horizon_s)
        self.config = config
        self.name = name
        self.providers = config.providers

    def order(self, jobs: Sequence[DynamicJob]) -> list[DynamicJob]:
        return sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))

    def _providers_for(self, job: DynamicJob | None) -> tuple[str, ...]:
        if job is not None and job.tier is Tier.FAST and self.config.fast_providers is not None:
            return self.config.fast_providers
        return self.config.providers

    def _provision(self, now: datetime) -> None:
        for job in self.order(list(self.pending.values())):
            if any(job.job_id in n.nominated for n in self._live()):
                continue  # its node is on the way
            options = [o for o in self._candidates(now, job) if _holds(o, [job])]
            if not options:  # the FAST sellers cannot hold it: anywhere
                options = [o for o in self._candidates(now) if _holds(o, [job])]
            for offer in sorted(options, key=lambda o: _rank(o, [job])):
                if self._launch(offer, [job], now, owner=job.job_id) is not None:
                    break


# ---------------------------------------------------------------------------------------------- Karpenter


class KarpenterDriver(BaselineDriver):
    """Karpenter v1: bin-pack pending pods into the cheapest instance types, consolidate when empty or
    underutilised (delete a node whose pods fit elsewhere; replace an on-demand node by a cheaper one)."""

    name = KARPENTER

    def __init__(
        self, session: MarketSession, horizon_s: float, config: KarpenterConfig = KARPENTER_CONFIG
    ) -> None:
        super().__init__(session, horizon_s)
        self.config = config
        self.providers = config.providers
        self.empty_after_s = config.consolidate_after_s
        self.consolidations = {"delete": 0, "replace": 0}

    def order(self, jobs: Sequence[DynamicJob]) -> list[DynamicJob]:
        return sorted(jobs, key=lambda j: (j.tier is not Tier.FAST, *_size_key(j), j.arrival_s, j.job_id))

    def step(self, now: datetime, arrivals: list[DynamicJob], events: list[NodeEvent]) -> None:
        if arrivals or events:
            self._dirty = True
        super().step(now, arrivals, events)

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
            for pool in (spot, [o for o in options if not o.spot]):
                launched = False
                for offer in sorted(pool, key=lambda o: _rank(o, members)):
                    if self._launch(offer, members, now) is not None:
                        launched = True
                        break
                if launched:
                    break

    def _timers(self, now: datetime) -> list[datetime]:
        wait = timedelta(seconds=self.config.consolidate_after_s)
        return [
            n.changed_at + wait
            for n in self._live()
            if n.ready and n.jobs and n.changed_at is not None and n.changed_at + wait > now
        ]

    # -- consolidation ------------------------------------------------------------------------------------
    def _after(self, now: datetime) -> None:
        self._finish_replacements(now)
        if self.pending or (not self._dirty and not self._timers_due(now)):
            return
        self._dirty = False
        live = [n for n in self._live() if n.ready]
        budget = max(1, math.floor(self.config.budget_fraction * len(self._live())))
        busy = sum(1 for n in live if n.replaced_by is not None)
        wait = self.config.consolidate_after_s
        candidates = [
            n
            for n in live
            if n.jobs
            and n.replaced_by is None
            and n.owner is None
            and n.changed_at is not None
            and (now - n.changed_at).total_seconds() >= wait
        ]
        # Karpenter disrupts the candidates that cost least to disrupt first (fewest pods), and among those
        # the most expensive node (the biggest saving).
        candidates.sort(key=lambda n: (len(n.jobs), -n.price_per_hour, n.node_id))
        for node in candidates:
            if busy >= budget:
                return
            if self._try_delete(node, live, now):
                busy += 1
                live = [n for n in live if not n.gone]
                continue
            if (not node.spot or self.config.spot_to_spot) and self._try_replace(node, now):
                busy += 1

    def _timers_due(self, now: datetime) -> bool:
        wait = self.config.consolidate_after_s
        return wait > 0 and any(
            n.ready and n.jobs and n.changed_at is not None and (now - n.changed_at).total_seconds() >= wait
            for n in self._live()
        )

    def _try_delete(self, node: SimNode, live: list[SimNode], now: datetime) -> bool:
        """Delete ``node`` when every pod on it fits on the other READY nodes (first fit)."""
        others = [
            n for n in live if n is not node and n.replaced_by is None and n.owner is None and not n.gone
        ]
        free = sum(o.free_gpus() for o in others)
        jobs = [self.jobs[j] for j in node.jobs]
        if free < sum(j.gpu_count for j in jobs if not j.share_gpu):
            return False
        trials: dict[str, SimNode] = {}
        plan: list[tuple[DynamicJob, SimNode, tuple[int, ...]]] = []
        for job in sorted(jobs, key=_size_key):
            for other in others:
                if (other.end_time - now).total_seconds() < job.duration_s or other.model not in job.models:
                    continue
                trial = trials.get(other.node_id)
                if trial is None:
                    trial = trials[other.node_id] = _with_nominated(other, self.pending)
                gpus = trial.fit(job)
                if gpus is not None:
                    trial.place(job, gpus)
                    plan.append((job, other, gpus))
                    break
            else:
                return False
        for job, target, gpus in plan:
            self._move(job, node, target, gpus, now)
        self._release(node, now)
        self.consolidations["delete"] += 1
        return True

    def _try_replace(self, node: SimNode, now: datetime) -> bool:
        """Launch the cheapest node that holds ``node``'s pods when it costs less; move them once it is ready."""
        jobs = [self.jobs[j] for j in node.jobs]
        options = [
            o
            for o in self._candidates(now)
            if float(o.price_per_hour) < node.price_per_hour - 1e-9
            and _holds(o, jobs)
            and (self.config.spot_to_spot or not (node.spot and o.spot))
        ]
        for offer in sorted(options, key=lambda o: (not o.spot, *_rank(o, jobs))):
            replacement = self._launch(offer, jobs, now)
            if replacement is not None:
                node.replaced_by = replacement.node_id
                self.consolidations["replace"] += 1
                return True
        return False

    def _finish_replacements(self, now: datetime) -> None:
        for node in self._live():
            if node.replaced_by is None:
                continue
            new = self.nodes.get(node.replaced_by)
            if new is None or new.gone:
                node.replaced_by = None  # the replacement failed: the node stays
                self._dirty = True
                continue
            if not new.ready:
                continue
            for job_id in list(node.jobs):
                job = self.jobs[job_id]
                gpus = new.fit(job)
                if gpus is None:  # another pod took the room meanwhile: this one stays
                    continue
                self._move(job, node, new, gpus, now)
            node.replaced_by = None
            if not node.jobs:
                self._release(node, now)
            self._dirty = True

    def _move(
        self, job: DynamicJob, source: SimNode, target: SimNode, gpus: tuple[int, ...], now: datetime
    ) -> None:
        """Evict ``job`` from ``source`` and start it again on ``target`` (it restarts: progress since its
        last checkpoint is lost)."""
        self.session.stop_work(source.node_id, job.job_id, now)
        source.remove(job, now)
        self.running.pop(job.job_id, None)
        self._start(target, job, gpus, now)
        self.moves += 1


# ---------------------------------------------------------------------------------------------- Ray v2


class RayV2Driver(BaselineDriver):
    """Ray autoscaler v2 with an operator's node types (:class:`RayConfig`)."""

    name = RAY_V2

    def __init__(self, session: MarketSession, horizon_s: float, config: RayConfig = RAY_CONFIG) -> None:
        super().__init__(session, horizon_s)
        self.config = config
        self.providers = config.providers
        self.empty_after_s = config.idle_timeout_s
        self.node_types: tuple[tuple[str, str, bool], ...] | None = None

    def order(self, jobs: Sequence[DynamicJob]) -> list[DynamicJob]:
        return sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))

    def _types(self, now: datetime) -> tuple[tuple[str, str, bool], ...]:
        """The operator's ``available_node_types``, written once from the first prices seen."""
        if self.node_types is None:
            chosen: dict[tuple[str, str, bool], Offer] = {}
            groups: dict[tuple[str, int], list[Offer]] = {}
            for o in self._offers(now):
                groups.setdefault(((o.gpu_model or "").upper(), int(o.gpu_count)), []).append(o)
            for offers in groups.values():
                picks: list[Offer] = []
                for spot in (True, False):
                    same = [o for o in offers if o.spot is spot]
                    if same:
                        picks.append(min(same, key=lambda o: _rank(o, ())))
                picks.append(max(offers, key=lambda o: (o.vcpu, o.memory_gb, o.spot, o.key)))
                for o in picks:
                    chosen[(o.provider, o.instance_type, o.spot)] = o
            listed = sorted(chosen.values(), key=lambda o: _rank(o, ()))
            self.node_types = tuple((o.provider, o.instance_type, o.spot) for o in listed)
        return self.node_types

    def _provision(self, now: datetime) -> None:
        left = self._nominate_in_flight(self.order(list(self.pending.values())))
        if not left:
            return
        types = self._types(now)
        current = {(o.provider, o.instance_type, o.spot): o for o in self._candidates(now)}
        live = self._live()
        per_type: dict[tuple[str, str, bool], int] = {}
        for n in live:
            bill = self.session.ledger.blocks.get(n.block_id)
            if bill is not None:
                key = (bill.grant.provider, bill.grant.instance_type, bill.grant.spot)
                per_type[key] = per_type.get(key, 0) + 1
        pending_nodes = sum(1 for n in live if not n.ready)
        running = sum(1 for n in live if n.ready)
        allowed = (
            max(self.config.min_pending, math.floor(self.config.upscaling_speed * running)) - pending_nodes
        )
        offers = [current[t] for t in types if t in current]
        while left and allowed > 0:
            best: tuple[tuple[float, ...], Offer, list[DynamicJob]] | None = None
            for offer in offers:  # in the config's order: among equal scores the first listed wins
                key = (offer.provider, offer.instance_type, offer.spot)
                if per_type.get(key, 0) >= self.config.max_workers_per_type:
                    continue
                packed, score = _ray_score(offer, left)
                if score is not None and (best is None or score > best[0]):
                    best = (score, offer, packed)
            if best is None:
                return
            _, offer, packed = best
            if self._launch(offer, packed, now) is None:
                offers = [o for o in offers if o.key != offer.key]
                continue
            key = (offer.provider, offer.instance_type, offer.spot)
            per_type[key] = per_type.get(key, 0) + 1
            allowed -= 1
            taken = {j.job_id for j in packed}
            left = [j for j in left if j.job_id not in taken]


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
