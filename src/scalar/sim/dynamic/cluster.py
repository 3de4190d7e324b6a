"""The baselines' own small cluster model: nodes bought from the market, GPUs, CPU and RAM, and the jobs on them.

It is deliberately simple and shared by every baseline so that they differ only in their decisions
(which pods go where, which node type to launch, when to give a node back). GPU sharing follows the same
rule as Scalar's packer: a job that shares (``share_gpu``) goes on a GPU no job holds alone, while the
sharing jobs' memory stays below the GPU's; a whole-GPU job needs GPUs nobody uses. A job needs one node
with enough GPUs (Kubernetes pods never span nodes; the baselines place multi-node jobs nowhere).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from scalar.domain.market import BlockGrant
from scalar.domain.offers import Offer
from scalar.sim.dynamic.workload import DynamicJob

EPS = 1e-9


@dataclass(slots=True)
class SimNode:
    node_id: str
    block_id: str
    provider: str
    model: str
    gpus: int
    vram_gb: float
    cpu: float  # 0: not published, not limiting (as the engine treats offers without CPU figures)
    ram_gb: float
    end_time: datetime
    ready: bool = False
    gone: bool = False
    idle_since: datetime | None = None
    gpu_vram_used: list[float] = field(default_factory=list)
    gpu_whole: list[bool] = field(default_factory=list)
    cpu_used: float = 0.0
    ram_used: float = 0.0
    jobs: dict[str, tuple[int, ...]] = field(default_factory=dict)
    nominated: dict[str, None] = field(default_factory=dict)  # pods waiting for this node to boot
    spot: bool = False
    price_per_hour: float = 0.0  # the node's price when bought
    owner: str | None = None  # per-pod baselines: the one pod this node was bought for
    changed_at: datetime | None = None  # last time a pod arrived or left (Karpenter's consolidateAfter)
    replaced_by: str | None = None  # Karpenter: the replacement node being launched for this one

    def __post_init__(self) -> None:
        if not self.gpu_vram_used:
            self.gpu_vram_used = [0.0] * self.gpus
            self.gpu_whole = [False] * self.gpus

    @classmethod
    def from_grant(cls, grant: BlockGrant) -> list[SimNode]:
        return [
            cls(
                node_id=node_id,
                block_id=grant.block_id,
                provider=grant.provider,
                model=(grant.gpu_model or "").upper(),
                gpus=grant.gpus_per_node,
                vram_gb=grant.vram_per_gpu_gb,
                cpu=grant.cpu_per_node,
                ram_gb=grant.ram_per_node_gb,
                end_time=grant.end_time,
                spot=grant.spot,
                price_per_hour=float(grant.price_per_gpu_hour) * grant.gpus_per_node,
            )
            for node_id in grant.node_ids
        ]

    @property
    def empty(self) -> bool:
        return not self.jobs and not self.nominated

    def free_gpus(self) -> int:
        return sum(
            1
            for used, whole in zip(self.gpu_vram_used, self.gpu_whole, strict=True)
            if not whole and used <= EPS
        )

    def fit(self, job: DynamicJob) -> tuple[int, ...] | None:
        """The GPUs ``job`` would take here (tightest shared GPU for a sharing job), or ``None``."""
        if self.model not in job.models or job.gpu_count > self.gpus:
            return None
        if self.cpu > 0 and self.cpu - self.cpu_used < job.cpu_cores - EPS:
            return None
        if self.ram_gb > 0 and self.ram_gb - self.ram_used < job.ram_gb - EPS:
            return None
        if job.share_gpu and job.vram_per_gpu_gb < self.vram_gb:
            best: tuple[float, int] | None = None
            for i, (used, whole) in enumerate(zip(self.gpu_vram_used, self.gpu_whole, strict=True)):
                left = self.vram_gb - used
                if whole or left < job.vram_per_gpu_gb - EPS:
                    continue
                if best is None or (left, i) < best:
                    best = (left, i)
            return None if best is None else (best[1],)
        free = [
            i
            for i, (used, whole) in enumerate(zip(self.gpu_vram_used, self.gpu_whole, strict=True))
            if not whole and used <= EPS
        ]
        if len(free) < job.gpu_count or self.vram_gb < job.vram_per_gpu_gb - EPS:
            return None
        return tuple(free[: job.gpu_count])

    def place(self, job: DynamicJob, gpus: tuple[int, ...]) -> None:
        for i in gpus:
            if job.share_gpu and job.vram_per_gpu_gb < self.vram_gb:
                self.gpu_vram_used[i] += job.vram_per_gpu_gb
            else:
                self.gpu_whole[i] = True
        self.cpu_used += job.cpu_cores
        self.ram_used += job.ram_gb
        self.jobs[job.job_id] = gpus
        self.nominated.pop(job.job_id, None)
        self.idle_since = None

    def remove(self, job: DynamicJob, now: datetime) -> None:
        gpus = self.jobs.pop(job.job_id, None)
        if gpus is None:
            return
        for i in gpus:
            if self.gpu_whole[i]:
                self.gpu_whole[i] = False
            else:
                self.gpu_vram_used[i] = max(0.0, self.gpu_vram_used[i] - job.vram_per_gpu_gb)
        self.cpu_used = max(0.0, self.cpu_used - job.cpu_cores)
        self.ram_used = max(0.0, self.ram_used - job.ram_gb)
        if not self.jobs and self.ready:
            self.idle_since = now

    def over_committed(self) -> bool:
        """True if any resource is used beyond what the node has (never, if the model is right)."""
        if self.cpu > 0 and self.cpu_used > self.cpu + 1e-6:
            return True
        if self.ram_gb > 0 and self.ram_used > self.ram_gb + 1e-6:
            return True
        return any(used > self.vram_gb + 1e-6 for used in self.gpu_vram_used) or any(
            whole and used > EPS for whole, used in zip(self.gpu_whole, self.gpu_vram_used, strict=True)
        )


def empty_node(offer: Offer) -> SimNode:
    """A what-if node of ``offer``'s shape (for planning launches)."""
    return SimNode(
        node_id="planned",
        block_id="planned",
        provider=offer.provider,
        model=(offer.gpu_model or "").upper(),
        gpus=int(offer.gpu_count),
        vram_gb=offer.gpu_memory_gb,
        cpu=offer.vcpu,
        ram_gb=offer.memory_gb,
        end_time=datetime.max.replace(tzinfo=UTC),
        spot=offer.spot,
        price_per_hour=float(offer.price_per_hour),
    )
