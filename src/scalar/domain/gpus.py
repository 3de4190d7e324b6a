"""GPU groups, CUDA versions and which GPUs an endpoint may use (seed 004).

A serverless endpoint does not name one GPU model: it names *groups* (``AMPERE_48``, ``HOPPER_141``...), each
a pool of interchangeable models with at least the group's memory. This module holds the groups, the models in
each (canonical names as in the published price catalogs, SkyPilot's accelerator names), the CUDA versions an
endpoint may allow, which architecture needs which CUDA version, and two selections: by model size and by
budget (prices are given, never fetched).

Corrections of the seed (see ``docs/seeds/004-endpoints.md``): ``ADA_80_PRO`` holds H100s, which are Hopper and
follow Hopper's CUDA rule; ``ADA_32_PRO`` holds the RTX 5090, which is Blackwell and needs CUDA 12.8;
``GpuGroup.all()`` lists ``AMPERE_48`` once (first), not twice.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum, StrEnum

from scalar.domain.errors import InvalidSpecError
from scalar.domain.money import to_decimal
from scalar.domain.reasons import Reason

# ---------------------------------------------------------------------------------------------- CUDA


class CudaVersion(Enum):
    """A CUDA version an endpoint may allow. Ordered numerically (12.10 would sort after 12.9)."""

    V11_8 = "11.8"
    V12_0 = "12.0"
    V12_1 = "12.1"
    V12_2 = "12.2"
    V12_3 = "12.3"
    V12_4 = "12.4"
    V12_5 = "12.5"
    V12_6 = "12.6"
    V12_7 = "12.7"
    V12_8 = "12.8"
    V12_9 = "12.9"
    V13_0 = "13.0"  # what NVML reports on a driver 580 host (e.g. an H200 with 580.159.04)
    V13_1 = "13.1"
    V13_2 = "13.2"

    @property
    def number(self) -> tuple[int, int]:
        major, minor = self.value.split(".")
        return int(major), int(minor)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, CudaVersion):
            return NotImplemented
        return self.number < other.number

    def __le__(self, other: object) -> bool:
        if not isinstance(other, CudaVersion):
            return NotImplemented
        return self.number <= other.number

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, CudaVersion):
            return NotImplemented
        return self.number > other.number

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, CudaVersion):
            return NotImplemented
        return self.number >= other.number

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str, field: str) -> CudaVersion:
        """``"12.4"`` -> ``V12_4``; anything else raises ``InvalidSpecError`` naming ``field``."""
        cleaned = text.strip()
        for version in cls:
            if version.value == cleaned or version.name == cleaned.upper():
                return version
        allowed = ", ".join(v.value for v in cls)
        raise InvalidSpecError(
            field,
            f"{text!r} is not a valid CudaVersion; use one of {allowed}",
            'write the version as major.minor, e.g. "12.4"',
        )


class Architecture(Enum):
    """A GPU architecture with the oldest CUDA version that supports it and the one recommended."""

    AMPERE = "Ampere"
    ADA = "Ada"
    HOPPER = "Hopper"
    BLACKWELL = "Blackwell"

    @property
    def min_cuda(self) -> CudaVersion:
        return _ARCH_CUDA[self][0]

    @property
    def recommended_cuda(self) -> CudaVersion:
        return _ARCH_CUDA[self][1]

    @property
    def rank(self) -> int:
        """Generation order, oldest first (Ampere 0 ... Blackwell 3)."""
        return list(Architecture).index(self)


# The seed's compatibility matrix (supported, recommended), plus Blackwell for the RTX 5090 the seed files under
# Ada: the first CUDA release that targets Blackwell's consumer chips is 12.8.
_ARCH_CUDA: dict[Architecture, tuple[CudaVersion, CudaVersion]] = {
    Architecture.AMPERE: (CudaVersion.V11_8, CudaVersion.V12_0),
    Architecture.ADA: (CudaVersion.V11_8, CudaVersion.V12_1),
    Architecture.HOPPER: (CudaVersion.V12_0, CudaVersion.V12_4),
    Architecture.BLACKWELL: (CudaVersion.V12_8, CudaVersion.V12_8),
}

# ---------------------------------------------------------------------------------------------- models


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One GPU model. ``name`` is canonical (SkyPilot's accelerator name), ``runpod_id`` RunPod's GPU type id,
    ``aliases`` other catalogs' spellings of the same chip (Prime Intellect's ``A6000``...)."""

    name: str
    runpod_id: str
    memory_gb: int
    architecture: Architecture
    aliases: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, self.runpod_id, *self.aliases)


_A, _ADA, _H, _B = Architecture.AMPERE, Architecture.ADA, Architecture.HOPPER, Architecture.BLACKWELL
RTX4090 = GpuModel("RTX4090", "NVIDIA GeForce RTX 4090", 24, _ADA)
RTX5090 = GpuModel("RTX5090", "NVIDIA GeForce RTX 5090", 32, _B)
RTX6000_ADA = GpuModel("RTX6000-Ada", "NVIDIA RTX 6000 Ada Generation", 48, _ADA, ("RTX6000Ada",))
L40 = GpuModel("L40", "NVIDIA L40", 48, _ADA)
L40S = GpuModel("L40S", "NVIDIA L40S", 48, _ADA)
H100 = GpuModel("H100", "NVIDIA H100 PCIe", 80, _H)
H100_SXM = GpuModel("H100-SXM", "NVIDIA H100 80GB HBM3", 80, _H)
H100_NVL = GpuModel("H100-NVL", "NVIDIA H100 NVL", 94, _H)
RTXA4000 = GpuModel("RTXA4000", "NVIDIA RTX A4000", 16, _A, ("A4000",))
RTXA4500 = GpuModel("RTXA4500", "NVIDIA RTX A4500", 20, _A)
RTX4000_ADA = GpuModel("RTX4000-Ada", "NVIDIA RTX 4000 Ada Generation", 20, _ADA)
RTX2000_ADA = GpuModel("RTX2000-Ada", "NVIDIA RTX 2000 Ada Generation", 16, _ADA)
RTXA5000 = GpuModel("RTXA5000", "NVIDIA RTX A5000", 24, _A)
L4 = GpuModel("L4", "NVIDIA L4", 24, _ADA)
RTX3090 = GpuModel("RTX3090", "NVIDIA GeForce RTX 3090", 24, _A)
A40 = GpuModel("A40", "NVIDIA A40", 48, _A)
RTXA6000 = GpuModel("RTXA6000", "NVIDIA RTX A6000", 48, _A, ("A6000",))
A100_80GB = GpuModel("A100-80GB", "NVIDIA A100 80GB PCIe", 80, _A)
A100_80GB_SXM = GpuModel("A100-80GB-SXM", "NVIDIA A100-SXM4-80GB", 80, _A)
H200 = GpuModel("H200", "NVIDIA H200", 141, _H, ("H200-SXM",))

# ---------------------------------------------------------------------------------------------- groups


class GpuGroup(StrEnum):
    """A pool of GPU models an endpoint may run on (the seed's names and values; ``ANY`` is ``"any"``)."""

    ANY = "any"
    ADA_24 = "ADA_24"
    ADA_32_PRO = "ADA_32_PRO"
    ADA_48_PRO = "ADA_48_PRO"
    ADA_80_PRO = "ADA_80_PRO"
    AMPERE_16 = "AMPERE_16"
    AMPERE_24 = "AMPERE_24"
    AMPERE_48 = "AMPERE_48"
    AMPERE_80 = "AMPERE_80"
    HOPPER_141 = "HOPPER_141"

    @classmethod
    def all(cls) -> list[GpuGroup]:
        """Every group except ``ANY``, each once, ``AMPERE_48`` (A40s) first as the seed intends."""
        return [cls.AMPERE_48] + [g for g in cls if g not in (cls.ANY, cls.AMPERE_48)]

    @classmethod
    def parse(cls, text: str, field: str) -> GpuGroup:
        """``"AMPERE_48"`` (any case) or ``"any"``; otherwise ``InvalidSpecError`` naming ``field``.

        A GPU model name gets a hint naming its group ("'H100' is a GPU model in ADA_80_PRO").
        """
        cleaned = text.strip()
        for group in cls:
            if cleaned.upper() == group.name:
                return group
        choices = ", ".join([cls.ANY.value, *(g.value for g in cls.all())])
        owner = group_of_model(cleaned)
        hint = (
            f"{cleaned!r} is a GPU model in {owner.value}: write {owner.value}"
            if owner is not None
            else "group names are <ARCHITECTURE>_<MEMORY_GB>, e.g. AMPERE_48"
        )
        raise InvalidSpecError(field, f"{text!r} is not a valid GpuGroup; use one of {choices}", hint)

    @property
    def models(self) -> tuple[GpuModel, ...]:
        return _GROUP_MODELS[self]

    @property
    def memory_gb(self) -> int:
        """The memory every model of the group has at least (0 for ``ANY``)."""
        return min((m.memory_gb for m in self.models), default=0)

    @property
    def architectures(self) -> tuple[Architecture, ...]:
        """Distinct architectures of the group's models, oldest first."""
        return tuple(sorted({m.architecture for m in self.models}, key=lambda a: a.rank))

    @property
    def architecture(self) -> Architecture:
        """The architecture that sets the group's CUDA rule (the newest one among its models)."""
        if self is GpuGroup.ANY:
            raise ValueError("ANY is not one architecture; expand it with GpuGroup.all()")
        return self.architectures[-1]

    @property
    def min_cuda(self) -> CudaVersion:
        return max(m.architecture.min_cuda for m in self.models)

    @property
    def recommended_cuda(self) -> CudaVersion:
        return max(m.architecture.recommended_cuda for m in self.models)

    @property
    def model_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models)

    def supports(self, version: CudaVersion) -> bool:
        return version >= self.min_cuda


_GROUP_MODELS: dict[GpuGroup, tuple[GpuModel, ...]] = {
    GpuGroup.ANY: (),
    GpuGroup.ADA_24: (RTX4090,),
    GpuGroup.ADA_32_PRO: (RTX5090,),
    GpuGroup.ADA_48_PRO: (RTX6000_ADA, L40, L40S),
    GpuGroup.ADA_80_PRO: (H100, H100_SXM, H100_NVL),
    GpuGroup.AMPERE_16: (RTXA4000, RTXA4500, RTX4000_ADA, RTX2000_ADA),
    GpuGroup.AMPERE_24: (RTXA5000, L4, RTX3090),
    GpuGroup.AMPERE_48: (A40, RTXA6000),
    GpuGroup.AMPERE_80: (A100_80GB, A100_80GB_SXM),
    GpuGroup.HOPPER_141: (H200,),
}

_MODEL_INDEX: dict[str, tuple[GpuModel, GpuGroup]] = {
    name.upper(): (model, group)
    for group, models in _GROUP_MODELS.items()
    for model in models
    for name in model.names
}


def find_model(name: str) -> tuple[GpuModel, GpuGroup] | None:
    """The model called ``name`` (canonical, RunPod id or alias, any case) and its group, or ``None``."""
    return _MODEL_INDEX.get(name.strip().upper())


def group_of_model(name: str) -> GpuGroup | None:
    found = find_model(name)
    return None if found is None else found[1]


# ---------------------------------------------------------------------------------------------- wire lists


def split_csv(text: str) -> list[str]:
    """Items of an API comma string, tolerating spaces and empty items (``"A, ,B,"`` -> ``["A", "B"]``)."""
    return [item.strip() for item in text.split(",") if item.strip()]


def format_gpu_ids(groups: Iterable[GpuGroup]) -> str:
    """The API's ``gpuIds``: group values joined by commas."""
    return ",".join(g.value for g in groups)


def parse_gpu_ids(text: str, field: str = "gpuIds") -> list[GpuGroup]:
    """Inverse of :func:`format_gpu_ids`; errors name ``gpuIds[i]`` (i counts the non-empty items)."""
    return [GpuGroup.parse(item, f"{field}[{i}]") for i, item in enumerate(split_csv(text))]


def format_cuda_versions(versions: Iterable[CudaVersion]) -> str:
    """The API's ``allowedCudaVersions``: ``"12.1,11.8"``."""
    return ",".join(v.value for v in versions)


def parse_cuda_versions(text: str, field: str = "allowedCudaVersions") -> list[CudaVersion]:
    return [CudaVersion.parse(item, f"{field}[{i}]") for i, item in enumerate(split_csv(text))]


# ---------------------------------------------------------------------------------------------- CUDA rules


def usable_cuda_versions(group: GpuGroup, allowed: Sequence[CudaVersion]) -> tuple[CudaVersion, ...]:
    """The allowed versions the group's GPUs can run (every version when ``allowed`` is empty)."""
    if not allowed:
        return tuple(v for v in CudaVersion if group.supports(v))
    return tuple(v for v in allowed if group.supports(v))


def cuda_incompatibility(group: GpuGroup, allowed: Sequence[CudaVersion]) -> str | None:
    """Why no allowed CUDA version can run ``group`` (``None`` when one can, or when all are allowed).

    "CUDA 11.8 is too old for HOPPER_141 (Hopper needs 12.0+)": the newest allowed version is named.
    """
    if not allowed or usable_cuda_versions(group, allowed):
        return None
    arch = group.architecture
    newest = max(allowed)
    text = f"CUDA {newest} is too old for {group.value} ({arch.value} needs {group.min_cuda}+)"
    if not group.name.startswith(arch.name):
        text += f"; {group.value} holds {arch.value} GPUs: {', '.join(group.model_names)}"
    return text


# ---------------------------------------------------------------------------------------------- selection

DEFAULT_HEADROOM = 1.2


@dataclass(frozen=True, slots=True)
class GroupChoice:
    """A group a selection kept, ordered by the selection's preference, with the numbers behind it."""

    group: GpuGroup
    memory_gb: int
    price_per_gpu_hour: Decimal | None = None
    price_per_worker_hour: Decimal | None = None
    cheapest_model: str | None = None


@dataclass(frozen=True, slots=True)
class GpuSelection:
    """The kept groups (best first) and a reason for every group left out."""

    chosen: tuple[GroupChoice, ...]
    rejected: tuple[Reason, ...]

    @property
    def groups(self) -> list[GpuGroup]:
        return [c.group for c in self.chosen]


def _positive_int(value: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidSpecError(field, f"must be a whole number >= 1, got {value!r}")
    return value


def fit_gpu_groups_for_model(
    model_gb: float, *, headroom: float = DEFAULT_HEADROOM, gpu_count: int = 1
) -> GpuSelection:
    """Groups whose memory holds ``model_gb`` x ``headroom`` across ``gpu_count`` GPUs, tightest fit first.

    ``headroom`` (default 1.2: 20% for the CUDA context, activations and KV cache) multiplies the weights'
    size. Groups with equal memory are ordered by their oldest architecture first (usually the cheaper one:
    AMPERE_24 before ADA_24, AMPERE_80 before ADA_80_PRO, as the seed lists them), then in ``GpuGroup.all()``
    order.
    """
    if isinstance(model_gb, bool) or not math.isfinite(model_gb) or model_gb <= 0:
        raise InvalidSpecError("model_gb", f"must be a positive number of GB, got {model_gb!r}")
    if isinstance(headroom, bool) or not math.isfinite(headroom) or headroom < 1:
        raise InvalidSpecError("headroom", f"must be a factor >= 1.0, got {headroom!r}")
    _positive_int(gpu_count, "gpu_count")
    need_gb = model_gb * headroom
    order = GpuGroup.all()
    ranked = sorted(order, key=lambda g: (g.memory_gb, g.architectures[0].rank, order.index(g)))
    chosen: list[GroupChoice] = []
    rejected: list[Reason] = []
    for group in ranked:
        have_gb = group.memory_gb * gpu_count
        if have_gb >= need_gb:
            chosen.append(GroupChoice(group, group.memory_gb))
            continue
        rejected.append(
            Reason(
                "insufficient_gpu_memory",
                f"{group.value}: a {model_gb:g} GB model needs {need_gb:g} GB with {headroom:g}x headroom, "
                f"{gpu_count} x {group.memory_gb} GB GPUs have {have_gb} GB",
                resource=group.value,
                need=round(need_gb, 3),
                have=have_gb,
            )
        )
    return GpuSelection(tuple(chosen), tuple(rejected))


def select_gpu_for_model_size(
    model_gb: float, *, headroom: float = DEFAULT_HEADROOM, gpu_count: int = 1
) -> list[GpuGroup]:
    """The seed's call: groups that can hold the model, tightest fit first (see :func:`fit_gpu_groups_for_model`).

    Unlike the seed's bands, a model bigger than 80 GB gets only groups that hold it (HOPPER_141), and a model
    of 17-24 GB is not pushed to 48 GB groups when 24 GB or 32 GB ones hold it with the headroom.
    """
    return fit_gpu_groups_for_model(model_gb, headroom=headroom, gpu_count=gpu_count).groups


PriceMap = Mapping[GpuGroup, Decimal] | Mapping[str, Decimal] | Mapping[GpuGroup | str, Decimal]


def _group_prices(prices: PriceMap) -> tuple[dict[GpuGroup, tuple[Decimal, str | None]], list[Reason]]:
    """Cheapest price per group: a group key prices the whole group, a model key (canonical name, RunPod id
    or alias) prices that model. Keys that name no known model are reported, not guessed."""
    best: dict[GpuGroup, tuple[Decimal, str | None]] = {}
    unknown: list[Reason] = []
    for key, raw in prices.items():
        field = f"prices[{key}]"
        try:
            price = to_decimal(raw)
        except (TypeError, ArithmeticError):
            raise InvalidSpecError(field, f"is not a price, got {raw!r}") from None
        if not price.is_finite() or price < 0:
            raise InvalidSpecError(field, f"must be a price >= 0 in USD per GPU-hour, got {raw!r}")
        group: GpuGroup | None
        model: str | None = None
        if isinstance(key, GpuGroup):
            group = key
        elif key.strip().upper() in GpuGroup.__members__:
            group = GpuGroup[key.strip().upper()]
        else:
            found = find_model(key)
            group = None if found is None else found[1]
            model = None if found is None else found[0].name
        if group is GpuGroup.ANY:
            raise InvalidSpecError(field, "ANY has no price of its own", "price each group or GPU model")
        if group is None:
            unknown.append(
                Reason("unknown_gpu", f"{key!r} is not a GPU model of any group; its price is ignored", key)
            )
            continue
        if group not in best or price < best[group][0]:
            best[group] = (price, model)
    return best, unknown


def rank_gpu_groups_for_budget(
    budget_per_hour: Decimal | int | float | str, prices: PriceMap, *, gpu_count: int = 1
) -> GpuSelection:
    """Groups whose cheapest price for one worker (``gpu_count`` GPUs) is within ``budget_per_hour``,
    cheapest first (ties in ``GpuGroup.all()`` order). ``prices`` are USD per GPU-hour, given, not fetched."""
    try:
        budget = to_decimal(budget_per_hour)
    except (TypeError, ArithmeticError):
        raise InvalidSpecError("budget_per_hour", f"is not an amount, got {budget_per_hour!r}") from None
    if not budget.is_finite() or budget < 0:
        raise InvalidSpecError("budget_per_hour", f"must be >= 0 USD per hour, got {budget_per_hour!r}")
    _positive_int(gpu_count, "gpu_count")
    best, rejected = _group_prices(prices)
    order = GpuGroup.all()
    within: list[GroupChoice] = []
    for group in order:
        if group not in best:
            rejected.append(Reason("no_price", f"{group.value}: no price given", group.value))
            continue
        per_gpu, model = best[group]
        per_worker = per_gpu * gpu_count
        if per_worker <= budget:
            within.append(GroupChoice(group, group.memory_gb, per_gpu, per_worker, model))
            continue
        rejected.append(
            Reason(
                "over_budget",
                f"{group.value}: {gpu_count} GPU(s) cost ${per_worker}/h at best, over the ${budget}/h budget",
                resource=group.value,
                need=str(per_worker),
                limit=str(budget),
            )
        )
    within.sort(key=lambda c: (c.price_per_worker_hour, order.index(c.group)))
    return GpuSelection(tuple(within), tuple(rejected))


def select_gpu_for_budget(
    budget_per_hour: Decimal | int | float | str, prices: PriceMap, *, gpu_count: int = 1
) -> list[GpuGroup]:
    """The seed's call (left unimplemented there): groups within budget, cheapest first."""
    return rank_gpu_groups_for_budget(budget_per_hour, prices, gpu_count=gpu_count).groups
