"""Refuse bad jobs at submission, with reasons, instead of discovering them in a loop later.

``validate_job_spec(spec, config, offers)`` returns every problem as a :class:`Reason` (empty: the job is
acceptable). The spec's own values are checked first (negative GPUs, unknown tier...); then, when offers
are known, whether anything Scalar could buy can ever hold the job: a GPU model on offer, enough VRAM per
GPU, enough CPU and RAM per node, and enough GPUs on one node or on one gang of ``max_slices x slice_size``
nodes of a configured scale group. Price is not checked here: a FLEX job over its cap waits for the price.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from scalar.domain.gpus import canonical_gpu_model
from scalar.domain.offers import Offer
from scalar.domain.packing_model import MAX_CUDA_VERSIONS, Job, cuda_major_minor
from scalar.domain.reasons import Reason
from scalar.domain.tier import Tier
from scalar.engine.config import ControllerConfig, ScaleGroupConfig
from scalar.engine.events import JobSpec
from scalar.engine.groups import usable_offer


def _bad_number(value: object, *, whole: bool = False, positive: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    if whole and not isinstance(value, int):
        return True
    if not math.isfinite(value):
        return True
    return value <= 0 if positive else value < 0


def _spec_problems(spec: JobSpec) -> tuple[list[Reason], Tier | None]:
    problems: list[Reason] = []
    if not isinstance(spec.job_id, str) or not spec.job_id.strip():
        problems.append(Reason("invalid_job_id", "job_id must be a non-empty string", "job_id"))
    elif "#" in spec.job_id:
        problems.append(
            Reason(
                "invalid_job_id",
                f"job_id {spec.job_id!r} contains '#', which names the nodes of a gang",
                "job_id",
            )
        )
    tier: Tier | None = None
    try:
        tier = Tier.parse(spec.tier)
    except ValueError as err:
        problems.append(Reason("unknown_tier", str(err), "tier", have=str(spec.tier)))
    if isinstance(spec.gpu_count, int) and not isinstance(spec.gpu_count, bool) and spec.gpu_count < 0:
        problems.append(
            Reason(
                "negative_gpus",
                f"gpu_count must be >= 0, got {spec.gpu_count}",
                "gpu_count",
                have=spec.gpu_count,
            )
        )
    elif _bad_number(spec.gpu_count, whole=True):
        problems.append(
            Reason(
                "invalid_gpu_count",
                f"gpu_count must be a whole number >= 0, got {spec.gpu_count!r}",
                "gpu_count",
            )
        )
    for name in ("vram_per_gpu_gb", "cpu_cores", "ram_gb"):
        value = getattr(spec, name)
        if _bad_number(value):
            problems.append(
                Reason(f"invalid_{name}", f"{name} must be a finite number >= 0, got {value!r}", name)
            )
    if _bad_number(spec.expected_duration_sec, positive=True):
        problems.append(
            Reason(
                "invalid_expected_duration_sec",
                f"expected_duration_sec must be a number of seconds > 0, got {spec.expected_duration_sec!r}",
                "expected_duration_sec",
            )
        )
    if spec.checkpoint_interval_s is not None and _bad_number(spec.checkpoint_interval_s, positive=True):
        problems.append(
            Reason(
                "invalid_checkpoint_interval_s",
                f"checkpoint_interval_s must be a number of seconds > 0 (or unset: the job never "
                f"checkpoints), got {spec.checkpoint_interval_s!r}",
                "checkpoint_interval_s",
            )
        )
    if isinstance(spec.priority, bool) or not isinstance(spec.priority, int):
        problems.append(
            Reason("invalid_priority", f"priority must be a whole number, got {spec.priority!r}", "priority")
        )
    if spec.gpu_models is not None and (
        not spec.gpu_models or not all(isinstance(m, str) and m.strip() for m in spec.gpu_models)
    ):
        problems.append(
            Reason(
                "invalid_gpu_models",
                "gpu_models must list at least one non-empty model name, or be left out",
                "gpu_models",
            )
        )
    problems += _cuda_problems(spec.cuda_versions)
    if not isinstance(spec.restartable, bool):
        problems.append(
            Reason(
                "invalid_restartable",
                f"restartable must be true or false, got {spec.restartable!r}",
                "restartable",
            )
        )
    if not isinstance(spec.share_gpu, bool):
        problems.append(
            Reason(
                "invalid_share_gpu", f"share_gpu must be true or false, got {spec.share_gpu!r}", "share_gpu"
            )
        )
    if spec.submitted_at is not None and spec.submitted_at.utcoffset() is None:
        problems.append(
            Reason("invalid_submitted_at", "submitted_at must carry a time zone (UTC)", "submitted_at")
        )
    return problems, tier


def _cuda_problems(versions: object) -> list[Reason]:
    """``cuda_versions``: None, or 1 to 16 versions written MAJOR.MINOR ("12.4")."""
    if versions is None:
        return []
    fix = f'list 1 to {MAX_CUDA_VERSIONS} CUDA versions written MAJOR.MINOR (e.g. ["12.4", "12.8"]), or leave it out'
    if not isinstance(versions, tuple | list) or not versions or len(versions) > MAX_CUDA_VERSIONS:
        return [Reason("invalid_cuda_versions", f"cuda_versions: {fix}", "cuda_versions")]
    for i, version in enumerate(versions):
        if not isinstance(version, str) or version.count(".") != 1 or cuda_major_minor(version) is None:
            return [
                Reason(
                    "invalid_cuda_versions",
                    f"cuda_versions[{i}] {version!r} is not a CUDA version; {fix}",
                    "cuda_versions",
                )
            ]
    return []


def _config_for(offer: Offer, tier: Tier, config: ControllerConfig) -> ScaleGroupConfig | None:
    for group in config.scale_groups:
        if tier in group.tiers and group.matches(
            offer.provider, offer.instance_type, offer.gpu_model, offer.region, offer.spot
        ):
            return group
    return None


def _market_problems(
    spec: JobSpec, tier: Tier, config: ControllerConfig, offers: Sequence[Offer]
) -> list[Reason]:
    usable = [(o, g) for o in offers if usable_offer(o) and (g := _config_for(o, tier, config)) is not None]
    if not usable:
        return [
            Reason(
                "no_offer_for_tier",
                f"no offer on the market matches a {tier.value} scale group ({len(offers)} offers seen)",
                "offers",
                need=tier.value,
                have=0,
            )
        ]
    if spec.gpu_count == 0:
        return []
    if spec.gpu_models:
        allowed = {canonical_gpu_model(m) for m in spec.gpu_models}
        models = [(o, g) for o, g in usable if o.gpu_model and canonical_gpu_model(o.gpu_model) in allowed]
        if not models:
            on_offer = sorted({canonical_gpu_model(o.gpu_model) for o, _ in usable if o.gpu_model})
            return [
                Reason(
                    "gpu_model_not_offered",
                    f"none of the GPU models {', '.join(sorted(allowed))} is on offer "
                    f"(offered: {', '.join(on_offer) or 'none'})",
                    "gpu_models",
                    need=", ".join(sorted(allowed)),
                    have=", ".join(on_offer),
                )
            ]
        usable = models
    vram = float(spec.vram_per_gpu_gb)
    roomy = [(o, g) for o, g in usable if o.gpu_memory_gb >= vram]
    if not roomy:
        largest = max(o.gpu_memory_gb for o, _ in usable)
        return [
            Reason(
                "vram_too_large",
                f"needs {vram:g} GB VRAM per GPU; the largest GPU on offer has {largest:g} GB",
                "vram_per_gpu_gb",
                need=vram,
                have=largest,
            )
        ]
    problems: list[Reason] = []
    cpu, ram = float(spec.cpu_cores), float(spec.ram_gb)
    if all(0 < o.vcpu < cpu for o, _ in roomy):
        most = max(o.vcpu for o, _ in roomy)
        problems.append(
            Reason(
                "cpu_too_large",
                f"needs {cpu:g} CPU cores on a node; the largest offer has {most:g}",
                "cpu_cores",
                need=cpu,
                have=most,
            )
        )
    if all(0 < o.memory_gb < ram for o, _ in roomy):
        most = max(o.memory_gb for o, _ in roomy)
        problems.append(
            Reason(
                "ram_too_large",
                f"needs {ram:g} GB RAM on a node; the largest offer has {most:g} GB",
                "ram_gb",
                need=ram,
                have=most,
            )
        )
    capacity = max(int(o.gpu_count) * g.max_slices * g.slice_size for o, g in roomy)
    if spec.gpu_count > capacity:
        best = max(
            roomy, key=lambda og: (int(og[0].gpu_count) * og[1].max_slices * og[1].slice_size, og[0].key)
        )
        o, g = best
        problems.append(
            Reason(
                "too_large",
                f"needs {spec.gpu_count} GPUs; the most any offer or gang can hold is {capacity} "
                f"({g.max_slices * g.slice_size} nodes x {int(o.gpu_count)} GPUs of {o.instance_type} at "
                f"{o.provider}, scale group config {g.name!r} max_slices {g.max_slices} x slice_size {g.slice_size})",
                "gpu_count",
                need=spec.gpu_count,
                have=capacity,
            )
        )
    return problems


def validate_job_spec(
    spec: JobSpec, config: ControllerConfig, offers: Sequence[Offer] | None = None
) -> list[Reason]:
    """Every reason ``spec`` cannot be accepted; empty when it can. ``offers`` ``None``/empty skips the
    market checks (nothing is known about the market yet)."""
    problems, tier = _spec_problems(spec)
    if tier is not None and not any(tier in g.tiers for g in config.scale_groups):
        problems.append(
            Reason(
                "no_group_for_tier",
                f"no scale group is configured for tier {tier.value}",
                "tier",
                need=tier.value,
            )
        )
    if problems or tier is None or not offers:
        return problems
    return _market_problems(spec, tier, config, offers)


def job_from_spec(spec: JobSpec, submitted_at: datetime) -> Job:
    """The packer's ``Job`` for a valid spec; GPU model names canonical (``nvidia-h100`` -> ``H100``)."""
    models = None if spec.gpu_models is None else tuple(canonical_gpu_model(m) for m in spec.gpu_models)
    return Job(
        id=spec.job_id,
        tier=Tier.parse(spec.tier),
        gpu_count=spec.gpu_count,
        vram_per_gpu_gb=float(spec.vram_per_gpu_gb),
        cpu_cores=float(spec.cpu_cores),
        ram_gb=float(spec.ram_gb),
        expected_duration_sec=float(spec.expected_duration_sec),
        priority=spec.priority,
        gpu_models=models,
        share_gpu=spec.share_gpu,
        submitted_at=spec.submitted_at or submitted_at,
        cuda_versions=None if spec.cuda_versions is None else tuple(spec.cuda_versions),
        restartable=spec.restartable is True,
    )
