"""The control plane's settings: ``scalar.toml`` (see ``scalar.example.toml``), flags and the environment.

``load_settings(config_path, overrides, env)`` layers, on pydantic-settings, the file
(``TomlConfigSettingsSource``), ``SCALAR_DATABASE_URL`` and the command-line overrides, and validates
everything at once against the file's shape: one pydantic model per section (``LoopsSection`` ...), unknown
sections and keys refused. A bad value raises :class:`SettingsError` naming the key and saying how to fix it
(``scalar.toml: [loops].tick_s: must be > 0, got -1``): :func:`_refusal` maps a ``ValidationError``'s
location and type to that form. Without a file every setting has a sensible default: the built-in market on
SQLite under ``./.scalar``.

Precedence, highest first: ``overrides`` (command-line flags), the environment (``SCALAR_DATABASE_URL``),
the file, the defaults. The defaults live in the dataclasses the rest of the code runs with (``Settings``,
``KubernetesSettings`` ...); the section models only say what may be written and how it is checked.
"""

from __future__ import annotations

import os
import re
import socket
import tomllib
import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from scalar.agent.facts import FactsError, parse_fake_gpus
from scalar.agent.isolation import JOB_USERS, SANDBOXES, IsolationError, parse_uid_range
from scalar.domain.consolidation import ConsolidationPolicy
from scalar.domain.errors import InvalidSpecError
from scalar.engine.budget import limits_from_list
from scalar.engine.config import ConfigError, ControllerConfig
from scalar.providers.builtin.config import MARKET_PROVIDERS, MarketConfig, MarketConfigError
from scalar.store.db import DATABASE_URL_ENV, default_database_url, normalize_url
from scalar.store.errors import UnsupportedDatabaseError

DEFAULT_DATA_DIR = Path(".scalar")
CONFIG_NAME = "scalar.toml"


class SettingsError(Exception):
    """An invalid setting. ``key`` is where it lives (``[loops].tick_s``); the message says how to fix it."""

    def __init__(self, key: str, problem: str, hint: str | None = None, *, source: str = CONFIG_NAME) -> None:
        self.key = key
        self.problem = problem
        self.hint = hint
        self.source = source
        text = f"{source}: {key}: {problem}"
        if hint:
            text += f"; {hint}"
        super().__init__(text)


def new_holder() -> str:
    """A lease holder name unique to this process lifetime: ``host:pid:uuid4``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"


@dataclass(frozen=True)
class ProvidersSettings:
    """Which sellers the control plane trades with.

    ``enabled``: the provider names the built-in market sells for (all of them by default); the controller
    only sees, and buys from, these. ``market_database_url``: where the built-in market keeps its tables
    (``None``: the control plane's own database, so every controller sees one market).
    Real provider clients (``scalar.providers.sfcompute`` ...) read their credentials from
    ``SCALAR_<NAME>_API_KEY``; an enabled one that can buy replaces the built-in seller of its name
    (``scalar.runtime.live_sellers``, ``docs/decisions/live-sellers.md``).
    """

    enabled: tuple[str, ...] = MARKET_PROVIDERS
    market_database_url: str | None = None
    # [providers.sfcompute]: how the real SFCompute client buys (v0 orders, or the nodes API with the agent)
    sfcompute: SFComputeBuySettings | None = None


@dataclass(frozen=True)
class SFComputeBuySettings:
    """``[providers.sfcompute]``: ``buy_via = "nodes"`` buys through SFCompute's nodes API (``POST /v1/nodes``)
    with cloud-init user data that starts the node agent (docs/providers.md, "SFCompute through the nodes
    API"); ``"orders"`` (the default) keeps ``POST /v0/orders``. ``controller_url`` is the URL the nodes'
    agents dial; ``python``/``pip_spec`` tell the bootstrap script how to find or install the agent."""

    buy_via: str = "orders"
    controller_url: str = ""
    image_id: str | None = None
    zone: str | None = None
    node_type: str = "autoreserved"
    python: str = "python3"
    pip_spec: str | None = None
    join_token_ttl_s: float = 3600.0


DEFAULT_AGENT_COMMAND = ("python", "-m", "scalar.agent")


@dataclass(frozen=True)
class KubernetesSettings:
    """``[kubernetes]``: run the node agent of every node bought from ``providers`` as one pod in a
    Kubernetes namespace (``scalar.runtime.k8s_backend``, docs/agent.md "Kubernetes backend").

    Where the API is: ``kubeconfig`` (a file; ``context`` picks one of its contexts) or ``server`` with the
    bearer token in the environment variable ``token_env`` (never in the file). ``controller_url`` is the
    URL the agents dial (reachable from the pods, unlike a loopback bind); ``image`` has Scalar installed
    and runs ``agent_command``; ``fake_gpus`` (``8xH100-80GB``) sets ``SCALAR_FAKE_GPUS`` in the pod, for
    clusters without NVIDIA drivers.
    """

    providers: tuple[str, ...] = ("sfcompute",)
    namespace: str = "default"
    kubeconfig: str | None = None
    context: str | None = None
    server: str | None = None
    token_env: str = "SCALAR_KUBERNETES_TOKEN"
    controller_url: str = ""
    image: str = ""
    agent_command: tuple[str, ...] = DEFAULT_AGENT_COMMAND
    fake_gpus: str | None = None
    gpu_resource: str = "nvidia.com/gpu"
    reconcile_s: float = 5.0
    join_token_ttl_s: float = 3600.0


@dataclass(frozen=True)
class Settings:
    """Everything a ``ControlPlane`` runs with. Times in seconds."""

    data_dir: Path = DEFAULT_DATA_DIR
    database_url: str = (
        ""  # "": sqlite:///<data_dir>/scalar.db (load_settings also reads SCALAR_DATABASE_URL)
    )
    host: str = "127.0.0.1"
    port: int = 8000
    demo: bool = False
    time_scale: float = 1.0  # built-in market: boot delays and contract lengths divided by N
    market_seed: int | None = None
    boot_failure_rate: float = 0.0
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    tick_s: float = 1.0  # how often the leader steps the engine (a Tick)
    price_interval_s: float = 15.0  # how often offers and books are collected (MarketObserved)
    executor_interval_s: float = 0.2  # how often the idle executor looks for new actions
    executor_batch: int = 8  # actions claimed at once
    action_stale_after_s: float = 120.0  # an in-flight claim older than this is claimed again
    retry_backoff_s: float = 2.0  # first retry delay after a retryable provider error (doubles)
    retry_backoff_max_s: float = 120.0
    park_ttl_s: float = 600.0  # node events about nodes the controller does not know yet wait this long
    lease_name: str = "controller"
    lease_ttl_s: float = 10.0
    lease_renew_s: float = 2.0
    # node agents (docs/agent.md): heartbeat period, and the lease: SUSPECT after, then LOST after
    agent_heartbeat_s: float = 2.0
    agent_suspect_after_s: float = 10.0
    agent_lost_after_s: float = 30.0
    # how the agents run jobs (docs/security.md, "Jobs on a node"); `scalar up --demo`'s local agent takes
    # them, other agents take the matching `scalar agent` flags
    agent_job_user: str = "per-tenant"  # or "same-user"
    agent_sandbox: str = "auto"  # "bwrap" | "none" | "auto" (bwrap when root and installed)
    agent_uid_range: tuple[int, int] = (200000, 265535)
    agent_log_max_bytes_per_attempt: int = 64 * 1024 * 1024
    # [logs]: job output kept by the controller (oldest finished jobs' output pruned first)
    logs_max_bytes_per_tenant: int = 1024 * 1024 * 1024
    logs_retention_s: float = 7 * 86400.0
    holder: str = field(default_factory=new_holder)  # unique per process: host:pid:uuid4
    providers: ProvidersSettings = field(default_factory=ProvidersSettings)
    # API tokens required on every route but /healthz (docs/security.md); `scalar up --no-auth` turns it off
    # and is refused unless the server binds to loopback only.
    auth_required: bool = True
    rate_per_s: float = 50.0  # requests a second per API token (a token bucket; 429 beyond it)
    rate_burst: float = 200.0  # the bucket's size: requests one token may make at once
    # [kubernetes]: agents of bought nodes run as pods (None: off; scalar.runtime.k8s_backend)
    kubernetes: KubernetesSettings | None = None
    # [endpoints] handlers: the modules (or module prefixes) whose functions users may deploy as a local
    # endpoint's handler; anything else only an admin may deploy (docs/security.md)
    endpoint_handlers: tuple[str, ...] = ()
    # [endpoints] (docs/endpoints.md): how often a request whose worker died under it is delivered again
    # before it FAILS, and whether webhooks may go to loopback or private addresses (off: a tenant's
    # webhook cannot reach the control plane's own network)
    endpoint_max_request_retries: int = 2
    endpoint_webhook_allow_private: bool = False

    def __post_init__(self) -> None:
        if not self.database_url:
            object.__setattr__(self, "database_url", default_database_url(self.data_dir))

    @property
    def market_database_url(self) -> str:
        return self.providers.market_database_url or self.database_url

    def market_config(self) -> MarketConfig:
        return MarketConfig(
            seed=self.market_seed, time_scale=self.time_scale, boot_failure_rate=self.boot_failure_rate
        )


# ---- the file's shape: one model per section, the value types they share ---------------------------------


def _refuse(problem: str, hint: str | None = None, *, at: str | None = None) -> PydanticCustomError:
    """A check's own words; ``at`` (a dotted key) replaces the key below the table (``[controller].<at>``)."""
    return PydanticCustomError("setting", "{problem}", {"problem": problem, "hint": hint, "at": at})


def _hint(text: str) -> dict[str, Any]:
    return {"hint": text}


def _text(value: Any) -> Any:
    """A path is a string; blanks around a string do not count."""
    if isinstance(value, Path):
        value = str(value)
    return value.strip() if isinstance(value, str) else value


def _database_url(text: str) -> str:
    if text:
        try:
            normalize_url(text)
        except UnsupportedDatabaseError as err:
            raise _refuse(err.message, err.hint) from None
    return text


def _one_of(choices: tuple[str, ...]) -> AfterValidator:
    def check(value: str) -> str:
        if value not in choices:
            raise _refuse(f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    return AfterValidator(check)


def _provider(name: str) -> str:
    if name not in MARKET_PROVIDERS:
        raise _refuse(f"unknown provider {name!r}", f"use some of {', '.join(MARKET_PROVIDERS)}")
    return name


_MODULE_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\.|:[A-Za-z_][A-Za-z0-9_]*)?")


def _module(entry: str) -> str:
    if _MODULE_ENTRY.fullmatch(entry) is None:
        raise _refuse(
            f"is not a module, module prefix or module:function, got {entry!r}",
            'write e.g. "my_service" (it and its submodules), "my_service." (its submodules) or '
            '"my_service.handlers:square"',
        )
    return entry


def _unique(items: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _uid_range(value: Any) -> tuple[int, int]:
    try:
        return parse_uid_range(value)
    except IsolationError as err:
        raise _refuse(str(err)) from None


def _fake_gpus(text: str) -> str:
    try:
        parse_fake_gpus(text)
    except FactsError as err:
        raise _refuse(str(err), "e.g. 8xH100-80GB") from None
    return text


def _http_url(hint: str) -> AfterValidator:
    def check(url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise _refuse(f"must be an http(s) URL, got {url!r}", hint)
        return url

    return AfterValidator(check)


Text = Annotated[
    str,
    BeforeValidator(_text),
    Strict(),
    StringConstraints(min_length=1),
    Field(description="a non-empty string"),
]
DatabaseUrl = Annotated[
    str,
    BeforeValidator(_text),
    Strict(),
    AfterValidator(_database_url),
    Field(description="a database URL string"),
]
Seconds = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]
Rate = Annotated[
    float, Strict(), Field(ge=0, le=1, allow_inf_nan=False, description="a probability between 0 and 1")
]
Count = Annotated[int, Strict(), Field(ge=1, description="a whole number >= 1")]
Whole = Annotated[int, Strict(), Field(ge=0, description="a whole number >= 0")]
Bytes = Annotated[
    int,
    Strict(),
    Field(
        ge=1, description="a whole number of bytes >= 1", json_schema_extra=_hint("e.g. 67108864 (64 MiB)")
    ),
]
Port = Annotated[int, Strict(), Field(ge=0, le=65535, description="a port number 0-65535")]
Flag = Annotated[bool, Strict(), Field(description="true or false")]
Providers = Annotated[
    tuple[Annotated[str, Strict(), AfterValidator(_provider)], ...],
    Field(min_length=1, description="a non-empty list of provider names"),
    AfterValidator(_unique),
]


class _Section(BaseModel):
    """A table of the file: unknown keys are refused. A field's ``serialization_alias`` is the ``Settings``
    field it sets (the key itself when there is none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def values(self) -> dict[str, Any]:
        """What the table sets, keyed by ``Settings`` field (tables inside it left out)."""
        data = self.model_dump(exclude_unset=True, by_alias=True)
        return {k: v for k, v in data.items() if not isinstance(v, dict)}


class ServerSection(_Section):
    host: Text | None = None
    port: Port | None = None
    demo: Flag | None = None
    auth: Flag | None = Field(None, serialization_alias="auth_required")
    rate_per_s: Positive | None = None
    rate_burst: Positive | None = None


class StoreSection(_Section):
    data_dir: Text | None = None
    database_url: DatabaseUrl | None = None


class MarketSection(_Section):
    seed: Whole | None = Field(
        None,
        serialization_alias="market_seed",
        json_schema_extra=_hint("leave it out to keep the stored seed"),
    )
    time_scale: Positive | None = None
    boot_failure_rate: Rate | None = None
    database_url: DatabaseUrl | None = Field(None, serialization_alias="market_database_url")


class LoopsSection(_Section):
    tick_s: Positive | None = None
    price_interval_s: Positive | None = None
    executor_interval_s: Positive | None = None
    executor_batch: Count | None = None
    action_stale_after_s: Positive | None = None
    retry_backoff_s: Seconds | None = None
    retry_backoff_max_s: Seconds | None = None
    park_ttl_s: Seconds | None = None


class LeaseSection(_Section):
    name: Text | None = Field(None, serialization_alias="lease_name")
    ttl_s: Positive | None = Field(None, serialization_alias="lease_ttl_s")
    renew_s: Positive | None = Field(None, serialization_alias="lease_renew_s")


class SFComputeSection(_Section):
    """``[providers.sfcompute]``, read into :class:`SFComputeBuySettings`."""

    buy_via: Annotated[str, Strict(), _one_of(("orders", "nodes"))] | None = None
    controller_url: Text | None = None
    image_id: Text | None = None
    zone: Text | None = None
    node_type: Annotated[str, Strict(), _one_of(("autoreserved", "reserved"))] | None = None
    python: Text | None = None
    pip_spec: Text | None = None
    join_token_ttl_s: Positive | None = None

    @model_validator(mode="after")
    def _nodes_need_a_url(self) -> SFComputeSection:
        url = self.controller_url or ""
        if self.buy_via == "nodes" and not url.startswith(("http://", "https://")):
            raise _refuse(
                'is required with buy_via = "nodes"' if not url else f"must be an http(s) URL, got {url!r}",
                'the bought nodes\' agents dial it: e.g. controller_url = "https://scalar.example:8000"',
                at="controller_url",
            )
        return self


class ProvidersSection(_Section):
    enabled: Providers | None = None
    sfcompute: SFComputeSection | None = None


class AgentsSection(_Section):
    heartbeat_s: Positive | None = Field(None, serialization_alias="agent_heartbeat_s")
    suspect_after_s: Positive | None = Field(None, serialization_alias="agent_suspect_after_s")
    lost_after_s: Positive | None = Field(None, serialization_alias="agent_lost_after_s")
    job_user: Annotated[str, Strict(), _one_of(JOB_USERS)] | None = Field(
        None, serialization_alias="agent_job_user"
    )
    sandbox: Annotated[str, Strict(), _one_of(SANDBOXES)] | None = Field(
        None, serialization_alias="agent_sandbox"
    )
    uid_range: Annotated[tuple[int, int], PlainValidator(_uid_range)] | None = Field(
        None, serialization_alias="agent_uid_range"
    )
    log_max_bytes_per_attempt: Bytes | None = Field(
        None, serialization_alias="agent_log_max_bytes_per_attempt"
    )


class LogsSection(_Section):
    max_bytes_per_tenant: Bytes | None = Field(None, serialization_alias="logs_max_bytes_per_tenant")
    retention_s: Positive | None = Field(None, serialization_alias="logs_retention_s")


class EndpointsSection(_Section):
    handlers: (
        Annotated[tuple[Annotated[str, Strict(), AfterValidator(_module)], ...], AfterValidator(_unique)]
        | None
    ) = Field(
        None,
        serialization_alias="endpoint_handlers",
        description="a list of module names",
        json_schema_extra=_hint('e.g. ["my_service.handlers"]'),
    )
    max_request_retries: Whole | None = Field(None, serialization_alias="endpoint_max_request_retries")
    webhook_allow_private: Flag | None = Field(None, serialization_alias="endpoint_webhook_allow_private")


class KubernetesSection(_Section):
    """``[kubernetes]``, read into :class:`KubernetesSettings`."""

    providers: Providers | None = None
    namespace: Text | None = None
    kubeconfig: Text | None = None
    context: Text | None = None
    server: Text | None = None
    token_env: Text | None = None
    controller_url: Annotated[
        Text, _http_url("the agents in the pods dial it: use an address they can reach")
    ] = Field(json_schema_extra=_hint('e.g. controller_url = "http://controller.example:8000"'))
    image: Text = Field(json_schema_extra=_hint('e.g. image = "registry.example/scalar:0.1.0"'))
    agent_command: (
        Annotated[tuple[Annotated[str, Strict(), Field(min_length=1)], ...], Field(min_length=1)] | None
    ) = Field(
        None,
        description="a non-empty list of strings",
        json_schema_extra=_hint('e.g. ["python", "-m", "scalar.agent"]'),
    )
    fake_gpus: Annotated[Text, AfterValidator(_fake_gpus)] | None = None
    # "": request no GPUs (a cluster without the device plugin)
    gpu_resource: Annotated[str, BeforeValidator(_text), Strict()] | None = None
    reconcile_s: Positive | None = None
    join_token_ttl_s: Positive | None = None

    @model_validator(mode="after")
    def _one_api(self) -> KubernetesSection:
        if (self.kubeconfig is None) == (self.server is None):
            raise _refuse(
                "needs exactly one of kubeconfig and server",
                "set kubeconfig = PATH, or server = URL with the token in the environment variable token_env",
            )
        return self


class ConsolidationSection(_Section):
    """``[controller.consolidation]``, read into the engine's ``ConsolidationPolicy``."""

    enabled: Flag | None = None
    max_used_fraction: Rate | None = None
    restart_overhead_s: Seconds | None = None
    max_moves: Whole | None = None


def _controller(value: Any) -> ControllerConfig:
    if isinstance(value, ControllerConfig):
        return value
    if not isinstance(value, Mapping):
        raise _refuse("must be a table")
    body = dict(value)
    if "consolidation" in body:  # ControllerConfig.from_dict takes the policy built
        try:
            section = ConsolidationSection.model_validate(body["consolidation"])
        except ValidationError as err:
            problem, hint, rest = _problem(
                err.errors()[0], ConsolidationSection, list(err.errors()[0]["loc"])
            )
            raise _refuse(problem, hint, at=f"consolidation{_below(rest)}") from None
        body["consolidation"] = ConsolidationPolicy(**section.values())
    try:
        return ControllerConfig.from_dict(body)
    except ConfigError as err:
        raise _refuse(err.problem, err.hint, at=err.field) from None


def _budget_limits(value: Any) -> Any:
    try:
        return limits_from_list(value, "limits")
    except InvalidSpecError as err:
        raise _refuse(err.problem, err.hint, at=err.field) from None


class BudgetsSection(_Section):
    """``[[budgets.limits]]``: spend limits, kept in the controller's config (``ControllerConfig.budgets``)."""

    limits: Annotated[Any, PlainValidator(_budget_limits)] = ()


# what load_settings reads: (the file or None, the environment)
_READING: ContextVar[tuple[Path | None, Mapping[str, str]]] = ContextVar("_READING", default=(None, {}))


class _Environment(PydanticBaseSettingsSource):
    """``SCALAR_DATABASE_URL`` -> ``[store].database_url``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self.url = environ.get(DATABASE_URL_ENV, "").strip()

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {"store": {"database_url": self.url}} if self.url else {}


class Layers(BaseSettings):
    """The file's shape, filled from the layers: flags (init values) over the environment over the file."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, validate_default=False)

    server: ServerSection | None = None
    store: StoreSection | None = None
    market: MarketSection | None = None
    loops: LoopsSection | None = None
    lease: LeaseSection | None = None
    providers: ProvidersSection | None = None
    agents: AgentsSection | None = None
    logs: LogsSection | None = None
    endpoints: EndpointsSection | None = None
    controller: Annotated[Any, PlainValidator(_controller)] = None
    budgets: BudgetsSection | None = None
    kubernetes: KubernetesSection | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path, environ = _READING.get()
        sources = [init_settings, _Environment(settings_cls, environ)]
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


SECTIONS = tuple(Layers.model_fields)
_FLAT = ("server", "store", "market", "loops", "lease", "providers", "agents", "logs", "endpoints")


def _section_model(info: FieldInfo) -> type[_Section] | None:
    for candidate in (info.annotation, *get_args(info.annotation)):
        if isinstance(candidate, type) and issubclass(candidate, _Section):
            return candidate
    return None


# section -> key -> the Settings field it sets (the sections the flags also reach)
SCHEMA: dict[str, dict[str, str]] = {
    section: {
        key: info.serialization_alias or key
        for key, info in model.model_fields.items()
        if _section_model(info) is None
    }
    for section in _FLAT
    if (model := _section_model(Layers.model_fields[section])) is not None
}
_FLAGS = {name: (section, key) for section, keys in SCHEMA.items() for key, name in keys.items()}
_OBJECTS = ("controller", "providers", "holder", "kubernetes")  # flags that carry a built value


# ---- ValidationError -> SettingsError -------------------------------------------------------------------

_TYPES = {
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "int_parsing": "a whole number",
    "bool_type": "true or false",
    "string_type": "a string",
    "tuple_type": "a list",
    "list_type": "a list",
    "too_short": "not empty",
    "model_type": "a table",
    "dict_type": "a table",
}
_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def _words(info: FieldInfo) -> tuple[str | None, str | None]:
    """What a field must be and the hint, from the field or the type it is (inside ``X | None``)."""
    described = [info]
    for arg in get_args(info.annotation):
        described += [m for m in getattr(arg, "__metadata__", ()) if isinstance(m, FieldInfo)]
    description = next((d.description for d in described if d.description), None)
    extras = [d.json_schema_extra for d in described if isinstance(d.json_schema_extra, dict)]
    hint = next((str(e["hint"]) for e in extras if "hint" in e), None)
    return description, hint


def _where(loc: tuple[str | int, ...]) -> tuple[list[str], type[_Section] | None, list[str | int]]:
    """A location as the table it is in (``providers.sfcompute``), that table's model and the key below."""
    table, rest = [str(loc[0])], list(loc[1:])
    field = Layers.model_fields.get(str(loc[0]))
    model = _section_model(field) if field is not None else None
    while model is not None and rest and isinstance(rest[0], str) and rest[0] in model.model_fields:
        inner = _section_model(model.model_fields[rest[0]])
        if inner is None:
            break
        table.append(str(rest.pop(0)))
        model = inner
    return table, model, rest


def _problem(
    error: ErrorDetails, model: type[_Section] | None, rest: list[str | int]
) -> tuple[str, str | None, list[str | int]]:
    """What is wrong, how to fix it, and the key below the table (a check may name another one)."""
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    value = error.get("input")
    info = model.model_fields.get(str(rest[0])) if model is not None and len(rest) == 1 else None
    description, hint = _words(info) if info is not None else (None, None)
    kind = error["type"]
    if kind == "setting":
        return ctx["problem"], ctx.get("hint"), [ctx["at"]] if ctx.get("at") else rest
    if kind == "extra_forbidden" and model is None:
        return "unknown section", f"use one of {', '.join(SECTIONS)}", rest
    if kind == "extra_forbidden" and model is not None:
        return "unknown setting", f"use one of {', '.join(model.model_fields)}", rest
    if kind == "missing":
        return "is required", hint, rest
    if description:
        return f"must be {description}, got {value!r}", hint, rest
    if kind in _BOUNDS:
        return f"must be {_BOUNDS[kind]} {next(iter(ctx.values())):g}, got {value!r}", hint, rest
    if kind in _TYPES:
        return f"must be {_TYPES[kind]}, got {value!r}", hint, rest
    return f"{error['msg']}, got {value!r}", hint, rest


def _below(rest: list[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest)


def _refusal(
    err: ValidationError,
    source: str,
    origins: Mapping[tuple[str | int, ...], tuple[str, str]],
    *,
    under: str = "",
) -> SettingsError:
    """A ``ValidationError`` (its first error) as ``<source>: [section].key: problem; hint``. ``under``: the
    table the validated value was read from (``kubernetes``) when it was not a whole file; ``origins``
    renames the keys a flag or the environment set (``--tick-s``, ``SCALAR_DATABASE_URL``)."""
    error = err.errors()[0]
    loc = (under, *error["loc"]) if under else tuple(error["loc"])
    table, model, rest = _where(loc)
    problem, hint, rest = _problem(error, model, rest)
    origin = origins.get(loc[:2])
    if origin is not None:
        return SettingsError(origin[0], problem, hint, source=origin[1])
    return SettingsError(f"[{'.'.join(table)}]{_below(rest)}", problem, hint, source=source)


# ---- the values the control plane runs with ----------------------------------------------------------------


def _kubernetes(section: KubernetesSection) -> KubernetesSettings:
    return KubernetesSettings(**section.values())


def kubernetes_settings(body: Mapping[str, Any], source: str = CONFIG_NAME) -> KubernetesSettings:
    """Read and check a ``[kubernetes]`` table; a bad key raises :class:`SettingsError` saying the fix."""
    try:
        section = KubernetesSection.model_validate(body)
    except ValidationError as err:
        raise _refusal(err, source, {}, under="kubernetes") from None
    return _kubernetes(section)


def _settings(layers: Layers, objects: Mapping[str, Any]) -> Settings:
    values: dict[str, Any] = {}
    for section in _FLAT:
        body = getattr(layers, section)
        if body is not None:
            values.update(body.values())
    sfcompute = layers.providers.sfcompute if layers.providers else None
    providers = ProvidersSettings(
        enabled=values.pop("enabled", MARKET_PROVIDERS),
        market_database_url=values.pop("market_database_url", None) or None,
        sfcompute=SFComputeBuySettings(**sfcompute.values()) if sfcompute else None,
    )
    values["providers"] = providers
    if "data_dir" in values:
        values["data_dir"] = Path(values["data_dir"])
    if layers.controller is not None:
        values["controller"] = layers.controller
    if layers.budgets is not None:
        values["controller"] = replace(
            values.get("controller", ControllerConfig()), budgets=layers.budgets.limits
        )
    if layers.kubernetes is not None:
        values["kubernetes"] = _kubernetes(layers.kubernetes)
    values.update(objects)
    return Settings(**values)


def _read(path: Path, build: Callable[[], Layers]) -> Layers:
    if not path.exists():
        raise SettingsError(
            "(file)", f"{path} does not exist", "pass --config with an existing file", source=str(path)
        )
    try:
        return build()
    except tomllib.TOMLDecodeError as err:
        raise SettingsError("(file)", f"not valid TOML: {err}", source=str(path)) from None
    except OSError as err:
        raise SettingsError("(file)", f"cannot read it: {err.strerror or err}", source=str(path)) from None


def load_settings(
    config_path: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Read ``config_path`` (``None``: ``./scalar.toml`` if it exists, else the defaults), then apply ``env``
    (``SCALAR_DATABASE_URL``; default ``os.environ``) and ``overrides`` (flag values keyed by ``Settings``
    field name: ``data_dir``, ``host``, ``port``, ``time_scale``, ``market_seed``, ``demo``,
    ``database_url``, ``tick_s``...; ``None`` values are ignored). Raises :class:`SettingsError`."""
    environ = os.environ if env is None else env
    path = config_path
    if path is None and Path(CONFIG_NAME).is_file():
        path = Path(CONFIG_NAME)
    source = str(path) if path is not None else CONFIG_NAME
    origins: dict[tuple[str | int, ...], tuple[str, str]] = {}
    if environ.get(DATABASE_URL_ENV, "").strip():
        origins["store", "database_url"] = (DATABASE_URL_ENV, "environment")
    flags: dict[str, Any] = {}  # section -> key -> value, the init values of Layers
    objects: dict[str, Any] = {}
    for name, value in (overrides or {}).items():
        if value is None:
            continue
        if name in _OBJECTS:
            objects[name] = value
            continue
        if name not in _FLAGS:
            raise SettingsError(name, "unknown setting", source="command line")
        section, key = _FLAGS[name]
        flags.setdefault(section, {})[key] = value
        origins[section, key] = (f"--{name.replace('_', '-')}", "command line")

    def build() -> Layers:
        token = _READING.set((None if path is None else Path(path), environ))
        try:
            return Layers(**flags)
        finally:
            _READING.reset(token)

    try:
        layers = build() if path is None else _read(Path(path), build)
    except ValidationError as err:
        raise _refusal(err, source, origins) from None
    settings = _settings(layers, objects)
    if settings.lease_renew_s >= settings.lease_ttl_s:
        raise SettingsError(
            "[lease].renew_s",
            f"is {settings.lease_renew_s:g} s but ttl_s is {settings.lease_ttl_s:g} s",
            "renew well within the lease, e.g. renew_s <= ttl_s / 3",
            source=source,
        )
    if settings.park_ttl_s <= settings.action_stale_after_s:
        raise SettingsError(
            "[loops].park_ttl_s",
            f"is {settings.park_ttl_s:g} s but action_stale_after_s is {settings.action_stale_after_s:g} s",
            "node events must wait longer than a crashed purchase takes to be executed again "
            "(keep park_ttl_s well above action_stale_after_s)",
            source=source,
        )
    try:
        settings.market_config()
    except MarketConfigError as err:
        raise SettingsError("[market]", err.message, err.hint, source=source) from None
    return settings
