"""RunPod: GPU prices from GraphQL ``gpuTypes`` and serverless endpoints (see ``client``)."""

from scalar.providers.runpod.client import DEFAULT_BASE_URL, DEFAULT_DATA_URL, RunPodProvider
from scalar.providers.runpod.endpoints import ENDPOINT_FIELDS, SCALER_TYPES, EndpointHealth, endpoint_input
from scalar.providers.runpod.gpus import GPU_TYPES, instance_type_name

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_DATA_URL",
    "ENDPOINT_FIELDS",
    "GPU_TYPES",
    "SCALER_TYPES",
    "EndpointHealth",
    "RunPodProvider",
    "endpoint_input",
    "instance_type_name",
]
