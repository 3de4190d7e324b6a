"""The endpoint SPEC.json (seed 004): developer fields and/or RunPod API fields in, the normalized spec out.

Developer fields: ``name, imageName, gpus, cudaVersions, workersMin, workersMax, scalerType, scalerValue,
gpuCount, idleTimeout, executionTimeoutMs, locations`` and ``live`` (bool) or ``kind`` (serverless|live);
``handler`` (``module:function``) makes a local endpoint whose workers run that Python function.
API fields: ``gpuIds`` and ``allowedCudaVersions`` (comma strings) and ``template.imageName``. The other
read-only fields of a ``saveEndpoint`` response (``id``, ``templateId``...) are accepted and ignored; any
other field is an error naming it. The shape is checked here; every rule lives in
:mod:`scalar.domain.endpoints`. See ``docs/formats/endpoint.md``.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictFloat, StrictInt, StrictStr

from scalar.domain.endpoints import EndpointKind, ServerlessEndpoint, endpoint_class
from scalar.domain.errors import InvalidSpecError

HANDLER_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
LOCAL_HANDLER_IMAGE = "scalar/python-handler:local"
"""The image of an endpoint given only a Python ``handler``: the handler runs in a local subprocess."""

# Fields a RunPod ``saveEndpoint`` response carries that say nothing about what the endpoint may run.
IGNORED_API_FIELDS = frozenset(
    {
        "id",
        "templateId",
        "type",
        "aiKey",
        "userId",
        "version",
        "networkVolumeId",
        "workersStandby",
        "workersPFBTarget",
        "activeBuildid",
        "idePodId",
    }
)


class TemplateSpec(BaseModel):
    """The part of RunPod's pod template that matters here: its image."""

    model_config = ConfigDict(extra="ignore")

    imageName: StrictStr | None = None


class EndpointSpecFile(BaseModel):
    """One endpoint spec. ``null`` or a missing field means the default."""

    model_config = ConfigDict(extra="allow")

    kind: StrictStr | None = None
    live: StrictBool | None = None
    name: StrictStr | None = None
    imageName: StrictStr | None = None
    template: TemplateSpec | None = None
    gpus: list[StrictStr] | None = None
    gpuIds: StrictStr | None = None
    cudaVersions: list[StrictStr | StrictFloat | StrictInt] | None = None
    allowedCudaVersions: StrictStr | None = None
    workersMin: StrictInt | None = None
    workersMax: StrictInt | None = None
    scalerType: StrictStr | None = None
    scalerValue: StrictInt | None = None
    gpuCount: StrictInt | None = None
    idleTimeout: StrictInt | None = None
    executionTimeoutMs: StrictInt | None = None
    locations: StrictStr | list[StrictStr] | None = None
    handler: StrictStr | None = None

    def handler_ref(self) -> str | None:
        """The local handler, ``module:function`` (checked), or ``None``."""
        if self.handler is None:
            return None
        if HANDLER_PATTERN.fullmatch(self.handler) is None:
            raise InvalidSpecError(
                "handler",
                f"{self.handler!r} is not a handler reference",
                'write module:function, e.g. "my_service.handler:handle" (the module must be importable)',
            )
        return self.handler

    def _check_extra_fields(self) -> None:
        known = sorted(type(self).model_fields)
        for key in self.model_extra or {}:
            if key in IGNORED_API_FIELDS:
                continue
            if key == "instanceIds":
                raise InvalidSpecError(
                    key, "CPU endpoints are not supported: an endpoint spec here is for GPU workers"
                )
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known fields: {', '.join(known)}"
            raise InvalidSpecError(key, "unknown field", hint)

    def endpoint_kind(self) -> EndpointKind:
        kind = endpoint_class(self.kind).KIND if self.kind is not None else None
        if self.live is not None:
            from_live = EndpointKind.LIVE if self.live else EndpointKind.SERVERLESS
            if kind is not None and kind is not from_live:
                raise InvalidSpecError(
                    "live",
                    f"{str(self.live).lower()} contradicts kind {kind.value!r}",
                    "give only one of them",
                )
            return from_live
        return kind or EndpointKind.SERVERLESS

    def image_name(self) -> str | None:
        from_template = self.template.imageName if self.template is not None else None
        if self.imageName is not None and from_template is not None and self.imageName != from_template:
            raise InvalidSpecError(
                "template.imageName",
                f"{from_template!r} disagrees with imageName {self.imageName!r}",
                "give only one of imageName and template.imageName",
            )
        image = self.imageName if self.imageName is not None else from_template
        if image is None and self.handler is not None and self.endpoint_kind() is EndpointKind.SERVERLESS:
            return LOCAL_HANDLER_IMAGE
        return image

    def to_domain(self) -> ServerlessEndpoint:
        """Build the normalized spec; raises ``InvalidSpecError`` naming the bad field."""
        self._check_extra_fields()
        self.handler_ref()
        cls = endpoint_class(self.endpoint_kind())
        cuda = None if self.cudaVersions is None else [_cuda_text(v) for v in self.cudaVersions]
        return cls.create(
            name=self.name,
            image_name=self.image_name(),
            gpus=self.gpus,
            gpu_ids=self.gpuIds,
            cuda_versions=cuda,
            allowed_cuda_versions=self.allowedCudaVersions,
            workers_min=self.workersMin,
            workers_max=self.workersMax,
            scaler_type=self.scalerType,
            scaler_value=self.scalerValue,
            gpu_count=self.gpuCount,
            idle_timeout_s=self.idleTimeout,
            execution_timeout_ms=self.executionTimeoutMs,
            locations=self.locations,
        )


def _cuda_text(value: str | float | int) -> str:
    """JSON ``12.4`` (a number) reads as ``"12.4"``."""
    return value if isinstance(value, str) else repr(value)


def endpoint_to_json(spec: ServerlessEndpoint) -> dict[str, Any]:
    """The normalized spec: every default filled, ANY expanded, both field forms. Valid SPEC.json itself."""
    return {
        "kind": spec.kind.value,
        "name": spec.name,
        "imageName": spec.image_name,
        "gpus": [g.value for g in spec.gpus],
        "gpuIds": spec.gpu_ids,
        "cudaVersions": [v.value for v in spec.cuda_versions],
        "allowedCudaVersions": spec.allowed_cuda_versions,
        "workersMin": spec.workers_min,
        "workersMax": spec.workers_max,
        "scalerType": spec.scaler_type.value,
        "scalerValue": spec.scaler_value,
        "gpuCount": spec.gpu_count,
        "idleTimeout": spec.idle_timeout_s,
        "executionTimeoutMs": spec.execution_timeout_ms,
        "locations": ",".join(spec.locations) if spec.locations else None,
    }
