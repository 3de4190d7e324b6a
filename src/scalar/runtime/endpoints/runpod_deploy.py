"""Export an endpoint spec to RunPod: ``saveEndpoint`` with ``gpuIds`` and ``allowedCudaVersions``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scalar.providers.base import ProviderError
from scalar.providers.runpod import RunPodProvider


def runpod_endpoint_input(spec: Mapping[str, Any], remote_id: str | None = None) -> dict[str, Any]:
    """RunPod's ``EndpointInput`` for a normalized spec (``wire.endpoints.endpoint_to_json``)."""
    fields: dict[str, Any] = {
        "name": spec["name"],
        "gpuIds": spec["gpuIds"],
        "allowedCudaVersions": spec["allowedCudaVersions"],
        "gpuCount": spec["gpuCount"],
        "workersMin": spec["workersMin"],
        "workersMax": spec["workersMax"],
        "idleTimeout": spec["idleTimeout"],
        "scalerType": spec["scalerType"],
        "scalerValue": spec["scalerValue"],
        "executionTimeoutMs": spec["executionTimeoutMs"],
        "locations": spec.get("locations") or None,
        "template": {"name": f"{spec['name']}__template", "imageName": spec["imageName"]},
    }
    if remote_id is not None:
        fields["id"] = remote_id
    return fields


def deploy_to_runpod(spec: Mapping[str, Any], env: Mapping[str, str], remote_id: str | None = None) -> str:
    """Create (or update) the endpoint on RunPod; returns RunPod's endpoint id. ``ProviderError`` when
    RunPod is not configured (``SCALAR_RUNPOD_API_KEY``) or refuses."""
    provider = RunPodProvider.from_env(env)
    try:
        if not provider.settings.enabled:
            raise ProviderError(
                "runpod", provider.settings.disabled_reason or "runpod is off", retryable=False
            )
        return provider.save_endpoint(runpod_endpoint_input(spec, remote_id))
    finally:
        provider.close()
