"""GPU models: the one registry of their names, memory, architecture and speed; and the endpoint GPU groups.

**Models.** Every GPU Scalar knows is one :class:`GpuModel` with a canonical name (the name the published
price catalogs and the built-in market use: SkyPilot's accelerator names, ``H100``, ``A100-80GB``), its
memory in GB as the market sells it (80 for an H100, 141 for an H200), its architecture, and every other
spelling of the same chip: other catalogs' (Prime Intellect's ``A6000``), form factors (``H100-SXM``,
``A100-80GB-SXM``) and the device names NVML reports (``NVIDIA A100-SXM4-80GB``, ``Tesla V100-SXM2-32GB``).
:func:`find_gpu_model` maps any of them to the model; where one chip comes in two memory sizes (A100 40/80
GB, V100 16/32 GB) a size written in the name decides, else the memory the caller measured (the nearest
known size: NVML's 79.2 GiB is an A100-80GB). :func:`canonical_gpu_model` is the name every comparison
uses, so an agent's GPU and an offer's GPU of the same model compare equal whatever spelling each used.

**Throughput.** :func:`relative_throughput` says how much work a model does per hour relative to the
reference model (A100), from published peak rates (see the table's comment and docs/gpus.md).

**Groups** (seed 004). A serverless endpoint does not name one GPU model: it names *groups* (``AMPERE_48``,
``HOPPER_141``...), each a pool of RunPod GPU types (:class:`GpuType`, a model in one form factor) with at
least the group's memory. This module holds the groups, the CUDA versions an endpoint may allow and which
architecture needs which CUDA version. Choosing groups by model size or budget is in ``gpu_selection``.

Corrections of the seed (see ``docs/seeds/004-endpoints.md``): ``ADA_80_PRO`` holds H100s, which are Hopper and
follow Hopper's CUDA rule; ``ADA_32_PRO`` holds the RTX 5090, which is Blackwell and needs CUDA 12.8;
``GpuGroup.all()`` lists ``AMPERE_48`` once (first), not twice.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from types import MappingProxyType

from scalar.domain.errors import InvalidSpecError, UnknownGpuModelError

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
    """A GPU architecture, oldest first. NVIDIA's carry the oldest CUDA version that supports them and the one
    recommended (endpoint groups hold Ampere and newer; older ones say 11.8, the oldest version Scalar knows);
    AMD's Vega runs ROCm, not CUDA."""

    KEPLER = "Kepler"
    MAXWELL = "Maxwell"
    PASCAL = "Pascal"
    VEGA = "Vega"
    VOLTA = "Volta"
    TURING = "Turing"
    AMPERE = "Ampere"
    ADA = "Ada"
    HOPPER = "Hopper"
    BLACKWELL = "Blackwell"

    @property
    def vendor(self) -> str:
        return "AMD" if self is Architecture.VEGA else "NVIDIA"

    @property
    def min_cuda(self) -> CudaVersion:
        return self._cuda()[0]

    @property
    def recommended_cuda(self) -> CudaVersion:
        return self._cuda()[1]

    def _cuda(self) -> tuple[CudaVersion, CudaVersion]:
        rule = _ARCH_CUDA.get(self)
        if rule is None:
            raise ValueError(f"{self.value} is an {self.vendor} architecture: it runs ROCm, not CUDA")
        return rule

    @property
    def rank(self) -> int:
        """Generation order, oldest first (Kepler 0 ... Blackwell 9)."""
        return list(Architecture).index(self)


# The seed's compatibility matrix (supported, recommended), plus Blackwell for the RTX 5090 the seed files under
# Ada: the first CUDA release that targets Blackwell's consumer chips is 12.8. Architectures older than Ampere
# are in no endpoint group; 11.8 is the oldest version CudaVersion holds, and it supports them all.
_ARCH_CUDA: dict[Architecture, tuple[CudaVersion, CudaVersion]] = {
    Architecture.KEPLER: (CudaVersion.V11_8, CudaVersion.V11_8),
    Architecture.MAXWELL: (CudaVersion.V11_8, CudaVersion.V11_8),
    Architecture.PASCAL: (CudaVersion.V11_8, CudaVersion.V11_8),
    Architecture.VOLTA: (CudaVersion.V11_8, CudaVersion.V12_0),
    Architecture.TURING: (CudaVersion.V11_8, CudaVersion.V12_0),
    Architecture.AMPERE: (CudaVersion.V11_8, CudaVersion.V12_0),
    Architecture.ADA: (CudaVersion.V11_8, CudaVersion.V12_1),
    Architecture.HOPPER: (CudaVersion.V12_0, CudaVersion.V12_4),
    Architecture.BLACKWELL: (CudaVersion.V12_8, CudaVersion.V12_8),
}


# ---------------------------------------------------------------------------------------------- models


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One GPU model. ``name`` is canonical (what catalogs and the market call it); ``memory_gb`` is per GPU in
    GB as sold (80 for an H100: NVML's bytes say 85.5e9, 79.6 GiB); ``family`` is the chip's short name that
    a model sold in two memory sizes shares (``A100``); ``aliases`` are other spellings (other catalogs, form
    factors); ``device_names`` are the names NVML reports (RunPod's GPU type ids are the same names)."""

    name: str
    memory_gb: int
    architecture: Architecture
    family: str
    aliases: tuple[str, ...] = ()
    device_names: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Every spelling of the model, canonical first."""
        return (self.name, *self.aliases, *self.device_names)

    @property
    def relative_throughput(self) -> float:
        return GPU_THROUGHPUT[self.name].tflops / GPU_THROUGHPUT[REFERENCE_GPU_MODEL].tflops


_K, _M, _P, _VEGA, _V, _T = (
    Architecture.KEPLER,
    Architecture.MAXWELL,
    Architecture.PASCAL,
    Architecture.VEGA,
    Architecture.VOLTA,
    Architecture.TURING,
)
_A, _ADA, _H, _B = Architecture.AMPERE, Architecture.ADA, Architecture.HOPPER, Architecture.BLACKWELL

#: Every GPU model Scalar knows, oldest architecture first. Canonical names are those of the packaged price
#: catalog (docs/prices.md) and of RunPod's instance types; the NVML names are what ``nvidia-smi`` prints.
GPU_MODELS: tuple[GpuModel, ...] = (
    GpuModel("K80", 12, _K, "K80", device_names=("Tesla K80",)),
    GpuModel("M60", 8, _M, "M60", device_names=("Tesla M60",)),
    GpuModel("P100", 16, _P, "P100", device_names=("Tesla P100-PCIE-16GB", "Tesla P100-SXM2-16GB")),
    GpuModel("MI25", 16, _VEGA, "MI25", ("Radeon MI25",), ("Radeon Instinct MI25",)),
    GpuModel("V100", 16, _V, "V100", ("V100-16GB",), ("Tesla V100-SXM2-16GB", "Tesla V100-PCIE-16GB")),
    GpuModel("V100-32GB", 32, _V, "V100", (), ("Tesla V100-SXM2-32GB", "Tesla V100-PCIE-32GB")),
    GpuModel("T4", 16, _T, "T4", device_names=("Tesla T4",)),
    # AWS g5g (Graviton): the same GPU on an Arm host, so x86 images do not run on it (docs/prices.md).
    GpuModel("T4g", 16, _T, "T4g", device_names=("NVIDIA T4G",)),
    GpuModel("A10", 24, _A, "A10", device_names=("NVIDIA A10",)),
    GpuModel("A10G", 24, _A, "A10G", device_names=("NVIDIA A10G",)),
    GpuModel("RTXA4000", 16, _A, "RTXA4000", ("A4000",), ("NVIDIA RTX A4000",)),
    GpuModel("RTXA4500", 20, _A, "RTXA4500", ("A4500",), ("NVIDIA RTX A4500",)),
    GpuModel("RTXA5000", 24, _A, "RTXA5000", ("A5000",), ("NVIDIA RTX A5000",)),
    GpuModel("RTXA6000", 48, _A, "RTXA6000", ("A6000",), ("NVIDIA RTX A6000",)),
    GpuModel("RTX3090", 24, _A, "RTX3090", device_names=("NVIDIA GeForce RTX 3090",)),
    GpuModel("A40", 48, _A, "A40", device_names=("NVIDIA A40",)),
    GpuModel("A100", 40, _A, "A100", ("A100-40GB",), ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB")),
    GpuModel(
        "A100-80GB", 80, _A, "A100", ("A100-80GB-SXM",), ("NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-80GB")
    ),
    GpuModel("L4", 24, _ADA, "L4", device_names=("NVIDIA L4",)),
    GpuModel("L40", 48, _ADA, "L40", device_names=("NVIDIA L40",)),
    GpuModel("L40S", 48, _ADA, "L40S", device_names=("NVIDIA L40S",)),
    GpuModel("RTX4090", 24, _ADA, "RTX4090", device_names=("NVIDIA GeForce RTX 4090",)),
    GpuModel("RTX2000-Ada", 16, _ADA, "RTX2000-Ada", device_names=("NVIDIA RTX 2000 Ada Generation",)),
    GpuModel("RTX4000-Ada", 20, _ADA, "RTX4000-Ada", device_names=("NVIDIA RTX 4000 Ada Generation",)),
    GpuModel("RTX6000Ada", 48, _ADA, "RTX6000Ada", ("RTX6000-Ada",), ("NVIDIA RTX 6000 Ada Generation",)),
    # One model whatever the form factor (SXM, PCIe, NVL) or network (GCP's a3-megagpu): the instance type
    # keeps the variant. The NVL card has 94 GB (RUNPOD_GPU_TYPES carries it).
    GpuModel(
        "H100",
        80,
        _H,
        "H100",
        ("H100-SXM", "H100-PCIe", "H100-NVL", "H100-MEGA", "H100-80GB"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL"),
    ),
    GpuModel("H200", 141, _H, "H200", ("H200-SXM", "H200-NVL"), ("NVIDIA H200", "NVIDIA H200 NVL")),
    GpuModel("B200", 180, _B, "B200", device_names=("NVIDIA B200",)),
    GpuModel("B300", 288, _B, "B300", device_names=("NVIDIA B300",)),
    GpuModel("RTX5090", 32, _B, "RTX5090", device_names=("NVIDIA GeForce RTX 5090",)),
)

#: Canonical name -> model.
GPU_MODELS_BY_NAME: Mapping[str, GpuModel] = MappingProxyType({m.name: m for m in GPU_MODELS})

# Words that name a vendor or a product line, not a chip: "NVIDIA GeForce RTX 4090" is the RTX4090.
_BRAND_WORDS = frozenset({"NVIDIA", "TESLA", "GEFORCE", "QUADRO", "AMD", "RADEON", "INSTINCT"})
_SIZE = re.compile(r"(\d+)\s*GB\b", re.IGNORECASE)


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[\s_\-]+", name.strip().upper()) if w and w not in _BRAND_WORDS]


def name_key(name: str) -> str:
    """The spelling-free key of a GPU name: upper case, brand words and separators dropped
    (``"NVIDIA A100-SXM4-80GB"`` -> ``"A100SXM480GB"``, ``"RTX6000-Ada"`` -> ``"RTX6000ADA"``)."""
    return "".join(_words(name))


def _build_index() -> dict[str, GpuModel]:
    index: dict[str, GpuModel] = {}
    for model in GPU_MODELS:
        for spelling in model.names:
            key = name_key(spelling)
            other = index.setdefault(key, model)
            if other is not model:
                raise AssertionError(f"{spelling!r} names both {other.name} and {model.name}")
    return index


_INDEX: dict[str, GpuModel] = _build_index()
_FAMILIES: dict[str, tuple[GpuModel, ...]] = {
    name_key(f): tuple(m for m in GPU_MODELS if m.family == f)
    for f in dict.fromkeys(m.family for m in GPU_MODELS)
}


def _nearest(models: Sequence[GpuModel], memory_gb: float) -> GpuModel:
    """The model whose memory is nearest ``memory_gb`` (by ratio: 79.2 GiB is 80, 42.5 GB is 40)."""
    return min(models, key=lambda m: abs(math.log(max(memory_gb, 0.1) / m.memory_gb)))


@functools.lru_cache(maxsize=4096)
def find_gpu_model(name: str, memory_gb: float | None = None) -> GpuModel | None:
    """The model ``name`` spells (canonical, alias or NVML device name, any case), or ``None``.

    A chip sold in two memory sizes (A100 40/80 GB, V100 16/32 GB) is told apart by the size written in the
    name (``A100-SXM4-80GB``), else by ``memory_gb`` (the nearest size: NVML's 79.2 GiB -> A100-80GB), else
    it is the smaller one. An NVML name not listed is recognised by its chip's word (``Tesla V100-DGXS-32GB``
    is a V100-32GB).
    """
    key = name_key(name)
    if not key:
        return None
    exact = _INDEX.get(key)
    family: tuple[GpuModel, ...] = ()
    if exact is not None:
        family = _FAMILIES[name_key(exact.family)]
    else:
        words = _words(name)
        pairs = [a + b for a, b in itertools.pairwise(words)]
        chip = next((_INDEX[w] for w in (*words, *pairs) if w in _INDEX), None)
        family = () if chip is None else _FAMILIES[name_key(chip.family)]
        if not family:
            return None
    written = _SIZE.search(name)
    size = float(written.group(1)) if written else memory_gb
    if len(family) == 1 or (exact is not None and (written or size is None)):
        return exact or family[0]
    if size is None or not math.isfinite(size) or size <= 0:
        return family[0]
    return _nearest(family, size)


def gpu_model(name: str, memory_gb: float | None = None) -> GpuModel:
    """:func:`find_gpu_model`, raising :class:`UnknownGpuModelError` (with the known names) for a name it
    does not know."""
    model = find_gpu_model(name, memory_gb)
    if model is None:
        raise UnknownGpuModelError(name, tuple(GPU_MODELS_BY_NAME))
    return model


def canonical_gpu_model(name: str, memory_gb: float | None = None) -> str:
    """The name every comparison of GPU models uses: the canonical name of a known model (``nvidia-a100`` ->
    ``A100``, ``H100-SXM`` -> ``H100``, ``A100`` with 80 GB -> ``A100-80GB``); an unknown name is kept,
    upper case, without an ``nvidia`` prefix (``nvidia-x1`` -> ``X1``), so two spellings of it still meet."""
    model = find_gpu_model(name, memory_gb)
    if model is not None:
        return model.name
    text = name.strip()
    for prefix in ("nvidia-", "nvidia ", "nvidia_"):
        if text.lower().startswith(prefix):
            text = text[len(prefix) :]
            break
    return text.strip().upper()


def same_gpu_model(a: str, b: str) -> bool:
    """Whether two spellings name the same model (``H100-SXM`` and ``NVIDIA H100 80GB HBM3`` do)."""
    return canonical_gpu_model(a) == canonical_gpu_model(b)


def device_memory_gb(name: str, model: GpuModel) -> int:
    """The memory ``model`` is sold with in the form factor NVML names ``name`` (an ``NVIDIA H100 NVL`` has
    94 GB, other H100s 80)."""
    gpu_type = _RUNPOD_BY_ID.get(name_key(name))
    return gpu_type.memory_gb if gpu_type is not None and gpu_type.model is model else model.memory_gb


# ---------------------------------------------------------------------------------------------- throughput
#
# How fast a model runs a job, relative to the reference model. The measure is the peak *dense* FP16 Tensor
# Core rate with FP32 accumulate (what mixed-precision training runs, PyTorch AMP / cuBLAS), in TFLOPS, as
# NVIDIA's datasheets and architecture whitepapers print it, without sparsity (``*`` marks a sparse figure).
# Where a datasheet prints only a sparse or an FP8 headline, the dense FP16 rate is derived from it (halved per
# step) and the entry says so; GeForce cards run FP32 accumulate at half their FP16-accumulate rate, and
# the table uses the FP32-accumulate figure. GPUs without tensor cores (K80, M60, P100, MI25) count
# their best FP16 (or FP32) vector rate. Peak rates overstate the gap between generations for memory-bound
# work; they are a published, reproducible upper bound on it. docs/gpus.md lists the sources.
#
# The reference is the A100 (40 GB): the Alibaba openb trace records no GPU a pod ran on, and 71% of its
# cluster's GPUs (4,392 of 6,212 in openb_node_list_gpu_node.csv) are the undisclosed ``G2``, which the
# simulator reads as an A100 40 GB (sim/dynamic/mapping.py); a trace pod's duration is best read as A100 time.


@dataclass(frozen=True, slots=True)
class Throughput:
    """A model's peak dense FP16 tensor rate (FP32 accumulate) and where the number comes from."""

    tflops: float
    source: str


REFERENCE_GPU_MODEL = "A100"


GPU_THROUGHPUT: Mapping[str, Throughput] = MappingProxyType(
    {
        "K80": Throughput(4.37, "Tesla K80 datasheet: 8.73 FP32 TFLOPS per board of 2 GPUs (no FP16 path)"),
        "M60": Throughput(4.83, "Tesla M60 datasheet: 9.65 FP32 TFLOPS per board of 2 GPUs (no FP16 path)"),
        "P100": Throughput(18.7, "Tesla P100 PCIe datasheet: 18.7 FP16 TFLOPS (no tensor cores)"),
        "MI25": Throughput(24.6, "AMD Radeon Instinct MI25 datasheet: 24.6 FP16 TFLOPS (packed math)"),
        "T4": Throughput(65.0, "T4 datasheet: 65 FP16 mixed-precision Tensor TFLOPS"),
        "T4g": Throughput(65.0, "T4 datasheet (AWS g5g carries the T4)"),
        "V100": Throughput(125.0, "V100 datasheet: 125 Tensor TFLOPS (SXM2)"),
        "V100-32GB": Throughput(125.0, "V100 datasheet: 125 Tensor TFLOPS (SXM2, 32 GB)"),
        "A10": Throughput(125.0, "A10 datasheet: 125 / 250* FP16 Tensor TFLOPS (* sparse)"),
        "A10G": Throughput(
            125.0, "assumed equal to the A10: AWS's variant of the GA102 A10 has no published rate"
        ),
        "RTXA4000": Throughput(76.7, "RTX A4000 datasheet: 153.4 Tensor TFLOPS sparse, halved"),
        "RTXA4500": Throughput(94.6, "RTX A4500 datasheet: 189.2 Tensor TFLOPS sparse, halved"),
        "RTXA5000": Throughput(111.1, "RTX A5000 datasheet: 222.2 Tensor TFLOPS sparse, halved"),
        "RTXA6000": Throughput(154.8, "RTX A6000 datasheet: 309.7 Tensor TFLOPS sparse, halved"),
        "A40": Throughput(149.7, "A40 datasheet: 149.7 / 299.4* FP16 Tensor TFLOPS"),
        "RTX3090": Throughput(
            71.0, "Ampere GA102 whitepaper: RTX 3090 FP16 Tensor with FP32 accumulate 71 / 142*"
        ),
        "A100": Throughput(312.0, "A100 datasheet: 312 / 624* FP16 Tensor TFLOPS"),
        "A100-80GB": Throughput(312.0, "A100 datasheet: 312 / 624* FP16 Tensor TFLOPS (80 GB)"),
        "L4": Throughput(121.0, "L4 datasheet: 242* FP16 Tensor TFLOPS sparse, halved"),
        "L40": Throughput(181.05, "L40 datasheet: 181.05 / 362.1* FP16 Tensor TFLOPS (724* FP8)"),
        "L40S": Throughput(362.05, "L40S datasheet: 362.05 / 733* FP16 Tensor TFLOPS (1,466* FP8)"),
        "RTX4090": Throughput(
            165.2, "Ada whitepaper: RTX 4090 FP16 Tensor with FP32 accumulate 165.2 / 330.4*"
        ),
        "RTX6000Ada": Throughput(
            364.2,
            "RTX 6000 Ada datasheet: 1,457* Tensor TFLOPS (FP8, sparse) / 4, as the L40's 724* FP8 is its 181 FP16",
        ),
        "RTX4000-Ada": Throughput(
            76.7, "RTX 4000 Ada datasheet: 306.8* Tensor TFLOPS (FP8, sparse) / 4, as for the RTX 6000 Ada"
        ),
        "RTX2000-Ada": Throughput(
            48.0, "RTX 2000 Ada datasheet: 191.9* Tensor TFLOPS (FP8, sparse) / 4, as for the RTX 6000 Ada"
        ),
        "RTX5090": Throughput(
            209.5, "RTX Blackwell whitepaper: RTX 5090 FP16 Tensor with FP32 accumulate 209.5 / 419*"
        ),
        "H100": Throughput(989.0, "H100 datasheet: 989 / 1,979* FP16 Tensor TFLOPS (SXM; PCIe 756, NVL 835)"),
        "H200": Throughput(989.0, "H200 datasheet: 989 / 1,979* FP16 Tensor TFLOPS (SXM)"),
        "B200": Throughput(2250.0, "HGX B200 datasheet: 36* PFLOPS FP16 for 8 GPUs (sparse), halved per GPU"),
        "B300": Throughput(2250.0, "assumed equal to the B200: HGX B300 gains FP4, not FP16, throughput"),
    }
)


# The Alibaba openb trace's GPU codes -> the model whose rate stands for them (as sim/dynamic/mapping.py
# maps them). G1, G2 and G3 are undisclosed; G1 is on no node and in no pod of openb, so it has no rate.
TRACE_GPU_MODELS: Mapping[str, str] = MappingProxyType(
    {
        "T4": "T4",
        "P100": "P100",
        "V100M16": "V100",
        "V100M32": "V100-32GB",
        "A10": "A10",
        "G2": "A100",
        "G3": "A100-80GB",
    }
)
_TRACE_BY_KEY = {name_key(code): model for code, model in TRACE_GPU_MODELS.items()}


def relative_throughput(model: str) -> float:
    """How many reference-model (A100) GPU-hours of work one GPU-hour of ``model`` does.

    ``model`` is a canonical name, an alias, an NVML/RunPod device name or an openb trace code (``V100M32``),
    any case. An unknown model raises :class:`UnknownGpuModelError` naming the known ones.
    """
    traced = _TRACE_BY_KEY.get(name_key(model))
    return gpu_model(traced or model).relative_throughput


# ---------------------------------------------------------------------------------------------- RunPod types


@dataclass(frozen=True, slots=True)
class GpuType:
    """A model in one form factor, as RunPod sells it: ``runpod_id`` is RunPod's GPU type id (the NVML device
    name), ``name`` its spelling in instance types (``H100-SXM``: ``1x_H100-SXM_SECURE``), ``memory_gb`` its
    memory (the model's, but 94 for the H100 NVL)."""

    name: str
    runpod_id: str
    model: GpuModel
    memory_gb: int

    @property
    def architecture(self) -> Architecture:
        return self.model.architecture


def _runpod(name: str, runpod_id: str, model: str, memory_gb: int | None = None) -> GpuType:
    found = GPU_MODELS_BY_NAME[model]
    if name_key(runpod_id) not in _INDEX or _INDEX[name_key(runpod_id)] is not found:
        raise AssertionError(f"{runpod_id!r} is not a device name of {model}")
    return GpuType(name, runpod_id, found, found.memory_gb if memory_gb is None else memory_gb)


#: RunPod's GPU types Scalar maps, by name in instance types (the packaged catalog's RunPod instance types).
RUNPOD_GPU_TYPES: tuple[GpuType, ...] = (
    _runpod("RTX4090", "NVIDIA GeForce RTX 4090", "RTX4090"),
    _runpod("RTX5090", "NVIDIA GeForce RTX 5090", "RTX5090"),
    _runpod("RTX6000Ada", "NVIDIA RTX 6000 Ada Generation", "RTX6000Ada"),
    _runpod("L40", "NVIDIA L40", "L40"),
    _runpod("L40S", "NVIDIA L40S", "L40S"),
    _runpod("H100", "NVIDIA H100 PCIe", "H100"),
    _runpod("H100-SXM", "NVIDIA H100 80GB HBM3", "H100"),
    _runpod("H100-NVL", "NVIDIA H100 NVL", "H100", 94),
    _runpod("RTXA4000", "NVIDIA RTX A4000", "RTXA4000"),
    _runpod("RTXA4500", "NVIDIA RTX A4500", "RTXA4500"),
    _runpod("RTX4000-Ada", "NVIDIA RTX 4000 Ada Generation", "RTX4000-Ada"),
    _runpod("RTX2000-Ada", "NVIDIA RTX 2000 Ada Generation", "RTX2000-Ada"),
    _runpod("RTXA5000", "NVIDIA RTX A5000", "RTXA5000"),
    _runpod("L4", "NVIDIA L4", "L4"),
    _runpod("RTX3090", "NVIDIA GeForce RTX 3090", "RTX3090"),
    _runpod("A40", "NVIDIA A40", "A40"),
    _runpod("RTXA6000", "NVIDIA RTX A6000", "RTXA6000"),
    _runpod("A100-80GB", "NVIDIA A100 80GB PCIe", "A100-80GB"),
    _runpod("A100-80GB-SXM", "NVIDIA A100-SXM4-80GB", "A100-80GB"),
    _runpod("H200-SXM", "NVIDIA H200", "H200"),
    _runpod("B200", "NVIDIA B200", "B200"),
)
_RUNPOD_BY_ID: dict[str, GpuType] = {name_key(t.runpod_id): t for t in RUNPOD_GPU_TYPES}


def runpod_gpu_type(runpod_id: str) -> GpuType | None:
    """The GPU type of a RunPod ``gpuTypes`` id (``"NVIDIA H100 80GB HBM3"``), or ``None`` if not mapped."""
    return _RUNPOD_BY_ID.get(name_key(runpod_id))


# ---------------------------------------------------------------------------------------------- groups


class GpuGroup(StrEnum):
    """A pool of RunPod GPU types an endpoint may run on (the seed's names and values; ``ANY`` is ``"any"``)."""

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
    def gpu_types(self) -> tuple[GpuType, ...]:
        return _GROUP_TYPES[self]

    @property
    def memory_gb(self) -> int:
        """The memory every model of the group has at least (0 for ``ANY``)."""
        return min((t.memory_gb for t in self.gpu_types), default=0)

    @property
    def architectures(self) -> tuple[Architecture, ...]:
        """Distinct architectures of the group's models, oldest first."""
        return tuple(sorted({t.architecture for t in self.gpu_types}, key=lambda a: a.rank))

    @property
    def architecture(self) -> Architecture:
        """The architecture that sets the group's CUDA rule (the newest one among its models)."""
        if self is GpuGroup.ANY:
            raise ValueError("ANY is not one architecture; expand it with GpuGroup.all()")
        return self.architectures[-1]

    @property
    def min_cuda(self) -> CudaVersion:
        return max(t.architecture.min_cuda for t in self.gpu_types)

    @property
    def recommended_cuda(self) -> CudaVersion:
        return max(t.architecture.recommended_cuda for t in self.gpu_types)

    @property
    def model_names(self) -> tuple[str, ...]:
        """The canonical models of the group's GPU types, each once (``ADA_80_PRO``: ``H100``)."""
        return tuple(dict.fromkeys(t.model.name for t in self.gpu_types))

    def supports(self, version: CudaVersion) -> bool:
        return version >= self.min_cuda


_RP = {t.name: t for t in RUNPOD_GPU_TYPES}
_GROUP_TYPES: dict[GpuGroup, tuple[GpuType, ...]] = {
    GpuGroup.ANY: (),
    GpuGroup.ADA_24: (_RP["RTX4090"],),
    GpuGroup.ADA_32_PRO: (_RP["RTX5090"],),
    GpuGroup.ADA_48_PRO: (_RP["RTX6000Ada"], _RP["L40"], _RP["L40S"]),
    GpuGroup.ADA_80_PRO: (_RP["H100"], _RP["H100-SXM"], _RP["H100-NVL"]),
    GpuGroup.AMPERE_16: (_RP["RTXA4000"], _RP["RTXA4500"], _RP["RTX4000-Ada"], _RP["RTX2000-Ada"]),
    GpuGroup.AMPERE_24: (_RP["RTXA5000"], _RP["L4"], _RP["RTX3090"]),
    GpuGroup.AMPERE_48: (_RP["A40"], _RP["RTXA6000"]),
    GpuGroup.AMPERE_80: (_RP["A100-80GB"], _RP["A100-80GB-SXM"]),
    GpuGroup.HOPPER_141: (_RP["H200-SXM"],),
}
_MODEL_GROUP: dict[str, GpuGroup] = {
    t.model.name: group for group, types in _GROUP_TYPES.items() for t in types
}


def find_model(name: str) -> tuple[GpuModel, GpuGroup] | None:
    """The model ``name`` spells (any spelling :func:`find_gpu_model` knows) and the endpoint group holding
    it, or ``None`` when the name is unknown or the model is in no group (a T4)."""
    model = find_gpu_model(name)
    group = None if model is None else _MODEL_GROUP.get(model.name)
    return None if model is None or group is None else (model, group)


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
