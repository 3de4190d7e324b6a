"""Scalar's placement score: fragmentation gain, CPU/RAM stranding and dead GPU leftovers, with its prior
(the workload's typical pods) learnt online from the jobs seen so far.

One implementation for the controller (``scalar.domain.packing``, ``[controller] packing_score =
"scalar"``, the default) and the simulator (``scalar simulate fgd --policy scalar``: the policy
``scalar.sim.policies.scalar`` keeps numpy and table-driven copies of :func:`score_after` as fast paths,
tested bit-identical to this module in ``tests/sim/test_scalar_identity.py``).

A node is seen as a :class:`NodeView`: each GPU's idle share in milli (1000 = a whole idle GPU, 0 = held
whole), CPU left in milli-cores, memory left in MiB, its GPU model. A job is a :class:`Shape`. Placing
the shape turns one view into another; the score of that move is (in GPU milli, rounded down to ``STEP``)::

    score = frag_gain - LAMBDA * strand_change - NU * hole_change

* ``frag_gain``: FGD's gradient, the decrease of the node's fragmentation measured against the typical
  pods (the heaviest shapes covering 95% of the prior's weight). A typical pod ``t`` fits a node when its
  model is allowed, CPU is left for it and ``num_gpu`` GPUs have ``milli_t`` idle each; the node's
  fragment is its idle milli that no fitting typical pod could use, weighted by the pods' weights.
* ``strand_change``: growth of the idle GPU milli the node can no longer feed with CPU or memory,
  ``stranded = max(0, idle - cpu_left / cpu_per_gpu, idle - mem_left / mem_per_gpu)`` with the per-GPU
  needs of the prior's GPU jobs; a decrease counts ``RHO`` times.
* ``hole_change``: for a job sharing a GPU, the change of the expected *dead* leftover of that GPU
  (:func:`hole_waste_table`).

The prior (:class:`ShapeWindow`): every job seen so far, each weighing ``2^(-age / HALF_LIFE)`` (age in
jobs), relearnt after 1, 2, 4, ... jobs and then every ``RELEARN_EVERY`` jobs. It never sees a job before
it arrives. Weights become integers (``WEIGHT_SCALE`` per job) before they enter the fragmentation, so
fragmentation is exact integer arithmetic in floats and equal states give equal scores, bit for bit.

Units: a job sharing a GPU asks ``need`` of a GPU's memory; on a node whose GPUs hold ``gpu_size`` it takes
``ceil(1000 * need / gpu_size)`` milli (:func:`per_gpu_milli`). The controller counts memory in MiB; the
simulator's pods ask GPU milli directly (``gpu_size`` 1000). Whole-GPU jobs have ``need`` ``None``.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scalar.domain.gpus import canonical_gpu_model
from scalar.domain.packing_model import Job, Node

GPU_MILLI = 1000
LAMBDA = 2.0
RHO = 0.5
NU = 1.0
HOLE_RATE = 30.0
STEP = 10.0
POPULARITY = 0.95
HALF_LIFE = 4096
RELEARN_EVERY = 512
WEIGHT_SCALE = 1024
# A shape not seen for 20 half-lives (weight below 2^-20 of a new job's) is forgotten at the next relearn,
# so the window stays as small as the recent mix, however long the controller runs.
FORGET_BELOW = 2.0**-20
FRAG_CACHE = 65_536  # node states whose fragmentation a prior remembers (then it starts over)
# The seed's expiry term (weight 0.3 of a score whose 1.0 is a full node) in this score's ticks: 0.3 of a
# whole GPU (100 ticks), subtracted times the seed's ``expiry_penalty`` (0 when the node outlives the job
# twice over; Protocol A's static cluster never expires).
EXPIRY_TICKS = 30.0


@dataclass(frozen=True, slots=True, order=True)
class Shape:
    """What a job asks of one node: CPU (milli-cores), memory (MiB), GPUs, per-GPU memory when it shares a
    GPU (``None``: whole GPUs) and the GPU models it accepts (empty: any)."""

    cpu: int
    mem: int
    num_gpu: int
    need: int | None = None
    models: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node as the score sees it: idle milli per GPU, CPU (milli-cores) and memory (MiB) left, GPU model
    (``None``: unknown, which fits typical pods that accept any model) and the per-GPU memory ``gpu_size``
    in the units of :attr:`Shape.need`."""

    gpus: tuple[int, ...]
    cpu: int
    mem: int
    model: str | None = None
    gpu_size: int = GPU_MILLI


@dataclass(frozen=True, slots=True)
class Typical:
    cpu: int
    milli: int
    num_gpu: int
    models: tuple[str, ...]
    weight: int


def per_gpu_milli(shape: Shape, gpu_size: int) -> int:
    """The GPU milli ``shape`` takes on each of its GPUs on a node whose GPUs hold ``gpu_size``."""
    if shape.num_gpu == 0:
        return 0
    if shape.need is None or shape.need >= gpu_size:
        return GPU_MILLI
    return -(-GPU_MILLI * shape.need // gpu_size)


def typical_of(
    weights: Mapping[tuple[int, int, int, tuple[str, ...]], int], threshold: float
) -> list[Typical]:
    """The heaviest shapes ``(cpu, milli, num_gpu, models) -> weight`` covering ``threshold`` of the total
    weight (ties: larger shape first)."""
    ranked = sorted(weights.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], "|".join(kv[0][3])))
    ranked.reverse()
    need = threshold * sum(weights.values())
    chosen: list[Typical] = []
    cumulative = 0
    for (cpu, milli, num, models), weight in ranked:
        if cumulative >= need or weight <= 0:
            break
        chosen.append(Typical(cpu, milli, num, models, weight))
        cumulative += weight
    return chosen


def hole_waste_table(sizes: Mapping[int, float], rate: float = HOLE_RATE) -> list[float]:
    """Expected dead leftover of a GPU hole of ``h`` milli, for h in 0..1000.

    ``w(h) = (h + sum_{s<=h} r p_s w(h - s)) / (1 + sum_{s<=h} r p_s)`` with ``p_s`` the share of per-GPU
    demand ``s`` (``sizes``: milli -> weight) among GPU jobs: the hole ends as it is with weight 1, or first
    receives a fitting job.
    """
    total = 0.0
    for weight in sizes.values():
        total += weight
    if total <= 0:
        return [float(h) for h in range(GPU_MILLI + 1)]
    rates = sorted((s, rate * w / total) for s, w in sizes.items() if s > 0)
    waste = [0.0] * (GPU_MILLI + 1)
    for h in range(GPU_MILLI + 1):
        acc = 0.0
        rsum = 0.0
        for s, r in rates:
            if s > h:
                break
            acc += r * waste[h - s]
            rsum += r
        waste[h] = (h + acc) / (1.0 + rsum)
    return waste


@dataclass(slots=True)
class Scale:
    """The prior seen on nodes whose GPUs hold ``gpu_size``: everything the score reads."""

    typical: list[Typical]
    weight_total: float
    cpu_per_gpu: float
    mem_per_gpu: float
    cpu_gpu: float  # idle GPU milli one milli-core feeds (inf: the jobs need no CPU)
    mem_gpu: float  # idle GPU milli one MiB feeds (inf: the jobs need no memory)
    hole_waste: list[float]
    # The GPU typical pods grouped for :func:`frag_scaled`: per (milli, models, num_gpu), their CPU needs
    # ascending and the running sums of their weights (integers: exact).
    groups: list[tuple[int, tuple[str, ...], int, list[int], list[int]]] = field(default_factory=list)
    thresholds: list[int] = field(default_factory=list)
    _frag: dict[NodeView, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        by_group: dict[tuple[int, tuple[str, ...], int], dict[int, int]] = {}
        for t in self.typical:
            if t.num_gpu > 0 and t.milli > 0:
                cpus = by_group.setdefault((t.milli, t.models, t.num_gpu), {})
                cpus[t.cpu] = cpus.get(t.cpu, 0) + t.weight
        self.groups = []
        for (milli, models, num), cpus in sorted(by_group.items()):
            levels = sorted(cpus)
            running = []
            total = 0
            for cpu in levels:
                total += cpus[cpu]
                running.append(total)
            self.groups.append((milli, models, num, levels, running))
        self.thresholds = sorted({g[0] for g in self.groups})


def make_scale(typical: list[Typical], rows: Iterable[tuple[int, int, int, int, float]]) -> Scale:
    """The score's constants from the typical pods and the weighted shapes ``(cpu, mem, num_gpu, milli,
    weight)`` (CPU and memory per GPU of the GPU jobs, the per-GPU size mix of the dead-leftover table)."""
    sizes: dict[int, float] = {}
    cpu_sum = mem_sum = gpu_milli = 0.0
    for cpu, mem, num, milli, weight in rows:
        if num > 0:
            cpu_sum += cpu * weight
            mem_sum += mem * weight
            gpu_milli += num * milli * weight
            sizes[milli] = sizes.get(milli, 0.0) + weight
    if gpu_milli > 0:
        cpu_per_gpu = cpu_sum * GPU_MILLI / gpu_milli
        mem_per_gpu = mem_sum * GPU_MILLI / gpu_milli
    else:
        cpu_per_gpu = mem_per_gpu = math.inf
    return Scale(
        typical,
        float(sum(t.weight for t in typical)),
        cpu_per_gpu,
        mem_per_gpu,
        GPU_MILLI / cpu_per_gpu if cpu_per_gpu > 0 else math.inf,
        GPU_MILLI / mem_per_gpu if mem_per_gpu > 0 else math.inf,
        hole_waste_table(sizes),
    )


@dataclass(slots=True)
class Prior:
    """Weighted job shapes (the learnt prior), seen at each GPU size on demand (:meth:`at`)."""

    weights: dict[Shape, float]
    _scales: dict[int, Scale] = field(default_factory=dict)

    def at(self, gpu_size: int) -> Scale:
        scale = self._scales.get(gpu_size)
        if scale is None:
            scale = self._scales[gpu_size] = self._learn(gpu_size)
        return scale

    def _learn(self, gpu_size: int) -> Scale:
        by_key: dict[tuple[int, int, int, tuple[str, ...]], float] = {}
        rows: list[tuple[int, int, int, int, float]] = []
        for shape, weight in self.weights.items():
            milli = per_gpu_milli(shape, gpu_size)
            key = (shape.cpu, milli, shape.num_gpu, shape.models)
            by_key[key] = by_key.get(key, 0.0) + weight
            rows.append((shape.cpu, shape.mem, shape.num_gpu, milli, weight))
        scaled = {k: round(w * WEIGHT_SCALE) for k, w in by_key.items()}
        return make_scale(typical_of({k: w for k, w in scaled.items() if w > 0}, POPULARITY), rows)


@dataclass(slots=True)
class ShapeWindow:
    """The online prior: the shapes of the jobs seen so far in a decaying window (see the module doc).

    ``observe`` is called once per arriving job, in arrival order; ``prior`` is what was learnt at the last
    relearn (empty before the first job). Deterministic: the same jobs in the same order give the
    same prior, bit for bit (the controller rebuilds it by replaying its events)."""

    seen: dict[Shape, float] = field(default_factory=dict)
    arrived: int = 0
    base: int = 0  # weights are in units where a job arriving at ``base`` weighs 1
    next_learn: int = 1
    prior: Prior = field(default_factory=lambda: Prior({}))
    learnt: int = 0  # how many times the prior was relearnt (a version for caches)

    def observe(self, shape: Shape) -> bool:
        """Count an arriving job in; True when the prior was relearnt."""
        self.arrived += 1
        grow = 2.0 ** ((self.arrived - self.base) / HALF_LIFE)  # newer jobs weigh more
        self.seen[shape] = self.seen.get(shape, 0.0) + grow
        if self.arrived < self.next_learn:
            return False
        self.next_learn = (
            self.next_learn * 2 if self.next_learn < RELEARN_EVERY else self.next_learn + RELEARN_EVERY
        )
        scale = 2.0 ** (-(self.arrived - self.base) / HALF_LIFE)
        self.seen = {k: w * scale for k, w in self.seen.items() if w * scale >= FORGET_BELOW}
        self.base = self.arrived
        self.prior = Prior(dict(self.seen))
        self.learnt += 1
        return True


# --- the score -------------------------------------------------------------------------------------


def _fits_model(models: tuple[str, ...], model: str | None) -> bool:
    return not models or (model is not None and model in models)


def frag_scaled(scale: Scale, view: NodeView) -> float:
    """The node's fragmentation times ``scale.weight_total`` (exact: integer-valued).

    ``idle * W - sum over the GPU typical pods t the node can host of w_t * A(m_t)``, with ``A(m)`` the idle
    milli on GPUs with at least ``m`` idle; a pod fits when its model is allowed, CPU is left for it and
    ``num_gpu`` GPUs have ``m_t`` idle. Computed per group of typical pods (same milli, models and GPU
    count; their CPU needs sorted), and remembered per node state."""
    cached = scale._frag.get(view)
    if cached is not None:
        return cached
    gpus = view.gpus
    idle = sum(gpus)
    amount: dict[int, tuple[int, int]] = {}
    for m in scale.thresholds:
        count = total = 0
        for g in gpus:
            if g >= m:
                count += 1
                total += g
        amount[m] = (count, total)
    used = 0
    for milli, models, num, levels, running in scale.groups:
        count, total = amount[milli]
        if count < num or not total or not _fits_model(models, view.model):
            continue
        reach = bisect.bisect_right(levels, view.cpu)
        if reach:
            used += total * running[reach - 1]
    result = idle * scale.weight_total - used
    if len(scale._frag) >= FRAG_CACHE:
        scale._frag.clear()
    scale._frag[view] = result
    return result


def stranded(scale: Scale, view: NodeView) -> float:
    """Idle GPU milli the node's CPU or memory left can no longer feed."""
    idle = sum(view.gpus)
    # A resource the jobs do not need (0 per GPU: it feeds any number of GPUs) strands nothing.
    by_cpu = idle - view.cpu * scale.cpu_gpu if scale.cpu_gpu < math.inf else -math.inf
    by_mem = idle - view.mem * scale.mem_gpu if scale.mem_gpu < math.inf else -math.inf
    return max(by_cpu, by_mem, 0.0)


def score_after(
    scale: Scale, before: NodeView, after: NodeView, hole: tuple[int, int] | None = None
) -> float:
    """The score (in ``STEP`` ticks, a whole number) of turning ``before`` into ``after``; ``hole`` is
    ``(idle milli of the shared GPU before, after)`` for a job sharing a GPU."""
    change = stranded(scale, after) - stranded(scale, before)
    gain = 0.0
    if scale.weight_total > 0:
        gain = (frag_scaled(scale, before) - frag_scaled(scale, after)) / scale.weight_total
    score = gain - LAMBDA * max(change, RHO * change)
    if hole is not None:
        score -= NU * (scale.hole_waste[hole[1]] - scale.hole_waste[hole[0]])
    return float(math.floor(score / STEP))


def place_view(view: NodeView, shape: Shape, milli: int, gpus: Sequence[int]) -> NodeView:
    """``view`` once ``shape`` took ``milli`` on each of ``gpus`` (whole GPUs: all of their idle)."""
    row = list(view.gpus)
    for g in gpus:
        row[g] = max(0, row[g] - milli) if milli < GPU_MILLI else 0
    return NodeView(tuple(row), view.cpu - shape.cpu, view.mem - shape.mem, view.model, view.gpu_size)


def shares(shape: Shape, milli: int) -> bool:
    return shape.num_gpu == 1 and milli < GPU_MILLI


def best_shared_gpu(
    scale: Scale, view: NodeView, shape: Shape, usable: Sequence[int] | None = None
) -> tuple[float, int] | None:
    """For a job sharing one GPU: ``(score, GPU index)`` of the best GPU among ``usable`` (default: every
    GPU with its milli idle). Equal scores go to the tightest GPU, then the lowest index."""
    milli = per_gpu_milli(shape, view.gpu_size)
    candidates = range(len(view.gpus)) if usable is None else usable
    by_value: dict[int, int] = {}
    for g in candidates:
        value = view.gpus[g]
        if (usable is not None or value >= milli) and value not in by_value:
            by_value[value] = g
    best: tuple[float, int] | None = None
    for value in sorted(by_value, reverse=True):  # descending: the last one reaching the best is the tightest
        gpu = by_value[value]
        after = place_view(view, shape, milli, (gpu,))
        score = score_after(scale, view, after, (value, after.gpus[gpu]))
        if best is None or score >= best[0]:
            best = (score, gpu)
    return best


def score_on(scale: Scale, view: NodeView, shape: Shape, gpus: Sequence[int]) -> float:
    """The score of ``shape`` taking ``gpus`` of the node (whole GPUs, or the one GPU it shares)."""
    milli = per_gpu_milli(shape, view.gpu_size)
    after = place_view(view, shape, milli, gpus)
    hole = (view.gpus[gpus[0]], after.gpus[gpus[0]]) if shares(shape, milli) and gpus else None
    return score_after(scale, view, after, hole)


# --- the controller's jobs and nodes ---------------------------------------------------------------

MIB_PER_GB = 1024


def _mib(gb: float) -> int:
    return round(gb * MIB_PER_GB)


@functools.lru_cache(maxsize=4096)  # pure: equal jobs, equal shapes
def job_shape(job: Job) -> Shape:
    """The shape of a controller job: CPU in milli-cores, memory and a shared GPU's memory in MiB."""
    need = _mib(job.vram_per_gpu_gb) if job.share_gpu and job.gpu_count > 0 else None
    models = tuple(canonical_gpu_model(m) for m in job.gpu_models) if job.gpu_models else ()
    return Shape(round(job.cpu_cores * 1000), _mib(job.ram_gb), job.gpu_count, need, models)


@functools.lru_cache(maxsize=4096)  # pure: equal nodes, equal views
def node_view(node: Node) -> NodeView:
    """A controller node as the score sees it: a GPU held whole is 0 idle milli, a free or shared one its
    free memory in milli of the block's per-GPU memory (rounded down)."""
    size = max(1, _mib(node.block.vram_per_gpu_gb))
    gpus = tuple(
        0 if slot.job_id is not None else min(GPU_MILLI, _mib(slot.vram_free_gb) * GPU_MILLI // size)
        for slot in node.gpu_slots
    )
    model = canonical_gpu_model(node.gpu_model) if node.gpu_model else None
    return NodeView(gpus, round(node.free_cpu() * 1000), _mib(node.free_ram_gb()), model, size)


def score_job(prior: Prior, job: Job, node: Node, chosen: tuple[int, ...]) -> tuple[float, tuple[int, ...]]:
    """``(score, GPU indices)`` of ``job`` on ``node``, which passed the packer's filters with ``chosen`` as
    its GPUs (``fit_gpus``). A job sharing a GPU takes the best GPU by this score instead (the tightest on
    equal scores, then the lowest index); whole-GPU jobs keep ``chosen`` (the fragmentation score reads
    only how many idle GPUs a node has left, not which)."""
    view = node_view(node)
    shape = job_shape(job)
    scale = prior.at(view.gpu_size)
    milli = per_gpu_milli(shape, view.gpu_size)
    position = {slot.index: i for i, slot in enumerate(node.gpu_slots)}
    if shares(shape, milli):
        usable = [
            i
            for i, slot in enumerate(node.gpu_slots)
            if slot.job_id is None
            and (not slot.job_ids or job.shares_on(slot))
            and slot.vram_used_gb + job.vram_per_gpu_gb <= slot.vram_total_gb
        ]
        found = best_shared_gpu(scale, view, shape, usable)
        if found is not None:
            return found[0], (node.gpu_slots[found[1]].index,)
    return score_on(scale, view, shape, [position[i] for i in chosen]), chosen
