"""Prime Intellect: GPU availability as offers, and pods bought and released (see ``client``)."""

from scalar.providers.primeintellect.client import (
    DEFAULT_BASE_URL,
    PrimeIntellectProvider,
    block_id_for,
    pod_name,
)
from scalar.providers.primeintellect.listings import (
    PrimeListing,
    Skipped,
    gpu_model_of,
    instance_type_name,
)
from scalar.providers.primeintellect.pods import PodStatus, PrimePod, node_state

__all__ = [
    "DEFAULT_BASE_URL",
    "PodStatus",
    "PrimeIntellectProvider",
    "PrimeListing",
    "PrimePod",
    "Skipped",
    "block_id_for",
    "gpu_model_of",
    "instance_type_name",
    "node_state",
    "pod_name",
]
