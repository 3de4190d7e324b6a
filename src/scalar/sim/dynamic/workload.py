"""Protocol B's workload: a pod list replayed with its real creation and deletion times.

Times. The trace counts seconds from its own start. A *window* keeps ``[W0, W1)``: ``W0`` is
``start_day`` x 86,400 (default: the day of the 5th percentile of creation times, where the trace's
arrivals begin in earnest) and ``W1 = W0 + window_days`` days (default: the trace's end). Every pod's life
``[creation, deletion)`` is cut to the window: a pod alive when the window opens arrives at ``W0`` with
what is left of its life, a pod alive when it closes is declared only up to ``W1``. ``compress = X``
then divides every time by X (arrivals and durations alike: the same load shape, X times faster).

A job's duration is ``deletion - creation`` (cut to the window, compressed): its wall time on the
reference model (:mod:`scalar.sim.dynamic.speed`; a FLEX job runs faster or slower on other models, a FAST
job holds its GPU that long on any). The scheduler is told an *estimate*, the duration times a seeded
log-normal error ``exp(sigma * Z)`` (``estimate_sigma``, default 0.5: half the estimates are off by more
than a factor of 1.4, one in twenty by more than 2.3), drawn from the run's seed and the job's id.

Pods left out, each counted: CPU-only pods (``num_gpu = 0``: the markets here sell GPU nodes; every
policy skips them alike), pods that were ``Pending`` in the trace (never scheduled: their deletion is a
cancellation, not the end of work, so there is no run time to replay), pods whose GPU models map to
nothing sold, pods whose life misses the window, and pods of zero length. A pod without a deletion time
was still running when the trace ended: it lives until the trace's last timestamp.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from scalar.domain.offers import Offer
from scalar.domain.tier import Tier
from scalar.sim.dynamic.mapping import ANY_TRACE_MODEL, ModelMapper, tier_of
from scalar.sim.traces import GPU_MILLI, PodSpec, TraceFormatError, read_pods

DAY_S = 86_400
HOUR_S = 3600.0
DEFAULT_ESTIMATE_SIGMA = 0.5

SKIP_CPU_ONLY = "cpu_only"
SKIP_PENDING = "pending_in_trace"
SKIP_UNMAPPED = "unmapped_gpu_model"
SKIP_OUTSIDE = "outside_window"
SKIP_ZERO = "zero_length"
SKIP_REASONS = (SKIP_CPU_ONLY, SKIP_PENDING, SKIP_UNMAPPED, SKIP_OUTSIDE, SKIP_ZERO)


@dataclass(frozen=True, slots=True)
class WindowOptions:
    """Which slice of the trace to replay and how fast. ``None``: the documented default."""

    start_day: float | None = None
    window_days: float | None = None
    compress: float = 1.0
    burstable: Tier = Tier.FLEX
    estimate_sigma: float = DEFAULT_ESTIMATE_SIGMA
    checkpoint_minutes: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.estimate_sigma) and self.estimate_sigma >= 0):
            raise ValueError(f"estimate_sigma must be a number >= 0, got {self.estimate_sigma}")
        if self.checkpoint_minutes is not None and not (
            math.isfinite(self.checkpoint_minutes) and self.checkpoint_minutes > 0
        ):
            raise ValueError(f"checkpoint_minutes must be > 0 (or unset), got {self.checkpoint_minutes}")
        if not (math.isfinite(self.compress) and self.compress >= 1):
            raise ValueError(f"compress must be a number >= 1, got {self.compress}")
        if self.window_days is not None and not (math.isfinite(self.window_days) and self.window_days > 0):
            raise ValueError(f"window_days must be > 0, got {self.window_days}")
        if self.start_day is not None and not (math.isfinite(self.start_day) and self.start_day >= 0):
            raise ValueError(f"start_day must be >= 0, got {self.start_day}")


@dataclass(frozen=True, slots=True)
class DynamicJob:
    """One pod as a job: arrival and duration in simulated seconds from the window's start."""

    job_id: str
    tier: Tier
    qos: str
    arrival_s: float
    duration_s: float
    gpu_count: int
    gpu_fraction: float  # of each GPU: gpu_milli / 1000 for a sharing pod, 1 otherwise
    share_gpu: bool
    vram_per_gpu_gb: float
    cpu_cores: float
    ram_gb: float
    models: tuple[str, ...]
    trace_models: str  # the pod's gpu_spec as written, or "any"
    estimate_s: float = 0.0  # what the scheduler is told (0: the duration itself)

    @property
    def expected_s(self) -> float:
        """The duration the scheduler is told: the estimate, or the true duration when none was drawn."""
        return self.estimate_s if self.estimate_s > 0 else self.duration_s

    @property
    def gpus(self) -> float:
        """GPUs the job occupies, counting a share as its fraction."""
        return self.gpu_count * self.gpu_fraction

    @property
    def demanded_gpu_hours(self) -> float:
        return self.gpus * self.duration_s / HOUR_S


@dataclass(frozen=True, slots=True)
class MappingRow:
    """What one trace model constraint became: pods and GPU-hours per mapped model set."""

    trace_models: str
    models: tuple[str, ...]
    pods: int
    gpu_hours: float


@dataclass(frozen=True, slots=True)
class Workload:
    source: str
    jobs: tuple[DynamicJob, ...]
    start_s: int  # W0 in trace seconds
    end_s: int  # W1 in trace seconds
    compress: float
    pods_read: int
    skipped: dict[str, int]
    clipped: int
    mapping: tuple[MappingRow, ...]
    tiers: dict[str, int] = field(default_factory=dict)
    checkpoint_s: float | None = None

    @property
    def horizon_s(self) -> float:
        """Simulated seconds of the window."""
        return (self.end_s - self.start_s) / self.compress

    @property
    def demanded_gpu_hours(self) -> float:
        return sum(j.demanded_gpu_hours for j in self.jobs)

    def pods_per_model(self) -> dict[str, int]:
        """Pods that may run on each mapped model (a pod counts for every model it accepts)."""
        out: dict[str, int] = {}
        for row in self.mapping:
            for m in row.models:
                out[m] = out.get(m, 0) + row.pods
        return dict(sorted(out.items()))


def read_phases(path: Path | str, count: int) -> list[str]:
    """The ``pod_phase`` column, row for row as ``read_pods`` reads them (``""`` when absent)."""
    with Path(path).open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = [h.strip() for h in next(reader)]
        if "pod_phase" not in header:
            return [""] * count
        i = header.index("pod_phase")
        phases = [
            (row[i].strip() if i < len(row) else "")
            for row in reader
            if row and not all(not cell.strip() for cell in row)
        ]
    if len(phases) != count:  # pragma: no cover - read_pods and this reader skip the same rows
        raise TraceFormatError(str(path), None, "pod_phase", "rows do not line up", "check the CSV quoting")
    return phases


def default_start_s(pods: Sequence[PodSpec]) -> int:
    """The day (in seconds) of the 5th percentile of creation times."""
    times = sorted(p.creation_time_s for p in pods if p.creation_time_s is not None)
    if not times:
        return 0
    p5 = times[min(len(times) - 1, int(0.05 * len(times)))]
    return (p5 // DAY_S) * DAY_S


def estimate(duration_s: float, sigma: float, seed: int, job_id: str) -> float:
    """``duration_s`` times a log-normal error ``exp(sigma * Z)``, ``Z`` drawn from ``seed`` and the job id."""
    if sigma <= 0:
        return duration_s
    z = random.Random(f"estimate:{seed}:{job_id}").gauss(0.0, 1.0)
    return duration_s * math.exp(sigma * z)


def build_workload(
    path: Path | str,
    offers: Sequence[Offer],
    options: WindowOptions | None = None,
    pods: Sequence[PodSpec] | None = None,
    phases: Sequence[str] | None = None,
    seed: int = 0,
) -> Workload:
    """Read ``path`` (or take ``pods``/``phases`` already read) and build the replayed jobs; ``seed`` draws
    the duration estimates the scheduler is told."""
    opts = options or WindowOptions()
    source = str(path)
    if pods is None:
        pods = read_pods(path)
        phases = read_phases(path, len(pods))
    if phases is None:
        phases = [""] * len(pods)
    for line, pod in enumerate(pods, start=2):
        if pod.creation_time_s is None:
            raise TraceFormatError(
                source, line, "creation_time", "Protocol B needs every pod's creation time", "fill it in"
            )
    trace_end = max(max(p.creation_time_s or 0, p.deletion_time_s or 0) for p in pods)
    w0 = int(opts.start_day * DAY_S) if opts.start_day is not None else default_start_s(pods)
    w1 = trace_end if opts.window_days is None else w0 + int(opts.window_days * DAY_S)
    if opts.window_days is None and w1 <= w0:
        w1 = w0 + DAY_S
    mapper = ModelMapper(offers)
    skipped = dict.fromkeys(SKIP_REASONS, 0)
    clipped = 0
    jobs: list[DynamicJob] = []
    rows: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    for pod, phase in zip(pods, phases, strict=True):
        if pod.num_gpu == 0:
            skipped[SKIP_CPU_ONLY] += 1
            continue
        if phase.strip().lower() == "pending":
            skipped[SKIP_PENDING] += 1
            continue
        models = mapper.models(pod.gpu_spec)
        if not models:
            skipped[SKIP_UNMAPPED] += 1
            continue
        creation = pod.creation_time_s or 0
        deletion = trace_end if pod.deletion_time_s is None else pod.deletion_time_s
        a, e = max(creation, w0), min(deletion, w1)
        if deletion <= creation:
            skipped[SKIP_ZERO] += 1
            continue
        if e <= a:
            skipped[SKIP_OUTSIDE] += 1
            continue
        if (a, e) != (creation, deletion):
            clipped += 1
        share = pod.shares_gpu
        fraction = pod.gpu_milli / GPU_MILLI if share else 1.0
        ref = mapper.reference_vram_gb(models)
        job = DynamicJob(
            job_id=pod.name.replace("#", "_"),
            tier=tier_of(pod.qos, opts.burstable),
            qos=pod.qos,
            arrival_s=(a - w0) / opts.compress,
            duration_s=(e - a) / opts.compress,
            gpu_count=pod.num_gpu,
            gpu_fraction=fraction,
            share_gpu=share,
            vram_per_gpu_gb=round(ref * fraction, 3),
            cpu_cores=pod.cpu_milli / 1000,
            ram_gb=round(pod.memory_mib / 1024, 3),
            models=models,
            trace_models="|".join(pod.gpu_spec) or ANY_TRACE_MODEL,
        )
        jobs.append(job)
        row = rows.setdefault((job.trace_models, models), [0, 0.0])
        row[0] += 1
        row[1] += job.demanded_gpu_hours
    jobs.sort(key=lambda j: (j.arrival_s, j.job_id))
    seen: set[str] = set()
    unique: list[DynamicJob] = []
    for j in jobs:  # a repeated pod name gets a suffix: job ids must be unique
        job_id, n = j.job_id, 1
        while job_id in seen:
            n += 1
            job_id = f"{j.job_id}-{n}"
        seen.add(job_id)
        told = estimate(j.duration_s, opts.estimate_sigma, seed, job_id)
        unique.append(replace(j, job_id=job_id, estimate_s=told))
    tiers: dict[str, int] = {}
    for j in unique:
        tiers[j.tier.value] = tiers.get(j.tier.value, 0) + 1
    mapping = tuple(
        MappingRow(spec, models, int(v[0]), round(v[1], 3))
        for (spec, models), v in sorted(rows.items(), key=lambda kv: (-kv[1][0], kv[0]))
    )
    return Workload(
        source=source,
        jobs=tuple(unique),
        start_s=w0,
        end_s=w1,
        compress=opts.compress,
        pods_read=len(pods),
        skipped=skipped,
        clipped=clipped,
        mapping=mapping,
        tiers=dict(sorted(tiers.items())),
        checkpoint_s=None if opts.checkpoint_minutes is None else opts.checkpoint_minutes * 60.0,
    )
