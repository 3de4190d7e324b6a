"""Jobs on the wire: the POST /jobs body, the job the API returns, and RFC 9457 problem details.

``JobSubmission`` is the body of ``POST /jobs`` (and the JOB.json that ``scalar submit --file`` reads): seed
001's job fields plus an optional ``name``, ``gpu_models`` (an ordered preference), ``cuda_versions`` and
``share_gpu``, ``restartable`` (it may be moved to a cheaper node and restart), and for a job with a command ``ports`` (how many TCP ports its node's agent allocates).
Unknown keys are refused, so a
typo (``gpus``) is named instead of silently ignored. Bounds are generous but finite, so no value the schema
accepts can overflow a database column or a clock.

``field_problems`` turns a pydantic ``ValidationError`` into ``FieldProblem`` entries (field, problem,
fix) that the API returns inside a ``ProblemDetails`` body and the CLI prints line by line.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
)

from scalar.domain.tier import Tier

# Every state a job can be in (the engine's JobState; a test keeps the two equal).
JOB_STATES: tuple[str, ...] = (
    "PENDING",
    "SCHEDULED",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "PREEMPTED",
    "REJECTED",
)
TIERS: tuple[str, ...] = tuple(t.value for t in Tier)
JobOrder = Literal["oldest", "newest"]
"""``GET /jobs?order=``: submission order (the default), or the newest job first."""


def one_of(values: Iterable[str]) -> Any:
    """``json_schema_extra`` documenting a string field's values as an ``enum`` (for ``str | None``: on
    the string branch, so ``null`` stays allowed). The field's type stays ``str``: readers are lenient."""
    allowed = list(values)

    def extra(schema: dict[str, Any]) -> None:
        for branch in schema.get("anyOf", [schema]):
            if branch.get("type") == "string":
                branch["enum"] = allowed

    return extra


# Finite bounds: large enough for any real job, small enough for every column and clock.
MAX_GPUS = 100_000
MAX_VRAM_PER_GPU_GB = 10_000.0
MAX_CPU_CORES = 100_000.0
MAX_RAM_GB = 1_000_000.0
MAX_DURATION_SEC = 366 * 86_400.0
MAX_PRIORITY = 1_000_000_000
MAX_NAME_LENGTH = 200
MAX_GPU_MODELS = 32
MAX_GPU_MODEL_LENGTH = 64
MAX_CUDA_VERSIONS = 16
CUDA_VERSION_PATTERN = re.compile(r"^\d{1,3}\.\d{1,3}$")
MAX_PORTS = (
    16  # TCP ports a job with a command may ask its node's agent for (docs/agent.md, Execution, "Ports")
)

DEFAULT_DURATION_SEC = 3600.0

# What to do about each field, shown as ``fix`` next to the problem.
FIELD_FIXES: dict[str, str] = {
    "tier": "use FAST (capacity is bought now) or FLEX (waits for capacity under the FLEX price cap)",
    "gpu_count": f"give a whole number of GPUs from 0 (CPU only) to {MAX_GPUS}",
    "vram_per_gpu_gb": f"give the GB of GPU memory each GPU needs, a number from 0 to {MAX_VRAM_PER_GPU_GB:g}",
    "cpu_cores": f"give the CPU cores needed (per node for a gang), a number from 0 to {MAX_CPU_CORES:g}",
    "ram_gb": f"give the GB of RAM needed (per node for a gang), a number from 0 to {MAX_RAM_GB:g}",
    "expected_duration_sec": (
        f"give the expected run time in seconds, more than 0 and at most {MAX_DURATION_SEC:g} (366 days)"
    ),
    "priority": f"give a whole number from -{MAX_PRIORITY} to {MAX_PRIORITY}; higher runs first",
    "name": f"give a label of 1 to {MAX_NAME_LENGTH} printable characters, or leave it out",
    "gpu_models": (
        f'list 1 to {MAX_GPU_MODELS} accepted GPU model names, most preferred first (e.g. ["H200", "H100"]), '
        "or leave it out to accept any model"
    ),
    "cuda_versions": (
        f'list 1 to {MAX_CUDA_VERSIONS} CUDA versions written MAJOR.MINOR (e.g. ["12.4", "12.8"]), or leave it '
        "out to accept any"
    ),
    "share_gpu": "give true to let the job share a GPU with others, or false",
    "restartable": (
        "give true if the job may be stopped and started again on another node (it checkpoints or can "
        "start over), or false"
    ),
    "ports": (
        f"give how many TCP ports the agent should allocate for the command, a whole number from 0 to {MAX_PORTS} "
        "(they arrive as $PORT and $SCALAR_PORTS); ports need a command"
    ),
    "command": 'give argv as a list of strings without NUL characters, e.g. ["python", "train.py"]',
    "env": (
        'give {"NAME": "value"} (or {"NAME": {"value": "...", "secret": true}}): names without "=" or NUL, '
        "values without NUL"
    ),
    "workdir": "give a directory path without NUL characters, or leave it out",
}


def _fields_of(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def _upper(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


def _printable(value: str, what: str) -> str:
    if any(unicodedata.category(ch).startswith("C") for ch in value):
        raise ValueError(f"{what} must not contain control characters")
    if not value.strip():
        raise ValueError(f"{what} must not be blank")
    return value.strip()


TierName = Annotated[Literal["FAST", "FLEX"], BeforeValidator(_upper)]


def _cuda_version(value: str) -> str:
    text = value.strip()
    if not CUDA_VERSION_PATTERN.match(text):
        raise ValueError(f'{value!r} is not a CUDA version; write MAJOR.MINOR, e.g. "12.4"')
    return text


CudaVersionText = Annotated[
    str, Field(min_length=1, max_length=16, strict=True), AfterValidator(_cuda_version)
]


# ------------------------------------------------------------------------------------------------ input


MAX_ARGS = 4096
MAX_ARG_LENGTH = 100_000
MAX_ENV = 1000
# A secret env value is stored sealed (``scalar-secret:v1:<ciphertext>``, runtime/secrets.py) and shown so.
SECRET_PREFIX = "scalar-secret:"
REDACTED = "***"


def no_nul(value: str) -> str:
    """An argv word or env value: a NUL cannot reach a process (execve ends the string there)."""
    if "\x00" in value:
        raise ValueError("must not contain a NUL character (\\u0000): a process cannot receive it")
    return value


def env_key(value: str) -> str:
    """An environment variable's name: no ``=`` (it ends the name) and no NUL."""
    if "=" in value or "\x00" in value:
        raise ValueError("an environment variable's name must not contain '=' or a NUL character")
    return value


def _no_nul_env_value(value: Any) -> Any:
    no_nul(value if isinstance(value, str) else value.value)
    return value


class SecretEnvValue(BaseModel):
    """``{"value": "...", "secret": true}``: stored encrypted, shown as ``***``, given only to the agent."""

    model_config = ConfigDict(extra="forbid")

    value: str = Field(max_length=MAX_ARG_LENGTH, strict=True)
    secret: StrictBool = False


class JobSubmission(BaseModel):
    """A job to run: ``POST /jobs``. For a gang (more GPUs than a node has), CPU and RAM are per node."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "tier": "FAST",
                    "gpu_count": 4,
                    "vram_per_gpu_gb": 40,
                    "cpu_cores": 16,
                    "ram_gb": 128,
                    "expected_duration_sec": 1800,
                    "priority": 5,
                    "name": "finetune-llama",
                }
            ]
        },
    )

    tier: TierName = Field(description="FAST buys capacity now; FLEX waits for capacity under its price cap")
    gpu_count: StrictInt = Field(ge=0, le=MAX_GPUS, description="GPUs the job needs (0: CPU only)")
    vram_per_gpu_gb: float = Field(
        default=0.0, ge=0, le=MAX_VRAM_PER_GPU_GB, strict=True, allow_inf_nan=False, description="GB per GPU"
    )
    cpu_cores: float = Field(
        default=0.0, ge=0, le=MAX_CPU_CORES, strict=True, allow_inf_nan=False, description="cores (per node)"
    )
    ram_gb: float = Field(
        default=0.0, ge=0, le=MAX_RAM_GB, strict=True, allow_inf_nan=False, description="GB (per node)"
    )
    expected_duration_sec: float = Field(
        default=DEFAULT_DURATION_SEC,
        gt=0,
        le=MAX_DURATION_SEC,
        strict=True,
        allow_inf_nan=False,
        description="expected run time in seconds",
    )
    priority: StrictInt = Field(
        default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="higher runs first (seed 001)"
    )
    name: str | None = Field(
        default=None, min_length=1, max_length=MAX_NAME_LENGTH, strict=True, description="a label"
    )
    gpu_models: (
        list[Annotated[str, Field(min_length=1, max_length=MAX_GPU_MODEL_LENGTH, strict=True)]] | None
    ) = Field(
        default=None,
        min_length=1,
        max_length=MAX_GPU_MODELS,
        description='accepted GPU models, most preferred first, e.g. ["H200", "H100"]; leave out to accept '
        "any. Among the nodes that fit, the packer takes the earliest model, then the lowest $/GPU-hour",
    )
    cuda_versions: list[CudaVersionText] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CUDA_VERSIONS,
        description='CUDA versions the job accepts, e.g. ["12.4", "12.8"] (exact major.minor; a node of '
        "unknown CUDA version is accepted); leave out to accept any",
    )
    share_gpu: StrictBool = Field(default=False, description="may share a GPU with other jobs")
    restartable: StrictBool = Field(
        default=False,
        description="may be stopped and started again on a cheaper node (it loses its progress since its "
        "last checkpoint); only FLEX jobs are ever moved",
    )
    command: (
        list[Annotated[str, Field(max_length=MAX_ARG_LENGTH, strict=True), AfterValidator(no_nul)]] | None
    ) = Field(
        default=None,
        min_length=1,
        max_length=MAX_ARGS,
        description='what to run, as argv (["python", "train.py"]); leave out for a pure reservation. '
        "A job with a command runs on a node with a Scalar agent (docs/agent.md)",
    )
    env: (
        dict[
            Annotated[str, Field(min_length=1, max_length=MAX_ARG_LENGTH), AfterValidator(env_key)],
            Annotated[
                Annotated[str, Field(strict=True, max_length=MAX_ARG_LENGTH)] | SecretEnvValue,
                AfterValidator(_no_nul_env_value),
            ],
        ]
        | None
    ) = Field(
        default=None,
        max_length=MAX_ENV,
        description='environment variables for the command; {"value": "...", "secret": true} for a secret',
    )
    workdir: Annotated[str, AfterValidator(no_nul)] | None = Field(
        default=None, min_length=1, max_length=MAX_ARG_LENGTH, strict=True, description="working directory"
    )
    ports: StrictInt = Field(
        default=0,
        ge=0,
        le=MAX_PORTS,
        description="how many free TCP ports the node's agent allocates for the command (given to it as "
        "$PORT, the first, and $SCALAR_PORTS, comma-separated; GET /jobs/{id} shows them as "
        "allocated_ports); needs a command",
    )

    @field_validator("name")
    @classmethod
    def _name_printable(cls, value: str | None) -> str | None:
        return None if value is None else _printable(value, "name")

    @field_validator("gpu_models")
    @classmethod
    def _models_printable(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        return [_printable(v, "each GPU model name") for v in value]

    def to_fields(self) -> dict[str, Any]:
        """The plain dict ``ControlPlane.submit_job`` takes (optional fields left out when unset)."""
        out = self.model_dump()
        for key in ("name", "gpu_models", "cuda_versions", "command", "env", "workdir"):
            if out.get(key) is None:
                out.pop(key, None)
        if not out.get("ports"):
            out.pop("ports", None)  # a job without ports is sent exactly as before
        if not out.get("restartable"):
            out.pop("restartable", None)
        return out


# ----------------------------------------------------------------------------------------------- output


class PlacementOut(BaseModel):
    node_id: str
    gpu_indices: list[int] = Field(default_factory=list)


class PlacementSpanOut(BaseModel):
    """Where part of a job was held, from when to when (``to`` is null while it still holds it)."""

    model_config = ConfigDict(populate_by_name=True)

    node_id: str
    gpu_indices: list[int] = Field(default_factory=list)
    since: datetime = Field(alias="from")
    until: datetime | None = Field(default=None, alias="to")


class JobOut(BaseModel):
    """A job as the API returns it; ``reason`` is one line saying why it is in its state."""

    id: str
    name: str | None = None
    state: str = Field(description="one of " + ", ".join(JOB_STATES), json_schema_extra=one_of(JOB_STATES))
    reason: str | None = Field(default=None, description="why the job is in this state, in one line")
    reason_code: str | None = Field(default=None, description="the reason as a stable code")
    tier: str
    gpu_count: int
    vram_per_gpu_gb: float = 0.0
    cpu_cores: float = 0.0
    ram_gb: float = 0.0
    expected_duration_sec: float = DEFAULT_DURATION_SEC
    priority: int = 0
    gpu_models: list[str] | None = None
    cuda_versions: list[str] | None = None
    share_gpu: bool = False
    restartable: bool = Field(default=False, description="may be moved to a cheaper node (restarts)")
    submitted_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    placements: list[PlacementOut] = Field(default_factory=list)
    placement_history: list[PlacementSpanOut] = Field(
        default_factory=list, description="every placement the job had, kept after it finishes"
    )
    preemptions: int = Field(default=0, description="how often the job lost its node and was queued again")
    cancel_requested: bool = Field(
        default=False, description="a cancellation is on its way to the controller"
    )
    tenant: str = Field(default="default", description="the tenant that submitted the job")
    command: list[str] | None = Field(
        default=None, description="what the job runs (argv); null: a reservation"
    )
    env: dict[str, str] | None = None
    workdir: str | None = None
    ports: int = Field(default=0, description="how many TCP ports the job asked its node's agent for")
    allocated_ports: list[int] | None = Field(
        default=None,
        description="the TCP ports the agent allocated for the current attempt ($SCALAR_PORTS), once it "
        "reported them; null before that and for a job without ports",
    )

    @field_validator("env")
    @classmethod
    def _hide_secrets(cls, env: dict[str, str] | None) -> dict[str, str] | None:
        """Secret values never leave the API: shown as ``***``."""
        if env is None:
            return None
        return {k: REDACTED if v.startswith(SECRET_PREFIX) else v for k, v in env.items()}


class JobListOut(BaseModel):
    """A page of ``GET /jobs``: ``count`` jobs (at most ``limit``) in ``order``, filtered by ``state``, from
    the cursor ``after`` (or skipping ``offset``); ``next``/``prev``: the cursors of the pages after and
    before this one (``null`` at either end)."""

    jobs: list[JobOut]
    count: int
    limit: int
    offset: int
    state: str | None = Field(default=None, json_schema_extra=one_of(JOB_STATES))
    order: JobOrder = "newest"
    after: str | None = Field(default=None, description="the cursor this page starts after")
    next: str | None = Field(default=None, description="pass as `after` for the next page; null: the last")
    prev: str | None = Field(default=None, description="pass as `after` for the page before; null: the first")


HEALTH_STATUSES = ("ok", "starting", "degraded")
HEALTH_PROBLEMS = {
    "not-open": "the control plane is still opening its database",
    "first-step": "the controller has not finished its first step (replaying the log, first prices) yet",
    "database-unavailable": "the database cannot be reached",
    "no-leader": "no process has held the leader lease for a while: nothing is being scheduled",
}
"""``problem`` codes of a health that is not ``ok``, with what each means (docs/security.md)."""


class HealthOut(BaseModel):
    """``GET /healthz`` (public): ``status`` ok | starting | degraded and, unless ok, a ``problem`` code.
    Never a URL, host, pid or driver text; admins read those from ``GET /healthz/details``."""

    model_config = ConfigDict(extra="ignore")

    status: Literal["ok", "starting", "degraded"]
    problem: str | None = Field(
        default=None, description="why it is not ok, a stable code: " + ", ".join(HEALTH_PROBLEMS)
    )
    role: Literal["leader", "follower"] | None = Field(
        default=None, description="whether this process leads the control plane"
    )
    last_step_at: datetime | None = None


class HealthDetailsOut(HealthOut):
    """``GET /healthz/details`` (admin): the health with where the database is and who leads."""

    database: str | None = Field(default=None, description="the database URL, password hidden")
    backend: str | None = Field(default=None, description="the database's kind: sqlite or postgresql")
    holder: str | None = Field(default=None, description="this process (host:pid:id)")
    epoch: int | None = None
    lease_holder: str | None = Field(default=None, description="the process that holds the leader lease")
    lease_expires_at: datetime | None = None
    error: str | None = Field(default=None, description="the database driver's error, when unavailable")


# -------------------------------------------------------------------------------------- problem details


class FieldProblem(BaseModel):
    """One thing to fix: which ``field``, what the ``problem`` is, and the ``fix``.

    Refusals by the control plane also carry the reason's ``code`` and its numbers (``need``, ``have``,
    ``limit``): ``{"field": "gpu_count", "code": "too_large", "need": 4096, "have": 32, ...}``.
    """

    field: str
    problem: str
    fix: str
    code: str | None = None
    need: float | int | str | None = None
    have: float | int | str | None = None
    limit: float | int | str | None = None


class ProblemDetails(BaseModel):
    """RFC 9457 problem details (``application/problem+json``), with ``errors`` naming each field."""

    type: str = Field(description="a URI naming the kind of problem, e.g. urn:scalar:problem:invalid-request")
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[FieldProblem] = Field(default_factory=list)

    def lines(self) -> list[str]:
        """The problem as a person reads it: ``error: <detail>`` then one line per field."""
        out = [f"error: {self.detail}"]
        for err in self.errors:
            out.append(f"  {err.field}: {err.problem}")
            if err.fix:
                out.append(f"    fix: {err.fix}")
        return out


def _shown(value: Any) -> str | None:
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):  # pragma: no cover - default=str handles everything
        return None
    return text if len(text) <= 60 else text[:57] + "..."


def _field_name(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if part == "[key]":  # a dict's key is named by the key itself: env.KEY
            continue
        if isinstance(part, str) and not part.isprintable():
            part = part.encode("unicode_escape").decode("ascii")
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += part if not out else f".{part}"
    return out or "(body)"


def _problem_text(error: Any) -> str:
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    loc = tuple(error.get("loc", ()))
    secret = "env" in loc[:2]  # an env value may be a secret: never echoed back
    got = _shown(error.get("input")) if "input" in error and not secret else None
    suffix = f", got {got}" if got is not None else ""
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field"
    if kind in {"greater_than_equal", "greater_than", "less_than_equal", "less_than"}:
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[
            kind
        ]
        bound = next(iter(ctx.values()), "?")
        return f"must be {op} {bound}{suffix}"
    if kind in {"int_type", "int_from_float", "int_parsing"}:
        return f"must be a whole number{suffix}"
    if kind in {"float_type", "float_parsing"}:
        return f"must be a number{suffix}"
    if kind == "finite_number":
        return "must be a finite number"
    if kind in {"bool_type", "bool_parsing"}:
        return f"must be true or false{suffix}"
    if kind == "string_type":
        return f"must be a string{suffix}"
    if kind == "list_type":
        return f"must be a list{suffix}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '?')}{suffix}"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length', '?')} item(s)"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length', '?')} items"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length', '?')} characters"
    if kind in {"model_type", "model_attributes_type", "dict_type"}:
        return f"must be a JSON object{suffix}"
    if kind == "json_invalid":
        return f"is not valid JSON ({ctx.get('error', 'parse error')})"
    message = str(error.get("msg", "is invalid"))
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return message + suffix


# Names people often use for a field, and the field they mean.
FIELD_ALIASES: dict[str, str] = {
    "gpus": "gpu_count",
    "num_gpus": "gpu_count",
    "vram_gb": "vram_per_gpu_gb",
    "vram": "vram_per_gpu_gb",
    "cpu": "cpu_cores",
    "cpus": "cpu_cores",
    "ram": "ram_gb",
    "memory_gb": "ram_gb",
    "duration": "expected_duration_sec",
    "duration_sec": "expected_duration_sec",
    "duration_s": "expected_duration_sec",
}


def _fix_for(field: str, kind: str, known: Sequence[str]) -> str:
    base = field.split(".", 1)[0].split("[", 1)[0]
    if kind == "extra_forbidden":
        if base == "id" and "name" in known:
            return "remove it: the server chooses job ids; put your own label in 'name'"
        alias = FIELD_ALIASES.get(base.lower())
        close = [alias] if alias in known else difflib.get_close_matches(base, known, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"{hint}remove it; the known fields are {', '.join(known)}"
    if field == "(body)":
        return 'send a JSON object with the job\'s fields, e.g. {"tier": "FAST", "gpu_count": 1}'
    if base in FIELD_FIXES:
        return FIELD_FIXES[base]
    return f"correct {field} and try again"


def field_problems(
    errors: Iterable[Any], *, known_fields: Sequence[str] | None = None, strip: int = 0
) -> list[FieldProblem]:
    """Turn pydantic error dicts into ``FieldProblem`` entries; ``strip`` drops leading ``loc`` parts
    (FastAPI prefixes ``body``/``query``/``path``)."""
    known = list(known_fields if known_fields is not None else _fields_of(JobSubmission))
    out: list[FieldProblem] = []
    for error in errors:
        loc = tuple(error.get("loc", ()))[strip:]
        field = _field_name(loc)
        kind = str(error.get("type", ""))
        out.append(FieldProblem(field=field, problem=_problem_text(error), fix=_fix_for(field, kind, known)))
    return out


def submission_problems(exc: ValidationError) -> list[FieldProblem]:
    """The problems of a ``JobSubmission`` that failed to validate."""
    return field_problems(exc.errors(include_url=False))
