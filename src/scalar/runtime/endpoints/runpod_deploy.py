"""Export an endpoint spec to RunPod: ``saveEndpoint`` with ``gpuIds``, ``allowedCudaVersions`` and the
template (image, ``env`` as RunPod's key/value list, ``containerDiskInGb``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scalar.providers.base import ProviderError
from scalar.providers.runpod import RunPodProvider


def runpod_endpoint_input(spec: Mapping[str, Any], remote_id: str | None = None) -> dict[str, Any]:
    """RunPod's ``EndpointInput`` for a normalized spec (``wire.endpoints.endpoint_to_json``) with its stored
    ``env`` and ``containerDiskInGb`` (``EndpointSpecFile.worker_fields``)."""
    template: dict[str, Any] = {"name": f"{spec['name']}__template", "imageName": spec["imageName"]}
    env = spec.get("env") or {}
    if env:
        template["env"] = [{"key": key, "value": str(value)} for key, value in env.items()]
    if spec.get("containerDiskInGb") is not None:
        template["containerDiskInGb"] = spec["containerDiskInGb"]
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
        "template": template,
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
