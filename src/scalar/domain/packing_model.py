"""Seed 001's resource model: blocks of bought capacity, their nodes, GPU slots, and the jobs packed on them.

A :class:`Block` is one contract (an SFCompute block or a Prime Intellect pod) and fixes the shape and
the end time of its nodes. A :class:`Node` carries its block, so everything the packer needs about a node
(provider, GPU model, expiry, CPU and RAM totals) is at hand without a lookup. A :class:`GpuSlot` is the
seed's ``GPUAssignment``: one GPU of a node with its VRAM and the job(s) on it.

GPU sharing: a slot held by one job through ``job_id`` belongs to that job alone (the seed's model). A slot
whose ``job_ids`` lists jobs is *shared*: every job on it opted in with ``share_gpu`` and asked for less than
the GPU's whole memory. A slot never has both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from scalar.domain.errors import InvalidSpecError
from scalar.domain.gpus import canonical_gpu_model
from scalar.domain.tier import Tier

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _require_amount(field: str, value: float) -> None:
    """A quantity must be a finite number >= 0."""
    if isinstance(value, bool) or not (math.isfinite(value) and value >= 0):
        raise InvalidSpecError(field, f"must be a finite number >= 0, got {value!r}")


def _require_count(field: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidSpecError(field, f"must be a whole number >= 0, got {value!r}")


def _require_aware(field: str, value: datetime) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidSpecError(
            field, f"{value.isoformat()} has no time zone", "give UTC times, e.g. 2025-06-01T12:00:00Z"
        )


def _require_id(field: str, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidSpecError(field, "must be a non-empty string")


_CUDA_VERSION = re.compile(r"^(\d{1,3})\.(\d{1,3})(?:\.\d{1,4})?$")
MAX_CUDA_VERSIONS = 16


def cuda_major_minor(text: str | None) -> tuple[int, int] | None:
    """``"12.4"`` or ``"12.4.1"`` -> ``(12, 4)``; ``None`` for ``None`` or anything else."""
    if not isinstance(text, str):
        return None
    match = _CUDA_VERSION.match(text.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def _require_cuda(field: str, value: str | None) -> None:
    if value is not None and cuda_major_minor(value) is None:
        raise InvalidSpecError(field, f"{value!r} is not a CUDA version", 'give MAJOR.MINOR, e.g. "12.4"')


@dataclass(frozen=True, slots=True)
class Block:
    """One contract of capacity: ``gpus_per_node`` GPUs of ``vram_per_gpu_gb`` each per node, until ``end_time``.

    ``cost_per_hour`` is USD per node-hour, exact. ``gpu_model`` is the canonical GPU name (``H100``...) or
    ``None`` when unknown; a job that restricts GPU models never lands on a block of unknown model.
    ``cuda_version`` (``"12.8"``) and ``driver_version`` are what the nodes' driver supports, ``None`` when
    unknown; a job that restricts CUDA versions *does* land on a node of unknown CUDA version (seed 004
    lists allowed versions; a host that does not say is given the benefit of the doubt).
    """

    id: str
    provider: str
    instance_type: str
    gpus_per_node: int
    vram_per_gpu_gb: float
    cpu_per_node: float
    ram_per_node_gb: float
    start_time: datetime
    end_time: datetime
    cost_per_hour: Decimal
    tier: Tier
    gpu_model: str | None = None
    cuda_version: str | None = None
    driver_version: str | None = None

    def __post_init__(self) -> None:
        _require_id("id", self.id)
        _require_cuda("cuda_version", self.cuda_version)
        if self.driver_version is not None:
            _require_id("driver_version", self.driver_version)
        _require_count("gpus_per_node", self.gpus_per_node)
        _require_amount("vram_per_gpu_gb", self.vram_per_gpu_gb)
        _require_amount("cpu_per_node", self.cpu_per_node)
        _require_amount("ram_per_node_gb", self.ram_per_node_gb)
        if not self.cost_per_hour.is_finite() or self.cost_per_hour < 0:
            raise InvalidSpecError("cost_per_hour", f"must be a finite amount >= 0, got {self.cost_per_hour}")
        _require_aware("start_time", self.start_time)
        _require_aware("end_time", self.end_time)
        if self.end_time < self.start_time:
            raise InvalidSpecError(
                "end_time",
                f"{self.end_time.isoformat()} is before start_time {self.start_time.isoformat()}",
            )

    def seconds_left(self, now: datetime) -> float:
        """Seconds from ``now`` until the block ends (negative once it has ended)."""
        return (self.end_time - now).total_seconds()

    @property
    def price_per_gpu_hour(self) -> Decimal:
        """USD per GPU-hour of the block's nodes (the node-hour cost itself for a node without GPUs)."""
        if self.gpus_per_node <= 0:
            return self.cost_per_hour
        return self.cost_per_hour / self.gpus_per_node


@dataclass(frozen=True, slots=True)
class GpuSlot:
    """One GPU of a node (the seed's ``GPUAssignment``).

    ``job_id`` is the one job that holds the GPU alone; ``job_ids`` the jobs sharing it. Empty both: free.
    ``vram_used_gb`` may be above 0 on a free GPU (memory used outside Scalar, as the seed's Node A shows).
    """

    index: int
    vram_total_gb: float
    vram_used_gb: float = 0.0
    job_id: str | None = None
    job_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _require_count("index", self.index)
        _require_amount("vram_total_gb", self.vram_total_gb)
        _require_amount("vram_used_gb", self.vram_used_gb)
        if self.vram_used_gb > self.vram_total_gb:
            raise InvalidSpecError(
                "vram_used_gb",
                f"{self.vram_used_gb:g} GB is more than vram_total_gb {self.vram_total_gb:g} GB",
            )
        if not isinstance(self.job_ids, tuple):
            object.__setattr__(self, "job_ids", tuple(self.job_ids))
        if self.job_id is not None and self.job_ids:
            raise InvalidSpecError(
                "job_ids", "a GPU is either held by one job (job_id) or shared (job_ids), not both"
            )
        if len(set(self.job_ids)) != len(self.job_ids):
            raise InvalidSpecError("job_ids", "lists a job twice")

    @property
    def is_free(self) -> bool:
        return self.job_id is None and not self.job_ids

    @property
    def is_shared(self) -> bool:
        return bool(self.job_ids)

    @property
    def vram_free_gb(self) -> float:
        return self.vram_total_gb - self.vram_used_gb

    def holds(self, job_id: str) -> bool:
        return self.job_id == job_id or job_id in self.job_ids


@dataclass(frozen=True, slots=True)
class Node:
    """One machine of a block. ``gpu_slots`` are kept sorted by index; indices are below the block's GPU count.

    ``tier`` is the node's own tier (the seed keeps one on the node and one on the block; the packer filters
    on the node's).
    """

    id: str
    block: Block
    tier: Tier
    gpu_slots: tuple[GpuSlot, ...]
    cpu_used: float = 0.0
    ram_used_gb: float = 0.0

    def __post_init__(self) -> None:
        _require_id("id", self.id)
        _require_amount("cpu_used", self.cpu_used)
        _require_amount("ram_used_gb", self.ram_used_gb)
        if self.cpu_used > self.block.cpu_per_node:
            raise InvalidSpecError(
                "cpu_used",
                f"{self.cpu_used:g} is more than the block's cpu_per_node {self.block.cpu_per_node:g}",
            )
        if self.ram_used_gb > self.block.ram_per_node_gb:
            raise InvalidSpecError(
                "ram_used_gb",
                f"{self.ram_used_gb:g} GB is more than the block's ram_per_node_gb {self.block.ram_per_node_gb:g}",
            )
        seen: set[int] = set()
        ordered = True
        previous = -1
        for position, slot in enumerate(self.gpu_slots):
            if slot.index in seen:
                raise InvalidSpecError(
                    f"gpu_slots[{position}].index", f"GPU index {slot.index} appears twice"
                )
            if slot.index >= self.block.gpus_per_node:
                raise InvalidSpecError(
                    f"gpu_slots[{position}].index",
                    f"GPU index {slot.index} is outside the block's {self.block.gpus_per_node} GPUs per node "
                    f"(indices 0-{self.block.gpus_per_node - 1})",
                )
            seen.add(slot.index)
            ordered = ordered and slot.index > previous
            previous = slot.index
        if not isinstance(self.gpu_slots, tuple) or not ordered:
            object.__setattr__(self, "gpu_slots", tuple(sorted(self.gpu_slots, key=lambda s: s.index)))

    @classmethod
    def empty(cls, id: str, block: Block, tier: Tier | None = None) -> Node:
        """A node with all of its block's GPUs free and nothing used."""
        slots = tuple(GpuSlot(i, block.vram_per_gpu_gb) for i in range(block.gpus_per_node))
        return cls(id=id, block=block, tier=block.tier if tier is None else tier, gpu_slots=slots)

    @property
    def block_id(self) -> str:
        return self.block.id

    @property
    def provider(self) -> str:
        return self.block.provider

    @property
    def gpu_model(self) -> str | None:
        return self.block.gpu_model

    @property
    def cuda_version(self) -> str | None:
        return self.block.cuda_version

    @property
    def driver_version(self) -> str | None:
        return self.block.driver_version

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_slots)

    def time_to_expiry(self, now: datetime) -> float:
        """Seconds until the node's block ends, seen from ``now``."""
        return self.block.seconds_left(now)

    def free_cpu(self) -> float:
        return self.block.cpu_per_node - self.cpu_used

    def free_ram_gb(self) -> float:
        return self.block.ram_per_node_gb - self.ram_used_gb

    def free_gpu_count(self) -> int:
        """GPUs that hold no job at all."""
        return sum(1 for slot in self.gpu_slots if slot.is_free)

    def slot(self, index: int) -> GpuSlot | None:
        for slot in self.gpu_slots:
            if slot.index == index:
                return slot
        return None


@dataclass(frozen=True, slots=True)
class Job:
    """A job waiting for a place (the seed's fields, plus the GPU models it accepts and GPU sharing).

    ``gpu_models`` ``None`` accepts any model; a list is an *ordered preference*: among the nodes that fit,
    the packer takes the one whose model comes first, then the cheapest per GPU-hour, then the best score.
    ``cuda_versions`` ``None`` accepts any CUDA version; a list (``("12.4", "12.8")``) accepts a node whose
    CUDA major.minor is one of them, or whose CUDA version is unknown. ``share_gpu`` lets the job share a
    GPU with other sharing jobs when it asks for less than the GPU's whole memory. ``submitted_at`` orders
    jobs of equal priority.
    """

    id: str
    tier: Tier
    gpu_count: int
    vram_per_gpu_gb: float
    cpu_cores: float
    ram_gb: float
    expected_duration_sec: float
    priority: int = 0
    gpu_models: tuple[str, ...] | None = None
    share_gpu: bool = False
    submitted_at: datetime | None = None
    cuda_versions: tuple[str, ...] | None = None
    # The job may be stopped and started again elsewhere (it checkpoints or is idempotent): consolidation
    # may move it off an expensive, underused node (engine/consolidation.py). Never true for FAST moves.
    restartable: bool = False

    def __post_init__(self) -> None:
        _require_id("id", self.id)
        _require_count("gpu_count", self.gpu_count)
        _require_amount("vram_per_gpu_gb", self.vram_per_gpu_gb)
        _require_amount("cpu_cores", self.cpu_cores)
        _require_amount("ram_gb", self.ram_gb)
        _require_amount("expected_duration_sec", self.expected_duration_sec)
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise InvalidSpecError("priority", f"must be a whole number, got {self.priority!r}")
        if self.gpu_models is not None:
            if not isinstance(self.gpu_models, tuple):
                object.__setattr__(self, "gpu_models", tuple(self.gpu_models))
            if not self.gpu_models:
                raise InvalidSpecError("gpu_models", "is empty", "list at least one model, or leave it out")
        if self.submitted_at is not None:
            _require_aware("submitted_at", self.submitted_at)
        if self.cuda_versions is not None:
            versions = tuple(self.cuda_versions)
            if not versions:
                raise InvalidSpecError(
                    "cuda_versions", "is empty", "list at least one version, or leave it out"
                )
            if len(versions) > MAX_CUDA_VERSIONS:
                raise InvalidSpecError(
                    "cuda_versions", f"lists {len(versions)} versions", f"list at most {MAX_CUDA_VERSIONS}"
                )
            for i, version in enumerate(versions):
                number = cuda_major_minor(version)
                if number is None or version.strip().count(".") != 1:
                    raise InvalidSpecError(
                        f"cuda_versions[{i}]",
                        f"{version!r} is not a CUDA version",
                        'give MAJOR.MINOR, e.g. "12.4"',
                    )
            object.__setattr__(self, "cuda_versions", tuple(v.strip() for v in versions))

    def shares_on(self, slot: GpuSlot) -> bool:
        """True when this job may share ``slot``: it opted in and needs less than the GPU's whole memory."""
        return self.share_gpu and self.vram_per_gpu_gb < slot.vram_total_gb

    def allows_model(self, gpu_model: str | None) -> bool:
        """Whether the job accepts ``gpu_model``, in any spelling of it (``H100-SXM`` is an ``H100``: the GPU
        registry, ``scalar.domain.gpus``). An unknown model passes only if any does."""
        if self.gpu_models is None:
            return True
        if gpu_model is None:
            return False
        wanted = canonical_gpu_model(gpu_model)
        return any(canonical_gpu_model(model) == wanted for model in self.gpu_models)

    def model_preference(self, gpu_model: str | None) -> int:
        """Where ``gpu_model`` comes in the job's ``gpu_models`` (0: first); 0 for a job without a list.

        A model the job does not allow ranks after every listed one (the packer has rejected it already)."""
        if self.gpu_models is None:
            return 0
        if gpu_model is not None:
            wanted = canonical_gpu_model(gpu_model)
            for position, model in enumerate(self.gpu_models):
                if canonical_gpu_model(model) == wanted:
                    return position
        return len(self.gpu_models)

    def allows_cuda(self, cuda_version: str | None) -> bool:
        """Whether a node with ``cuda_version`` may take the job: any version when the job lists none, an
        unknown version always (documented in docs/endpoints.md), else an exact major.minor match."""
        if self.cuda_versions is None or cuda_version is None:
            return True
        have = cuda_major_minor(cuda_version)
        return have is not None and any(cuda_major_minor(v) == have for v in self.cuda_versions)


def _arrival_key(job: Job) -> tuple[int, bool, datetime]:
    submitted = job.submitted_at
    return (-job.priority, submitted is None, _EPOCH if submitted is None else submitted)


def order_pending(jobs: Iterable[Job]) -> tuple[Job, ...]:
    """Pending jobs in the order the packer should try them.

    Higher ``priority`` first (seed 001); equal priorities by earlier ``submitted_at``, jobs without one after
    those with one; full ties keep their input order (the sort is stable).
    """
    return tuple(sorted(jobs, key=_arrival_key))


def nodes_by_id(nodes: Sequence[Node]) -> dict[str, Node]:
    """Index nodes by id; raise on a repeated id (two nodes cannot share one)."""
    out: dict[str, Node] = {}
    for position, node in enumerate(nodes):
        if node.id in out:
            raise InvalidSpecError(f"nodes[{position}].id", f"node id {node.id!r} appears twice")
        out[node.id] = node
    return out
