"""Scale groups from the config and the latest offers, which groups may serve a job, and routing's view.

A scale group is one offer shape (provider x instance type x spot) for one tier, named
``provider/instance_type[/spot]/TIER``. Its current offer is the cheapest offer of that shape matching
its config entry; a shape that leaves the market keeps its group (and its slices) but cannot launch.

Which groups may serve a job (tier, GPU model, VRAM per GPU, CPU and RAM per node, the tier's price cap,
procurement's exclusions, gang size within ``max_slices``) is decided here and handed to routing as a
constraint ``scale_group in (...)``: routing only knows device types and per-VM resources.

A job larger than one node of every group it may use is a gang: it needs ``k`` whole nodes of one
block. Routing sees it as one coscheduled entry of ``k`` tasks, routed to a *gang view* of a group
(``<group>#gangK``, slice_size ``k``) that shares the group's ``max_slices`` in nodes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from scalar.domain.gpus import canonical_gpu_model
from scalar.domain.money import usd_fixed_plain
from scalar.domain.offers import Offer
from scalar.domain.packing_model import Job
from scalar.domain.reasons import Reason
from scalar.domain.routing_model import (
    Availability,
    Constraint,
    ConstraintOp,
    DemandEntry,
    DeviceType,
    ResourceSpec,
    ScaleGroup,
    SliceStateCounts,
)
from scalar.domain.tier import Tier
from scalar.engine.config import ControllerConfig, ScaleGroupConfig
from scalar.engine.lifecycle import SliceState
from scalar.engine.state import ClusterState, GroupRecord

GIB = 1024**3
GROUP_KEY = "scale_group"
# An offer that does not publish CPU or RAM does not limit routing on them (the grant says the truth).
UNKNOWN_CPU = 1_000_000.0
UNKNOWN_MEMORY_BYTES = 1 << 50


def group_name(provider: str, instance_type: str, spot: bool, tier: Tier) -> str:
    return f"{provider}/{instance_type}{'/spot' if spot else ''}/{tier.value}"


def gang_view_name(group: str, nodes: int) -> str:
    return f"{group}#gang{nodes}"


def base_of(view_name: str) -> tuple[str, int | None]:
    """``("g", None)`` for a group, ``("g", k)`` for its gang view of ``k`` nodes."""
    base, sep, rest = view_name.rpartition("#gang")
    if sep and rest.isdigit():
        return base, int(rest)
    return view_name, None


def _config_for(offer: Offer, config: ControllerConfig) -> ScaleGroupConfig | None:
    for entry in config.scale_groups:
        if entry.matches(offer.provider, offer.instance_type, offer.gpu_model, offer.region, offer.spot):
            return entry
    return None


def usable_offer(offer: Offer) -> bool:
    """Whole GPUs at a finite, non-negative price with finite sizes: anything else cannot be a group."""
    price = offer.price_per_hour
    sizes = (offer.gpu_count, offer.gpu_memory_gb, offer.vcpu, offer.memory_gb)
    return (
        isinstance(price, Decimal)
        and price.is_finite()
        and price >= 0
        and all(isinstance(v, int | float) and math.isfinite(v) and v >= 0 for v in sizes)
        and offer.gpu_count >= 1
        and offer.gpu_count == int(offer.gpu_count)
    )


def refresh_groups(state: ClusterState, config: ControllerConfig) -> None:
    """Rebuild every group's current offer from ``state.offers`` (after a market observation)."""
    best: dict[tuple[str, str, bool], tuple[Offer, ScaleGroupConfig]] = {}
    for provider in sorted(state.offers):
        for offer in state.offers[provider]:
            if not usable_offer(offer):
                continue  # Scalar buys whole GPUs at a real price
            entry = _config_for(offer, config)
            if entry is None:
                continue
            shape = (offer.provider, offer.instance_type, offer.spot)
            seen = best.get(shape)
            if seen is None or (offer.price_per_hour, offer.key) < (seen[0].price_per_hour, seen[0].key):
                best[shape] = (offer, entry)
    current: set[str] = set()
    for (provider, instance_type, spot), (offer, entry) in sorted(best.items()):
        for tier in entry.tiers:
            name = group_name(provider, instance_type, spot, tier)
            rec = state.groups.get(name)
            if rec is None:
                rec = GroupRecord(name, entry, provider, instance_type, tier, spot)
                state.groups[name] = rec
            rec.config = entry
            rec.offer = offer
            rec.last_offer = offer
            current.add(name)
    for name, rec in state.groups.items():
        if name not in current:
            rec.offer = None
    state.offers_version += 1


# ---- which groups may serve a job -------------------------------------------------------------------


def group_rejection(job: Job, rec: GroupRecord, config: ControllerConfig) -> Reason | None:
    """Why ``rec`` can never serve ``job`` (with the numbers), or ``None`` when it may."""
    offer = rec.offer or rec.last_offer
    if offer is None:
        return Reason("no_offer", f"{rec.name} has no offer", "offer")
    if rec.tier is not job.tier:
        return Reason(
            "tier_mismatch", f"{rec.name} is {rec.tier.value}", "tier", job.tier.value, rec.tier.value
        )
    model = canonical_gpu_model(offer.gpu_model) if offer.gpu_model else None
    if not job.allows_model(model):
        return Reason(
            "gpu_model_not_allowed", f"{rec.name} has {model or 'unknown'} GPUs", "gpu_model", have=model
        )
    if not job.allows_cuda(offer.cuda_version):
        allowed = ",".join(job.cuda_versions or ())
        return Reason(
            "cuda_mismatch",
            f"{rec.name} comes with CUDA {offer.cuda_version}; the job allows {allowed}",
            "cuda_version",
            allowed,
            offer.cuda_version,
        )
    if job.gpu_count > 0 and offer.gpu_memory_gb < job.vram_per_gpu_gb:
        return Reason(
            "insufficient_vram",
            f"{rec.name} has {offer.gpu_memory_gb:g} GB per GPU",
            "vram_per_gpu_gb",
            job.vram_per_gpu_gb,
            offer.gpu_memory_gb,
        )
    if 0 < offer.vcpu < job.cpu_cores:
        return Reason(
            "insufficient_cpu",
            f"{rec.name} has {offer.vcpu:g} CPU cores per node",
            "cpu_cores",
            job.cpu_cores,
            offer.vcpu,
        )
    if 0 < offer.memory_gb < job.ram_gb:
        return Reason(
            "insufficient_ram",
            f"{rec.name} has {offer.memory_gb:g} GB RAM per node",
            "ram_gb",
            job.ram_gb,
            offer.memory_gb,
        )
    cap = config.cap_for(job.tier)
    price = offer.price_per_gpu_hour
    if cap is not None and price is not None and price > cap:
        return Reason(
            "over_tier_cap",
            f"{rec.name} costs {usd_fixed_plain(price)}/GPU-h, over the {job.tier.value} cap of {usd_fixed_plain(cap)}",
            "price_per_gpu_hour",
            str(price),
            str(price),
            str(cap),
        )
    if rec.excluded is not None:
        return rec.excluded
    per_node = int(offer.gpu_count)
    nodes = max(1, math.ceil(job.gpu_count / per_node)) if per_node else 1
    most = rec.max_slices * rec.slice_size
    if nodes > most:
        return Reason(
            "gang_too_large",
            f"{rec.name} holds at most {most} nodes of {per_node} GPUs ({most * per_node} GPUs)",
            "gpu_count",
            job.gpu_count,
            most * per_node,
        )
    return None


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Where a job's demand may go: ``views`` (group names, or gang view names for a gang of ``gang``
    nodes), and every group passed over with why (same-tier groups only)."""

    views: tuple[str, ...]
    gang: int | None
    passed_over: tuple[tuple[str, Reason], ...]

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for _, reason in self.passed_over:
            counts[reason.code] = counts.get(reason.code, 0) + 1
        return ", ".join(f"{n} {code}" for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def eligibility(job: Job, groups: Iterable[GroupRecord], config: ControllerConfig) -> Eligibility:
    fits: list[tuple[GroupRecord, int]] = []
    passed: list[tuple[str, Reason]] = []
    for rec in groups:
        if rec.tier is not job.tier:
            continue
        why = group_rejection(job, rec, config)
        if why is not None:
            passed.append((rec.name, why))
            continue
        offer = rec.offer or rec.last_offer
        assert offer is not None
        fits.append((rec, int(offer.gpu_count)))
    if not fits:
        return Eligibility((), None, tuple(passed))
    largest = max(per_node for _, per_node in fits)
    if job.gpu_count <= largest:
        views = tuple(rec.name for rec, per_node in fits if per_node >= job.gpu_count)
        return Eligibility(views, None, tuple(passed))
    nodes = math.ceil(job.gpu_count / largest)
    views = tuple(
        gang_view_name(rec.name, nodes)
        for rec, per_node in fits
        if math.ceil(job.gpu_count / per_node) == nodes
    )
    return Eligibility(views, nodes, tuple(passed))


def demand_entry(job: Job, where: Eligibility) -> DemandEntry:
    """One routing entry per job: a single task, or a coscheduled gang of ``k`` tasks (one per node)."""
    device = DeviceType.GPU if job.gpu_count > 0 else DeviceType.CPU
    constraint = (Constraint(GROUP_KEY, ConstraintOp.IN, where.views),)
    memory = round(job.ram_gb * GIB)
    if where.gang is None:
        return DemandEntry(
            task_ids=(job.id,),
            device_type=device,
            resources=ResourceSpec(cpu=job.cpu_cores, memory_bytes=memory, gpu_count=job.gpu_count),
            constraints=constraint,
        )
    k = where.gang
    per_task = math.ceil(job.gpu_count / k)
    return DemandEntry(
        task_ids=tuple(f"{job.id}#{i}" for i in range(k)),
        coschedule_group_id=job.id,
        device_type=device,
        resources=ResourceSpec(cpu=job.cpu_cores, memory_bytes=memory, gpu_count=per_task),
        constraints=constraint,
    )


def gang_parts(gpu_count: int, nodes: int) -> tuple[int, ...]:
    """GPUs per node of a gang, as even as possible, larger parts first: 12 on 2 -> (6, 6), 9 on 2 -> (5, 4)."""
    base, extra = divmod(gpu_count, nodes)
    return tuple(base + 1 if i < extra else base for i in range(nodes))


# ---- routing's view ------------------------------------------------------------------------------------


def _counts(states: Iterable[SliceState | None]) -> SliceStateCounts:
    tally = {"requesting": 0, "booting": 0, "initializing": 0, "ready": 0}
    for s in states:
        if s is not None and s.value in tally:
            tally[s.value] += 1
    return SliceStateCounts(**tally)


def availability_of(rec: GroupRecord, now: datetime) -> tuple[Availability, datetime | None]:
    if rec.backoff_until is not None and now < rec.backoff_until:
        return Availability.BACKOFF, rec.backoff_until
    if rec.offer is None or rec.priority is None:
        return Availability.QUOTA_EXCEEDED, None
    return Availability.AVAILABLE, None


def node_headroom(state: ClusterState, rec: GroupRecord) -> int:
    """Nodes the group may still buy: ``max_slices x slice_size`` minus its live slices' nodes."""
    used = 0
    for sid in state.live_slice_ids:
        sl = state.slices[sid]
        if sl.group == rec.name:
            used += rec.slice_size * math.ceil(sl.nodes_wanted / rec.slice_size)
    return max(0, rec.max_slices * rec.slice_size - used)


def routing_groups(
    state: ClusterState,
    now: datetime,
    gang_sizes: dict[str, set[int]],
    floors: Mapping[str, int] | None = None,
) -> list[ScaleGroup]:
    """Every group as routing sees it, plus a gang view per gang size wanted or in flight. ``floors``: per
    group, slices to keep live over its ``min_slices`` (the restart reserve's, engine/reserve.py)."""
    by_group: dict[str, list[tuple[int | None, SliceState | None, int]]] = {}
    for sid in state.live_slice_ids:
        sl = state.slices[sid]
        by_group.setdefault(sl.group, []).append((sl.gang_size, sl.state, sl.nodes_wanted))
    out: list[ScaleGroup] = []
    for rec in state.groups.values():
        offer = rec.offer or rec.last_offer
        if offer is None:
            continue
        availability, until = availability_of(rec, now)
        s = rec.slice_size
        live = by_group.get(rec.name, [])
        base = [st for gang, st, _ in live if gang is None]
        gang_slots = sum(math.ceil(n / s) for gang, _, n in live if gang is not None)
        max_base = max(len(base), rec.max_slices - gang_slots)
        shape = (offer.vcpu, offer.memory_gb, offer.gpu_count, offer.gpu_model, offer.spot)
        common = (rec.priority, availability, until)
        minimum = max(rec.min_slices, floors.get(rec.name, 0)) if floors else rec.min_slices
        out.append(
            _scale_group(rec.name, max_base, min(minimum, max_base), s, _counts(base), *shape, *common)
        )
        # node_headroom(state, rec), from the group's live slices gathered above
        free_nodes = max(0, rec.max_slices * s - sum(s * math.ceil(n / s) for _, _, n in live))
        sizes = set(gang_sizes.get(rec.name, set())) | {gang for gang, _, _ in live if gang is not None}
        for k in sorted(sizes):
            mine = [st for gang, st, _ in live if gang == k]
            out.append(
                _scale_group(
                    gang_view_name(rec.name, k),
                    len(mine) + free_nodes // k,
                    0,
                    k,
                    _counts(mine),
                    *shape,
                    *common,
                )
            )
    return out


@functools.lru_cache(maxsize=4096, typed=True)
def _scale_group(
    name: str,
    max_slices: int,
    min_slices: int,
    slice_size: int,
    counts: SliceStateCounts,
    vcpu: float,
    memory_gb: float,
    gpu_count: float,
    gpu_model: str | None,
    spot: bool,
    priority: int | None,
    availability: Availability,
    until: datetime | None,
) -> ScaleGroup:
    """A group (or gang view) as routing sees it: a value built once per distinct input, as routing runs
    at many steps where most groups did not change (``ScaleGroup`` is frozen, so sharing it is safe)."""
    return ScaleGroup(
        name=name,
        max_slices=max_slices,
        min_slices=min_slices,
        slice_size=slice_size,
        slice_state_counts=counts,
        attributes=((GROUP_KEY, name),),
        device_type=DeviceType.GPU,
        resources=ResourceSpec(
            cpu=vcpu if vcpu > 0 else UNKNOWN_CPU,
            memory_bytes=round(memory_gb * GIB) if memory_gb > 0 else UNKNOWN_MEMORY_BYTES,
            gpu_count=int(gpu_count),
        ),
        priority=priority,
        device_variant=gpu_model,
        preemptible=spot,
        availability=availability,
        backoff_until=until,
    )
