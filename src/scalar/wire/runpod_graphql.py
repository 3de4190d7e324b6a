"""RunPod's control-plane GraphQL shapes <-> Scalar's endpoint specs (``POST /graphql``, docs/endpoints.md).

``endpoint_body(input)`` turns a ``saveEndpoint`` ``EndpointInput`` into the body ``POST /endpoints`` takes
(the same spec, checked by the same code); ``endpoint_out(view)`` turns an endpoint as ``GET
/endpoints/{id}`` shows it into RunPod's ``Endpoint``; ``template_out`` into its ``PodTemplate``. A RunPod
template is kept with its endpoint: its id is the endpoint's with ``tpl`` for ``ep``.

tetra-rp's and runpod-flash's live images (``runpod/tetra-rp:...``, ``runpod/flash:...``) are not run as
images on Scalar's fleet: such an endpoint's workers run Scalar's own executor for their
``FunctionRequest`` (``scalar.agent.function_worker``), through the agent's interpreter (``SCALAR_PYTHON``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scalar.domain.errors import InvalidSpecError
from scalar.domain.gpus import CudaVersion, GpuGroup
from scalar.wire.endpoints_api import EndpointOut

FUNCTION_WORKER_MODULE = "scalar.agent.function_worker"
FUNCTION_WORKER_COMMAND = ("sh", "-c", f'exec "${{SCALAR_PYTHON:-python3}}" -u -m {FUNCTION_WORKER_MODULE}')
"""The worker command of an endpoint whose image is tetra-rp's or runpod-flash's live worker."""
LIVE_IMAGES = ("runpod/tetra-rp", "runpod/flash")
"""Images whose workers Scalar's executor stands in for (any tag)."""

# EndpointInput fields that say nothing about what the endpoint runs on Scalar's fleet.
IGNORED_INPUT = frozenset(
    {"type", "workersStandby", "workersPFBTarget", "flashboot", "flashBootType", "flashEnvironmentId"}
)


def is_live_image(image: str | None) -> bool:
    """Whether ``image`` is tetra-rp's or runpod-flash's queue worker (not their load-balanced ``-lb``)."""
    if not image:
        return False
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return name in LIVE_IMAGES


def template_id(endpoint_id: str) -> str:
    return "tpl" + endpoint_id.removeprefix("ep")


def endpoint_of_template(template: str) -> str | None:
    return "ep" + template.removeprefix("tpl") if template.startswith("tpl-") else None


def _known_gpu_ids(text: str) -> str:
    """RunPod's ``gpuIds`` with the pools Scalar has no GPUs for left out (runpod-flash lists Blackwell
    pools by default); all of them unknown is an error naming the field."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    known_names = {g.name for g in GpuGroup} | {GpuGroup.ANY.value}
    known = [p for p in parts if p.upper() in known_names or p.lower() == GpuGroup.ANY.value]
    if parts and not known:
        return text  # the spec's own check names the bad group and the fix
    return ",".join(known)


def _cuda_at_least(text: str) -> list[str]:
    """``minCudaVersion`` as the list of CUDA versions allowed: every known version at or above it."""
    try:
        floor = CudaVersion(text.strip())
    except ValueError:
        known = ", ".join(v.value for v in CudaVersion)
        raise InvalidSpecError(
            "minCudaVersion", f"{text!r} is not a CUDA version", f"use one of {known}"
        ) from None
    order = list(CudaVersion)
    return [v.value for v in order[order.index(floor) :]]


def endpoint_body(given: Mapping[str, Any], template: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A ``saveEndpoint`` input as an endpoint spec body; ``template`` is the stored template that a
    ``templateId`` named (``None``: the input's own ``template``)."""
    if (given.get("type") or "QB") != "QB":
        raise InvalidSpecError(
            "type",
            f"{given.get('type')!r} endpoints are not served: Scalar serves queue endpoints",
            'use type "QB" (a queue endpoint: /run, /runsync, /status)',
        )
    if given.get("networkVolumeId") or given.get("networkVolumeIds"):
        raise InvalidSpecError(
            "networkVolumeId", "network volumes are not served", "leave out the network volume"
        )
    body: dict[str, Any] = {}
    for key, value in given.items():
        if key in IGNORED_INPUT or key in (
            "id",
            "templateId",
            "template",
            "networkVolumeIds",
            "minCudaVersion",
        ):
            continue
        if value is None or (key == "allowedCudaVersions" and value == ""):
            continue
        body[key] = value
    if isinstance(body.get("gpuIds"), str):
        body["gpuIds"] = _known_gpu_ids(body["gpuIds"])
    if given.get("minCudaVersion") and not given.get("allowedCudaVersions"):
        body["cudaVersions"] = _cuda_at_least(str(given["minCudaVersion"]))
    source = template if template is not None else given.get("template")
    if source:
        kept = {
            k: source.get(k) for k in ("imageName", "env", "containerDiskInGb") if source.get(k) is not None
        }
        if kept:
            body["template"] = kept
    image = (source or {}).get("imageName")
    if is_live_image(image):
        body["command"] = list(FUNCTION_WORKER_COMMAND)
    return body


def _cuda_floor(spec: Mapping[str, Any]) -> str | None:
    """The lowest CUDA version when the spec allows every known version from it up (RunPod's
    ``minCudaVersion`` with an empty ``allowedCudaVersions``); ``None`` otherwise."""
    cuda = list(spec.get("cudaVersions") or [])
    known = [v.value for v in CudaVersion]
    if not cuda or cuda[0] not in known:
        return None
    return cuda[0] if sorted(cuda, key=known.index) == known[known.index(cuda[0]) :] else None


def endpoint_out(view: EndpointOut) -> dict[str, Any]:
    """An endpoint view (``EndpointService.get``) as RunPod's ``Endpoint``."""
    spec = view.spec
    floor = _cuda_floor(spec)
    return {
        "id": view.id,
        "name": view.name,
        "gpuIds": spec.get("gpuIds"),
        "gpuCount": spec.get("gpuCount"),
        # every version from one up reads as RunPod's minCudaVersion with "" allowed (RunPod's clients know
        # fewer versions than Scalar, and read "" as any); "" alone: a spec that named none
        "allowedCudaVersions": "" if floor is not None else spec.get("allowedCudaVersions") or "",
        "minCudaVersion": None if floor == CudaVersion.V11_8.value else floor,
        "idleTimeout": spec.get("idleTimeout"),
        "executionTimeoutMs": spec.get("executionTimeoutMs"),
        "locations": spec.get("locations"),
        "scalerType": spec.get("scalerType"),
        "scalerValue": spec.get("scalerValue"),
        "workersMin": spec.get("workersMin"),
        "workersMax": spec.get("workersMax"),
        "workersStandby": 0,
        "workersPFBTarget": 0,
        "type": "QB",
        "templateId": template_id(view.id),
        "template": template_out(view),
        "userId": view.tenant,
        "version": 0,
        "createdAt": view.created_at,
    }


def template_out(view: EndpointOut) -> dict[str, Any]:
    """An endpoint's template as RunPod's ``PodTemplate``: its image, env and container disk."""
    spec = view.spec
    env = spec.get("env") or {}
    return {
        "id": template_id(view.id),
        "name": f"{view.name}__template",
        "imageName": spec.get("imageName"),
        "containerDiskInGb": spec.get("containerDiskInGb"),
        "dockerArgs": "",
        "readme": "",
        "env": [{"key": key, "value": value} for key, value in env.items()],
    }


def template_changes(given: Mapping[str, Any]) -> dict[str, Any]:
    """A ``saveTemplate`` input as the endpoint spec fields it changes (``template``)."""
    kept = {k: given.get(k) for k in ("imageName", "env", "containerDiskInGb") if given.get(k) is not None}
    changes: dict[str, Any] = {"template": kept}
    if is_live_image(kept.get("imageName")):
        changes["command"] = list(FUNCTION_WORKER_COMMAND)
    return changes
