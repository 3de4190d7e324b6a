"""The endpoint SPEC.json (seed 004): developer fields and/or RunPod API fields in, the normalized spec out.

Developer fields: ``name, imageName, gpus, cudaVersions, workersMin, workersMax, scalerType, scalerValue,
gpuCount, idleTimeout, executionTimeoutMs, locations`` and ``live`` (bool) or ``kind`` (serverless|live);
``handler`` (``module:function``) makes a local endpoint whose workers run that Python function.
Worker fields: ``command``/``workdir`` (a RunPod worker), ``env`` (any endpoint's workers, over
``template.env``), ``containerDiskInGb`` (or ``template.containerDiskInGb``), kept beside the normalized spec.
API fields: ``gpuIds`` and ``allowedCudaVersions`` (comma strings) and ``template.imageName``. The other
read-only fields of a ``saveEndpoint`` response (``id``, ``templateId``...) are accepted and ignored; any
other field is an error naming it. The shape is checked here; every rule lives in
:mod:`scalar.domain.endpoints`. See ``docs/formats/endpoint.md``.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)

from scalar.domain.endpoints import NAME_PATTERN, EndpointKind, ServerlessEndpoint, endpoint_class
from scalar.domain.errors import InvalidSpecError

HANDLER_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
LOCAL_HANDLER_IMAGE = "scalar/python-handler:local"
"""The image of an endpoint given only a Python ``handler``: the handler runs in a local subprocess."""

# Upper bounds of the spec's numbers, strings and lists (no absurd values). The lower bounds and
# every other rule live in scalar.domain.endpoints. docs/formats/endpoint.md lists them.
MAX_WORKERS = 1000
MAX_SCALER_VALUE = 100_000
MAX_GPU_COUNT = 64
MAX_IDLE_TIMEOUT_S = 7 * 24 * 3600
MAX_EXECUTION_TIMEOUT_MS = MAX_IDLE_TIMEOUT_S * 1000
MAX_TEXT = 1000
MAX_ITEMS = 64
MAX_HANDLER_LENGTH = 200  # the endpoints.handler column
MAX_ENV_VARS = 1000  # a job's (wire.jobs.MAX_ENV)
MAX_ENV_VALUE = 100_000  # a job's argument and env value bound (wire.jobs.MAX_ARG_LENGTH)
MAX_COMMAND_ARGS = 4096  # a job's (wire.jobs.MAX_ARGS)
MAX_DISK_GB = 100_000
RUNPOD_SET_ENV = frozenset(
    {
        "RUNPOD_WEBHOOK_GET_JOB",
        "RUNPOD_WEBHOOK_POST_OUTPUT",
        "RUNPOD_WEBHOOK_POST_STREAM",
        "RUNPOD_WEBHOOK_PING",
        "RUNPOD_AI_API_KEY",
        "RUNPOD_POD_ID",
        "RUNPOD_ENDPOINT_ID",
    }
)
"""The variables Scalar sets for a worker command (a spec's ``env`` may not set them)."""

Text = Annotated[StrictStr, Field(max_length=MAX_TEXT)]
Short = Annotated[StrictStr, Field(max_length=MAX_ITEMS)]

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


class TemplateEnvVar(BaseModel):
    """One of a RunPod template's environment variables (``{"key": ..., "value": ...}``)."""

    model_config = ConfigDict(extra="forbid")

    key: Annotated[StrictStr, Field(min_length=1, max_length=MAX_TEXT)]
    value: Annotated[StrictStr, Field(max_length=MAX_ENV_VALUE)]


class TemplateSpec(BaseModel):
    """The parts of RunPod's pod template that matter here: its image, its environment (kept as the spec's
    ``env``) and its container disk (kept as ``containerDiskInGb``)."""

    model_config = ConfigDict(extra="ignore")

    imageName: Text | None = None
    env: list[TemplateEnvVar] | None = Field(default=None, max_length=MAX_ENV_VARS)
    containerDiskInGb: StrictInt | None = Field(default=None, ge=1, le=MAX_DISK_GB)


class HandlerConfigSpec(BaseModel):
    """RunPod's ``serverless.start`` options for a ``handler`` endpoint (the SDK's config keys)."""

    model_config = ConfigDict(extra="forbid")

    return_aggregate_stream: StrictBool = Field(
        default=False, description="a streaming handler's output is the list of what it yielded"
    )
    refresh_worker: StrictBool = Field(default=False, description="restart the worker after each request")

    def flags(self) -> list[str]:
        """The worker process's command-line flags for these options."""
        return [
            flag
            for flag, on in (
                ("--return-aggregate-stream", self.return_aggregate_stream),
                ("--refresh-worker", self.refresh_worker),
            )
            if on
        ]


class EndpointSpecFile(BaseModel):
    """One endpoint spec. ``null`` or a missing field means the default."""

    model_config = ConfigDict(extra="allow")

    kind: Short | None = None
    live: StrictBool | None = None
    name: Short | None = Field(default=None, description="1-64 letters, digits, '.', '_', '-'")
    imageName: Text | None = None
    template: TemplateSpec | None = None
    gpus: list[Short] | None = Field(default=None, max_length=MAX_ITEMS)
    gpuIds: Text | None = None
    cudaVersions: list[Short | StrictFloat | StrictInt] | None = Field(default=None, max_length=MAX_ITEMS)
    allowedCudaVersions: Text | None = None
    workersMin: StrictInt | None = Field(default=None, le=MAX_WORKERS)
    workersMax: StrictInt | None = Field(default=None, le=MAX_WORKERS)
    scalerType: Short | None = None
    scalerValue: StrictInt | None = Field(default=None, le=MAX_SCALER_VALUE)
    gpuCount: StrictInt | None = Field(default=None, le=MAX_GPU_COUNT)
    idleTimeout: StrictInt | None = Field(default=None, le=MAX_IDLE_TIMEOUT_S, description="seconds")
    executionTimeoutMs: StrictInt | None = Field(default=None, le=MAX_EXECUTION_TIMEOUT_MS)
    locations: str | list[str] | None = None
    handler: Annotated[StrictStr, Field(max_length=MAX_HANDLER_LENGTH)] | None = Field(
        default=None, description="module:function, run by a local worker (docs/formats/endpoint.md)"
    )
    command: list[Annotated[StrictStr, Field(max_length=MAX_ENV_VALUE)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_COMMAND_ARGS,
        description="a RunPod worker to run as argv (it calls runpod.serverless.start); not with handler",
    )
    workdir: Annotated[StrictStr, Field(min_length=1, max_length=MAX_TEXT)] | None = Field(
        default=None, description="the command's working directory: an absolute path on the node"
    )
    env: (
        dict[
            Annotated[str, Field(min_length=1, max_length=MAX_TEXT)],
            Annotated[StrictStr, Field(max_length=MAX_ENV_VALUE)],
        ]
        | None
    ) = Field(
        default=None,
        max_length=MAX_ENV_VARS,
        description="the workers' environment (a command's or a handler's); overrides template.env",
    )
    containerDiskInGb: StrictInt | None = Field(
        default=None,
        ge=1,
        le=MAX_DISK_GB,
        description="RunPod's container disk (or template.containerDiskInGb)",
    )
    handlerConfig: HandlerConfigSpec | None = Field(
        default=None,
        description="RunPod's start() options for the handler: return_aggregate_stream, refresh_worker",
    )

    @field_validator("locations", mode="before")
    @classmethod
    def _bounded_locations(cls, value: Any) -> Any:
        """A comma string of at most ``MAX_TEXT`` characters, or a list of at most ``MAX_ITEMS`` ids."""
        if value is None:
            return None
        if isinstance(value, str):
            if len(value) > MAX_TEXT:
                raise ValueError(f"must be at most {MAX_TEXT} characters")
            return value
        if isinstance(value, list):
            if len(value) > MAX_ITEMS:
                raise ValueError(f"must have at most {MAX_ITEMS} items")
            if not all(isinstance(v, str) and len(v) <= MAX_ITEMS for v in value):
                raise ValueError(f"every item must be a data-center id of at most {MAX_ITEMS} characters")
            return value
        raise ValueError('must be a comma string ("EU-RO-1,US-TX-3") or a list of strings')

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

    def worker_fields(self) -> dict[str, Any]:
        """The fields about how a worker runs (not part of the seed's normalized spec), as stored: the
        handler's ``handlerConfig``; a worker ``command`` with its ``workdir``; ``env`` (``template.env``
        merged under ``env``: a command's or a handler's environment, and the template's on RunPod) and
        ``containerDiskInGb`` (or ``template.containerDiskInGb``)."""
        if self.handlerConfig is not None and self.handler is None:
            raise InvalidSpecError(
                "handlerConfig", "applies to a handler endpoint only", 'set handler: "module:function"'
            )
        if self.command is not None and self.handler is not None:
            raise InvalidSpecError(
                "command",
                "cannot be given with handler",
                "give handler (a Python function Scalar calls) or command (a RunPod worker), not both",
            )
        out: dict[str, Any] = {}
        if self.handlerConfig is not None:
            out["handlerConfig"] = self.handlerConfig.model_dump()
        template = self.template
        disk = template.containerDiskInGb if template is not None else None
        if disk is not None and self.containerDiskInGb is not None and disk != self.containerDiskInGb:
            raise InvalidSpecError(
                "template.containerDiskInGb",
                f"{disk} disagrees with containerDiskInGb {self.containerDiskInGb}",
                "give only one of containerDiskInGb and template.containerDiskInGb",
            )
        if (disk := disk if disk is not None else self.containerDiskInGb) is not None:
            out["containerDiskInGb"] = disk
        template_env = {v.key: v.value for v in (template.env or [])} if template else {}
        env = {**template_env, **(self.env or {})}
        for key in env:
            if key in RUNPOD_SET_ENV or key.startswith("SCALAR_"):
                raise InvalidSpecError(f"env.{key}", "is set by Scalar for every worker", "leave it out")
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise InvalidSpecError(
                    f"env.{key}",
                    "is not a variable name",
                    "use letters, digits and _, not starting with a digit",
                )
            if "\x00" in env[key]:
                raise InvalidSpecError(f"env.{key}", "holds a NUL character", "remove it")
        if env:
            out["env"] = env
        if self.command is None:
            if self.workdir is not None:
                raise InvalidSpecError(
                    "workdir",
                    "applies to a worker command only",
                    'add command: ["python", "-u", "handler.py"]',
                )
            return out
        if not self.command[0].strip():
            raise InvalidSpecError(
                "command[0]", "is empty", 'give the program to run, e.g. ["python", "-u", "handler.py"]'
            )
        if self.workdir is not None and not self.workdir.startswith("/"):
            raise InvalidSpecError(
                "workdir",
                f"{self.workdir!r} is not an absolute path",
                "give an absolute path on the node, e.g. /srv/worker",
            )
        out["command"] = list(self.command)
        out["workdir"] = self.workdir
        out["env"] = env
        return out

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


LIVE_KIND = r"^\s*[Ll][Ii][Vv][Ee]\s*$"
"""``kind: live`` as the domain reads it (any case, spaces around)."""


def spec_body_schema(*, create: bool) -> dict[str, Any]:
    """The JSON schema of a spec as ``POST /endpoints`` (``create``: ``name`` required) or ``PATCH
    /endpoints/{id}`` (the fields to change) takes it, with the name rule the domain checks. Rules that
    span fields (``gpus`` against ``gpuIds``, known GPU and CUDA names) stay in the domain's 422s."""
    schema = EndpointSpecFile.model_json_schema()
    name = {
        "type": "string",
        "pattern": f"^{NAME_PATTERN.pattern}$",
        "description": "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
    }
    schema["properties"]["name"] = name if create else {"anyOf": [name, {"type": "null"}]}
    if create:
        schema["required"] = ["name"]
        # what the workers run: an image (or RunPod's template.imageName), a Python handler, or kind live
        schema["anyOf"] = [
            {"required": ["imageName"]},
            {"required": ["template"]},
            {"required": ["handler"]},
            {"required": ["kind"], "properties": {"kind": {"type": "string", "pattern": LIVE_KIND}}},
            {"required": ["live"], "properties": {"live": {"const": True}}},
        ]
    schema["description"] = "the endpoint spec (docs/formats/endpoint.md); " + (
        "name is required" if create else "the fields given replace the current ones"
    )
    return {"requestBody": {"content": {"application/json": {"schema": schema}}}}
