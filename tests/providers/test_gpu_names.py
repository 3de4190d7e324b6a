"""Every provider speaks the GPU registry's names: what a client puts in ``Offer.gpu_model`` is canonical, with
the registry's memory, so the engine never sees two names for one GPU."""

from __future__ import annotations

import pytest

from scalar.domain.gpus import GPU_MODELS_BY_NAME, RUNPOD_GPU_TYPES, canonical_gpu_model, find_gpu_model
from scalar.providers.builtin.config import BOOK_SHAPES, BookShape
from scalar.providers.catalog import CANONICAL_GPU_MODELS, GPU_MEMORY_GB
from scalar.providers.catalog import canonical_gpu_model as catalog_model
from scalar.providers.catalog.gcp import HOST_ACCELERATORS
from scalar.providers.gcp import GPU_SKU_NAMES
from scalar.providers.runpod import GPU_TYPES
from scalar.providers.sfcompute.pricing import SHAPES, Shape


def test_the_catalog_offers_the_registrys_models_with_its_memory() -> None:
    assert frozenset(GPU_MODELS_BY_NAME) == CANONICAL_GPU_MODELS
    assert {name: float(m.memory_gb) for name, m in GPU_MODELS_BY_NAME.items()} == dict(GPU_MEMORY_GB)
    assert catalog_model("H100-MEGA") == catalog_model("NVIDIA H100 80GB HBM3") == "H100"
    assert catalog_model("tpu-v5litepod-1") is None and catalog_model("MI300X") is None


@pytest.mark.parametrize(
    "shape", [*BOOK_SHAPES.values(), *SHAPES.values()], ids=lambda s: f"{type(s).__name__}:{s.instance_type}"
)
def test_builtin_and_sfcompute_shapes_carry_canonical_models_with_the_registrys_memory(
    shape: BookShape | Shape,
) -> None:
    model, vram = shape.gpu_model, shape.vram_per_gpu_gb
    assert canonical_gpu_model(model) == model
    assert GPU_MODELS_BY_NAME[model].memory_gb == vram


def test_gcp_names_are_known_to_the_registry() -> None:
    for upstream in {*GPU_SKU_NAMES.values(), *(name for name, _ in HOST_ACCELERATORS.values())}:
        assert find_gpu_model(upstream) is not None, upstream
    # the SKU descriptions themselves name the same models
    for description, upstream in GPU_SKU_NAMES.items():
        assert canonical_gpu_model(description.removesuffix(" gpu")) == canonical_gpu_model(upstream), (
            description
        )


def test_runpod_maps_exactly_the_registrys_runpod_types() -> None:
    assert dict(GPU_TYPES) == {t.runpod_id: t for t in RUNPOD_GPU_TYPES}
