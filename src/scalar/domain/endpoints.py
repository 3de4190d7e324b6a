"""Serverless endpoint specs (seed 004): which GPUs an endpoint may use, its CUDA versions and its scaling.

``ServerlessEndpoint.create(...)`` is the one way in from user input: it parses, fills the seed's defaults,
keeps the developer fields (``gpus``, ``cudaVersions``) and the API fields (``gpuIds``,
``allowedCudaVersions``) in step, expands ``ANY`` and checks every rule, raising ``InvalidSpecError`` that
names the bad field with the seed's own field names (``cudaVersions[0]``, ``workersMin``...). The result is
frozen; constructing one directly checks the same invariants.

Choices where the seed is silent or wrong (``docs/seeds/004-endpoints.md``):

* ``None`` means "use the default"; ``0`` is a real value (``workersMin: 0``, ``idleTimeout: 0``).
* ``gpus`` and ``gpuIds`` given together must name the same groups in the same order (after expanding
  ``ANY``); ``cudaVersions`` and ``allowedCudaVersions`` must allow the same versions. A disagreement is an
  error, where the seed would silently let the developer field win. A repeated item in an API string
  (the seed's ``all()`` sends AMPERE_48 twice) keeps its first occurrence, with a note.
* ``ANY`` expands in place to every group not listed explicitly, in ``GpuGroup.all()`` order, leaving out the
  groups no allowed CUDA version can run (noted in ``notes``); an explicitly listed group no allowed CUDA
  version can run is an error.
* A live endpoint always runs :data:`LIVE_GPU_IMAGE`; asking for another image is an error (the seed's setter
  silently ignores it).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, Self, TypeVar

from scalar.domain.errors import InvalidSpecError
from scalar.domain.gpus import (
    CudaVersion,
    GpuGroup,
    cuda_incompatibility,
    format_cuda_versions,
    format_gpu_ids,
    parse_cuda_versions,
    parse_gpu_ids,
    split_csv,
    usable_cuda_versions,
)
from scalar.domain.reasons import Reason

T = TypeVar("T")
E = TypeVar("E", GpuGroup, CudaVersion)

LIVE_GPU_IMAGE = "scalar/live-gpu:latest"
"""The image every live endpoint runs: Scalar's GPU runtime that executes code shipped at request time."""

DEFAULT_WORKERS_MAX = 3
DEFAULT_WORKERS_MIN = 0
DEFAULT_SCALER_VALUE = 4
DEFAULT_GPU_COUNT = 1
DEFAULT_IDLE_TIMEOUT_S = 5
DEFAULT_EXECUTION_TIMEOUT_MS = 0  # 0: no limit of the endpoint's own (the provider's default applies)

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class ServerlessScalerType(StrEnum):
    """How workers scale: on seconds of queue delay, or on requests per worker."""

    QUEUE_DELAY = "QUEUE_DELAY"
    REQUEST_COUNT = "REQUEST_COUNT"

    @classmethod
    def parse(cls, text: str, field: str = "scalerType") -> ServerlessScalerType:
        cleaned = text.strip().upper()
        if cleaned in cls.__members__:
            return cls[cleaned]
        allowed = ", ".join(s.value for s in cls)
        raise InvalidSpecError(field, f"{text!r} is not a valid ServerlessScalerType; use one of {allowed}")


class EndpointKind(StrEnum):
    SERVERLESS = "serverless"
    LIVE = "live"


# ---------------------------------------------------------------------------------------------- checks


def _check_int(value: object, field: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpecError(field, f"must be a whole number, got {value!r}")
    if value < minimum:
        raise InvalidSpecError(field, f"must be >= {minimum}, got {value}")


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name.strip():
        raise InvalidSpecError("name", "is required", 'give the endpoint a name, e.g. "gpu-inference"')
    if NAME_PATTERN.fullmatch(name) is None:
        raise InvalidSpecError(
            "name",
            f"{name!r} is not a valid endpoint name",
            "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )


def _check_image(image: object, kind: EndpointKind) -> None:
    if kind is EndpointKind.LIVE:
        if image != LIVE_GPU_IMAGE:
            raise InvalidSpecError(
                "imageName",
                f"a live endpoint always runs {LIVE_GPU_IMAGE}, not {image!r}",
                f'remove imageName (or set it to "{LIVE_GPU_IMAGE}"), or use kind "serverless" for your image',
            )
        return
    if not isinstance(image, str) or not image.strip():
        raise InvalidSpecError(
            "imageName",
            "is required for a serverless endpoint",
            'set imageName to your container image, or use kind "live" for the managed live image',
        )
    if any(ch.isspace() for ch in image):
        raise InvalidSpecError("imageName", f"{image!r} contains whitespace; an image reference has none")


def _check_unique(items: Sequence[object], field: str) -> None:
    seen: dict[object, int] = {}
    for i, item in enumerate(items):
        if item in seen:
            shown = getattr(item, "value", item)
            raise InvalidSpecError(
                f"{field}[{i}]", f"{shown} is listed twice (also at {field}[{seen[item]}])", "list it once"
            )
        seen[item] = i


def _check_cuda(groups: Sequence[GpuGroup], versions: Sequence[CudaVersion], field: str) -> None:
    """Every group needs at least one allowed CUDA version its GPUs can run (see the module's docstring)."""
    if not versions:
        return
    failing = [(g, text) for g in groups if (text := cuda_incompatibility(g, versions)) is not None]
    if not failing:
        return
    group, text = failing[0]
    newest = max(versions)
    others = [g.value for g, _ in failing[1:]]
    if others:
        text += f" (also too old for {', '.join(others)})"
    raise InvalidSpecError(
        f"{field}[{list(versions).index(newest)}]",
        text,
        f"allow CUDA {group.min_cuda} or newer ({group.recommended_cuda}+ recommended), "
        f"or remove {group.value} from gpus",
    )


# ---------------------------------------------------------------------------------------------- specs


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerlessEndpoint:
    """A serverless endpoint: a request queue whose workers each get ``gpu_count`` GPUs from ``gpus``.

    ``gpus`` is the preference order (ANY already expanded); ``cuda_versions`` empty means any version.
    ``notes`` are what normalizing the input decided that a user should know (not part of equality).
    """

    KIND: ClassVar[EndpointKind] = EndpointKind.SERVERLESS

    name: str
    image_name: str
    gpus: tuple[GpuGroup, ...] = tuple(GpuGroup.all())
    cuda_versions: tuple[CudaVersion, ...] = ()
    workers_min: int = DEFAULT_WORKERS_MIN
    workers_max: int = DEFAULT_WORKERS_MAX
    scaler_type: ServerlessScalerType = ServerlessScalerType.QUEUE_DELAY
    scaler_value: int = DEFAULT_SCALER_VALUE
    gpu_count: int = DEFAULT_GPU_COUNT
    idle_timeout_s: int = DEFAULT_IDLE_TIMEOUT_S
    execution_timeout_ms: int = DEFAULT_EXECUTION_TIMEOUT_MS
    locations: tuple[str, ...] = ()
    notes: tuple[Reason, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        _check_spec(self)

    @property
    def kind(self) -> EndpointKind:
        return self.KIND

    @property
    def gpu_ids(self) -> str:
        """The API's ``gpuIds`` (``"AMPERE_48,ADA_24"``)."""
        return format_gpu_ids(self.gpus)

    @property
    def allowed_cuda_versions(self) -> str:
        """The API's ``allowedCudaVersions`` (``"12.1,11.8"``; empty: any version)."""
        return format_cuda_versions(self.cuda_versions)

    def cuda_versions_for(self, group: GpuGroup) -> tuple[CudaVersion, ...]:
        """The allowed CUDA versions ``group``'s workers can run."""
        return usable_cuda_versions(group, self.cuda_versions)

    @classmethod
    def create(
        cls,
        *,
        name: str | None = None,
        image_name: str | None = None,
        gpus: Sequence[GpuGroup | str] | None = None,
        gpu_ids: str | None = None,
        cuda_versions: Sequence[CudaVersion | str] | None = None,
        allowed_cuda_versions: str | None = None,
        workers_min: int | None = None,
        workers_max: int | None = None,
        scaler_type: ServerlessScalerType | str | None = None,
        scaler_value: int | None = None,
        gpu_count: int | None = None,
        idle_timeout_s: int | None = None,
        execution_timeout_ms: int | None = None,
        locations: str | Sequence[str] | None = None,
    ) -> Self:
        """Validate and normalize user input (developer fields, API fields or both) into a spec.

        ``None`` leaves a field at its default. Raises ``InvalidSpecError`` naming the first bad field.
        """
        _check_name(name)
        image = _resolve_image(image_name, cls.KIND)
        versions, cuda_field, notes = _resolve_cuda(cuda_versions, allowed_cuda_versions)
        groups, gpu_notes = _resolve_gpus(gpus, gpu_ids, versions, cuda_field)
        notes += gpu_notes + _cuda_notes(groups, versions)
        if isinstance(scaler_type, str):
            scaler_type = ServerlessScalerType.parse(scaler_type)
        if workers_max is None and workers_min is not None:
            _check_int(workers_min, "workersMin", 0)
            if workers_min > DEFAULT_WORKERS_MAX:
                raise InvalidSpecError(
                    "workersMin",
                    f"{workers_min} is more than workersMax {DEFAULT_WORKERS_MAX} (the default)",
                    f"set workersMax to at least {workers_min}",
                )
        return cls(
            name=name if name is not None else "",
            image_name=image,
            gpus=tuple(groups),
            cuda_versions=tuple(versions),
            workers_min=_or(workers_min, DEFAULT_WORKERS_MIN),
            workers_max=_or(workers_max, DEFAULT_WORKERS_MAX),
            scaler_type=_or(scaler_type, ServerlessScalerType.QUEUE_DELAY),
            scaler_value=_or(scaler_value, DEFAULT_SCALER_VALUE),
            gpu_count=_or(gpu_count, DEFAULT_GPU_COUNT),
            idle_timeout_s=_or(idle_timeout_s, DEFAULT_IDLE_TIMEOUT_S),
            execution_timeout_ms=_or(execution_timeout_ms, DEFAULT_EXECUTION_TIMEOUT_MS),
            locations=_resolve_locations(locations),
            notes=tuple(notes),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveServerless(ServerlessEndpoint):
    """A live endpoint: code is shipped at request time to workers that always run :data:`LIVE_GPU_IMAGE`."""

    KIND: ClassVar[EndpointKind] = EndpointKind.LIVE

    image_name: str = LIVE_GPU_IMAGE


def fleet_cuda_versions(allowed: Sequence[CudaVersion]) -> tuple[CudaVersion, ...]:
    """The CUDA versions a worker accepts on Scalar's own fleet: every known version at or above the
    lowest one the spec allows (a driver runs applications built for an older CUDA, so an endpoint listing
    12.x versions gets workers on a driver reporting 13.0). Empty (any version) stays empty. RunPod keeps
    the spec's exact list (``allowedCudaVersions``); see docs/seed-discrepancies.md."""
    if not allowed:
        return ()
    lowest = min(allowed)
    return tuple(v for v in sorted(CudaVersion) if v >= lowest)


def endpoint_class(kind: EndpointKind | str) -> type[ServerlessEndpoint]:
    """``"serverless"`` -> :class:`ServerlessEndpoint`, ``"live"`` -> :class:`LiveServerless`."""
    try:
        parsed = EndpointKind(kind.strip().lower()) if isinstance(kind, str) else kind
    except ValueError:
        allowed = ", ".join(k.value for k in EndpointKind)
        raise InvalidSpecError("kind", f"{kind!r} is not an endpoint kind; use one of {allowed}") from None
    return LiveServerless if parsed is EndpointKind.LIVE else ServerlessEndpoint


def fallback_order(spec: ServerlessEndpoint, available: Collection[GpuGroup]) -> list[GpuGroup]:
    """The spec's groups that are available now, in the spec's preference order.

    "If H200 unavailable, falls back to H100, then A100": ``gpus`` order is the preference order.
    """
    return [g for g in spec.gpus if g in available]


# ---------------------------------------------------------------------------------------------- helpers


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


def _check_spec(spec: ServerlessEndpoint) -> None:
    _check_name(spec.name)
    _check_image(spec.image_name, spec.KIND)
    if not spec.gpus:
        raise InvalidSpecError("gpus", "is empty", "list at least one GPU group, or leave gpus out for ANY")
    for i, group in enumerate(spec.gpus):
        if not isinstance(group, GpuGroup):
            raise InvalidSpecError(f"gpus[{i}]", f"{group!r} is not a GpuGroup")
        if group is GpuGroup.ANY:
            raise InvalidSpecError(f"gpus[{i}]", "ANY must be expanded", "build specs with create()")
    _check_unique(spec.gpus, "gpus")
    for i, version in enumerate(spec.cuda_versions):
        if not isinstance(version, CudaVersion):
            raise InvalidSpecError(f"cudaVersions[{i}]", f"{version!r} is not a CudaVersion")
    _check_unique(spec.cuda_versions, "cudaVersions")
    _check_cuda(spec.gpus, spec.cuda_versions, "cudaVersions")
    _check_int(spec.workers_min, "workersMin", 0)
    _check_int(spec.workers_max, "workersMax", 0)
    if spec.workers_min > spec.workers_max:
        raise InvalidSpecError(
            "workersMin",
            f"{spec.workers_min} is more than workersMax {spec.workers_max}",
            "lower workersMin or raise workersMax",
        )
    if not isinstance(spec.scaler_type, ServerlessScalerType):
        raise InvalidSpecError("scalerType", f"{spec.scaler_type!r} is not a ServerlessScalerType")
    _check_int(spec.scaler_value, "scalerValue", 1)
    _check_int(spec.gpu_count, "gpuCount", 1)
    _check_int(spec.idle_timeout_s, "idleTimeout", 0)
    _check_int(spec.execution_timeout_ms, "executionTimeoutMs", 0)
    for i, location in enumerate(spec.locations):
        if not isinstance(location, str) or not location.strip() or location != location.strip():
            raise InvalidSpecError(f"locations[{i}]", f"{location!r} is not a location id, e.g. EU-RO-1")


def _resolve_image(image_name: str | None, kind: EndpointKind) -> str:
    if kind is EndpointKind.LIVE and image_name is None:
        return LIVE_GPU_IMAGE
    _check_image(image_name, kind)
    return image_name if image_name is not None else ""


def _resolve_cuda(
    developer: Sequence[CudaVersion | str] | None, api: str | None
) -> tuple[list[CudaVersion], str, list[Reason]]:
    """The allowed versions and the field they came from. An empty list or string means any version."""
    if developer is not None and isinstance(developer, str):
        raise InvalidSpecError("cudaVersions", "must be a list", 'write ["12.4"], or use allowedCudaVersions')
    dev = [
        v if isinstance(v, CudaVersion) else CudaVersion.parse(str(v), f"cudaVersions[{i}]")
        for i, v in enumerate(developer or ())
    ]
    _check_unique(dev, "cudaVersions")
    from_api, notes = _dedupe_api(parse_cuda_versions(api) if api is not None else [], "allowedCudaVersions")
    if dev and from_api and set(dev) != set(from_api):
        raise InvalidSpecError(
            "allowedCudaVersions",
            f"{format_cuda_versions(from_api)!r} disagrees with cudaVersions {format_cuda_versions(dev)!r}",
            "give only one of cudaVersions and allowedCudaVersions, or make them allow the same versions",
        )
    if dev:
        return dev, "cudaVersions", notes
    return from_api, "allowedCudaVersions", notes


def _expand(
    raw: Sequence[GpuGroup], versions: Sequence[CudaVersion], cuda_field: str
) -> tuple[list[GpuGroup], list[Reason]]:
    """Expand ANY in place to the groups not listed explicitly that an allowed CUDA version can run."""
    explicit = [g for g in raw if g is not GpuGroup.ANY]
    _check_cuda(explicit, versions, cuda_field)
    out: list[GpuGroup] = []
    notes: list[Reason] = []
    for group in raw:
        if group is not GpuGroup.ANY:
            out.append(group)
            continue
        rest = [g for g in GpuGroup.all() if g not in explicit]
        kept = [g for g in rest if cuda_incompatibility(g, versions) is None]
        left_out = [g.value for g in rest if g not in kept]
        out.extend(kept)
        if left_out:
            notes.append(
                Reason(
                    "any_excludes_group",
                    f"ANY leaves out {', '.join(left_out)}: no allowed CUDA version "
                    f"({format_cuda_versions(versions)}) runs their GPUs",
                    resource="gpus",
                    have=format_cuda_versions(versions),
                )
            )
    if not out:
        raise InvalidSpecError(cuda_field, "no GPU group can run any of the allowed CUDA versions")
    return out, notes


def _resolve_gpus(
    developer: Sequence[GpuGroup | str] | None,
    api: str | None,
    versions: Sequence[CudaVersion],
    cuda_field: str,
) -> tuple[list[GpuGroup], list[Reason]]:
    if developer is not None and isinstance(developer, str):
        raise InvalidSpecError("gpus", "must be a list", 'write ["AMPERE_48"], or use gpuIds')
    if developer is not None and len(developer) == 0:
        raise InvalidSpecError("gpus", "is empty", "list at least one GPU group, or leave gpus out for ANY")
    dev = [
        g if isinstance(g, GpuGroup) else GpuGroup.parse(str(g), f"gpus[{i}]")
        for i, g in enumerate(developer or ())
    ]
    _check_unique(dev, "gpus")
    from_api, dedupe_notes = _dedupe_api(parse_gpu_ids(api) if api is not None else [], "gpuIds")
    if dev and from_api:
        dev_groups, notes = _expand(dev, versions, cuda_field)
        api_groups, _ = _expand(from_api, versions, cuda_field)
        if dev_groups != api_groups:
            raise InvalidSpecError(
                "gpuIds",
                f"{format_gpu_ids(from_api)!r} disagrees with gpus {format_gpu_ids(dev)!r}",
                "give only one of gpus and gpuIds, or make them list the same groups in the same order",
            )
        return dev_groups, dedupe_notes + notes
    groups, notes = _expand(dev or from_api or [GpuGroup.ANY], versions, cuda_field)
    return groups, dedupe_notes + notes


def _dedupe_api(items: list[E], field: str) -> tuple[list[E], list[Reason]]:
    """API strings may repeat an item (the seed's ``all()`` sends AMPERE_48 twice): keep the first, say so."""
    kept: list[E] = []
    repeated: list[str] = []
    for item in items:
        if item in kept:
            repeated.append(str(item))
        else:
            kept.append(item)
    if not repeated:
        return kept, []
    note = Reason(
        "duplicate_api_item",
        f"{field} repeats {', '.join(repeated)}; the first occurrence is kept",
        resource=field,
    )
    return kept, [note]


def _cuda_notes(groups: Sequence[GpuGroup], versions: Sequence[CudaVersion]) -> list[Reason]:
    """Allowed versions some chosen groups cannot run: valid (other groups use them), but worth saying."""
    notes: list[Reason] = []
    for group in groups:
        unusable = [v for v in versions if not group.supports(v)]
        if not unusable:
            continue
        usable = format_cuda_versions(usable_cuda_versions(group, versions))
        notes.append(
            Reason(
                "cuda_version_unusable",
                f"{group.value} cannot run CUDA {format_cuda_versions(unusable)} "
                f"({group.architecture.value} needs {group.min_cuda}+): its workers use {usable} only",
                resource=group.value,
                need=group.min_cuda.value,
                have=format_cuda_versions(unusable),
            )
        )
    return notes


def _resolve_locations(locations: str | Sequence[str] | None) -> tuple[str, ...]:
    if locations is None:
        return ()
    if isinstance(locations, str):
        return tuple(split_csv(locations))
    return tuple(loc.strip() if isinstance(loc, str) else loc for loc in locations)
