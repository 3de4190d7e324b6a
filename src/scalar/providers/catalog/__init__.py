"""The packaged GPU price catalog: published prices of AWS, Azure, GCP, Prime Intellect and RunPod.

``load_catalog()`` returns a ``Catalog`` (cached per process): one ``scalar.domain.offers.Offer`` per
published row and price kind (on-demand, spot), the ``CatalogAnomaly`` flags found in the data, instance
specs by ``(provider, instance_type)``, cheapest offers, and reference $/GPU-h prices. See
``docs/prices.md`` for the rules; ``scripts/curate_prices.py`` regenerates the data.
"""

from scalar.providers.catalog.catalog import Catalog, NoReferencePriceError
from scalar.providers.catalog.gpus import CANONICAL_GPU_MODELS, GPU_MEMORY_GB, canonical_gpu_model
from scalar.providers.catalog.interruptions import INTERRUPTION_RATE_BY_RANGE, interruption_rate
from scalar.providers.catalog.loader import (
    build_catalog,
    load_catalog,
    package_data_dir,
    reference_price_per_gpu_hour,
)
from scalar.providers.catalog.records import (
    CORRECTED,
    DROPPED,
    KEPT,
    UNTRUSTED,
    CatalogAnomaly,
    InstanceSpec,
)

PROVIDERS = ("aws", "azure", "gcp", "prime", "runpod")

__all__ = [
    "CANONICAL_GPU_MODELS",
    "CORRECTED",
    "DROPPED",
    "GPU_MEMORY_GB",
    "INTERRUPTION_RATE_BY_RANGE",
    "KEPT",
    "PROVIDERS",
    "UNTRUSTED",
    "Catalog",
    "CatalogAnomaly",
    "InstanceSpec",
    "NoReferencePriceError",
    "build_catalog",
    "canonical_gpu_model",
    "interruption_rate",
    "load_catalog",
    "package_data_dir",
    "reference_price_per_gpu_hour",
]
