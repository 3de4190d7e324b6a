"""The control plane's settings: ``scalar.toml`` (see ``scalar.example.toml``), flags and the environment.

``load_settings(config_path, overrides, env)`` reads the file (``tomllib``), applies ``SCALAR_DATABASE_URL``
and command-line overrides, and validates everything at once. A bad value raises :class:`SettingsError`
naming the key and saying how to fix it (``scalar.toml: [loops].tick_s: must be > 0, got -1``). Without a
file every setting has a sensible default: the built-in market on SQLite under ``./.scalar``.

Precedence, highest first: ``overrides`` (command-line flags), the environment (``SCALAR_DATABASE_URL``),
the file, the defaults.
"""

from __future__ import annotations

import math
import os
import re
import socket
import tomllib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from scalar.domain.errors import InvalidSpecError
from scalar.engine.budget import BudgetLimit, limits_from_list
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


# ---- the file's shape: section -> key -> (Settings field, kind) ------------------------------------------

_SECONDS = "seconds"
_POSITIVE = "positive"
_COUNT = "count"
_STRING = "string"
_BOOL = "bool"
_PORT = "port"
_URL = "url"
_SEED = "seed"
_RATE = "rate"
_NAMES = "names"
_WHOLE = "whole"
_BYTES = "bytes"
_JOB_USER = "job_user"
_SANDBOX = "sandbox"
_UID_RANGE = "uid_range"
_MODULES = "modules"
_MODULE_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\.|:[A-Za-z_][A-Za-z0-9_]*)?")

SCHEMA: dict[str, dict[str, tuple[str, str]]] = {
    "server": {
        "host": ("host", _STRING),
        "port": ("port", _PORT),
        "demo": ("demo", _BOOL),
        "auth": ("auth_required", _BOOL),
        "rate_per_s": ("rate_per_s", _POSITIVE),
        "rate_burst": ("rate_burst", _POSITIVE),
    },
    "store": {"data_dir": ("data_dir", _STRING), "database_url": ("database_url", _URL)},
    "market": {
        "seed": ("market_seed", _SEED),
        "time_scale": ("time_scale", _POSITIVE),
        "boot_failure_rate": ("boot_failure_rate", _RATE),
        "database_url": ("market_database_url", _URL),
    },
    "loops": {
        "tick_s": ("tick_s", _POSITIVE),
        "price_interval_s": ("price_interval_s", _POSITIVE),
        "executor_interval_s": ("executor_interval_s", _POSITIVE),
        "executor_batch": ("executor_batch", _COUNT),
        "action_stale_after_s": ("action_stale_after_s", _POSITIVE),
        "retry_backoff_s": ("retry_backoff_s", _SECONDS),
        "retry_backoff_max_s": ("retry_backoff_max_s", _SECONDS),
        "park_ttl_s": ("park_ttl_s", _SECONDS),
    },
    "lease": {
        "name": ("lease_name", _STRING),
        "ttl_s": ("lease_ttl_s", _POSITIVE),
        "renew_s": ("lease_renew_s", _POSITIVE),
    },
    "providers": {"enabled": ("enabled", _NAMES)},
    "agents": {
        "heartbeat_s": ("agent_heartbeat_s", _POSITIVE),
        "suspect_after_s": ("agent_suspect_after_s", _POSITIVE),
        "lost_after_s": ("agent_lost_after_s", _POSITIVE),
        "job_user": ("agent_job_user", _JOB_USER),
        "sandbox": ("agent_sandbox", _SANDBOX),
        "uid_range": ("agent_uid_range", _UID_RANGE),
        "log_max_bytes_per_attempt": ("agent_log_max_bytes_per_attempt", _BYTES),
    },
    "logs": {
        "max_bytes_per_tenant": ("logs_max_bytes_per_tenant", _BYTES),
        "retention_s": ("logs_retention_s", _POSITIVE),
    },
    "endpoints": {
        "handlers": ("endpoint_handlers", _MODULES),
        "max_request_retries": ("endpoint_max_request_retries", _WHOLE),
        "webhook_allow_private": ("endpoint_webhook_allow_private", _BOOL),
    },
}
SECTIONS = (*SCHEMA, "controller", "budgets", "kubernetes")
_FIELD_KEYS = {f: (section, key, kind) for section, keys in SCHEMA.items() for key, (f, kind) in keys.items()}


def _check(key: str, kind: str, value: Any, source: str) -> Any:
    def bad(problem: str, hint: str | None = None) -> SettingsError:
        return SettingsError(key, problem, hint, source=source)

    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind in (_SECONDS, _POSITIVE, _RATE):
        if not number or not math.isfinite(value):
            raise bad(f"must be a number, got {value!r}")
        if kind == _POSITIVE and value <= 0:
            raise bad(f"must be > 0, got {value!r}")
        if kind == _SECONDS and value < 0:
            raise bad(f"must be >= 0, got {value!r}")
        if kind == _RATE and not 0 <= value <= 1:
            raise bad(f"must be a probability between 0 and 1, got {value!r}")
        return float(value)
    if kind == _COUNT:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise bad(f"must be a whole number >= 1, got {value!r}")
        return value
    if kind == _WHOLE:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise bad(f"must be a whole number >= 0, got {value!r}")
        return value
    if kind == _BYTES:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise bad(f"must be a whole number of bytes >= 1, got {value!r}", "e.g. 67108864 (64 MiB)")
        return value
    if kind in (_JOB_USER, _SANDBOX):
        from scalar.agent import isolation as iso_mod

        allowed = iso_mod.JOB_USERS if kind == _JOB_USER else iso_mod.SANDBOXES
        if value not in allowed:
            raise bad(f"must be one of {', '.join(allowed)}, got {value!r}")
        return value
    if kind == _UID_RANGE:
        from scalar.agent import isolation as iso_mod

        try:
            return iso_mod.parse_uid_range(value)
        except iso_mod.IsolationError as err:
            raise bad(str(err)) from None
    if kind == _PORT:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65535:
            raise bad(f"must be a port number 0-65535, got {value!r}")
        return value
    if kind == _SEED:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise bad(f"must be a whole number >= 0, got {value!r}", "leave it out to keep the stored seed")
        return value
    if kind == _BOOL:
        if not isinstance(value, bool):
            raise bad(f"must be true or false, got {value!r}")
        return value
    if kind in (_STRING, _URL):
        if not isinstance(value, str | Path) or (kind == _STRING and not str(value).strip()):
            raise bad(f"must be a non-empty string, got {value!r}")
        text = str(value).strip()
        if kind == _URL and text:
            try:
                normalize_url(text)
            except UnsupportedDatabaseError as err:
                raise bad(err.message, err.hint) from None
        return text
    if kind == _NAMES:
        if not isinstance(value, list | tuple) or not value:
            raise bad(f"must be a non-empty list of provider names, got {value!r}")
        names = []
        for i, name in enumerate(value):
            if not isinstance(name, str) or name not in MARKET_PROVIDERS:
                raise SettingsError(
                    f"{key}[{i}]",
                    f"unknown provider {name!r}",
                    f"use some of {', '.join(MARKET_PROVIDERS)}",
                    source=source,
                )
            names.append(name)
        return tuple(dict.fromkeys(names))
    if kind == _MODULES:
        if not isinstance(value, list | tuple):
            raise bad(f"must be a list of module names, got {value!r}", 'e.g. ["my_service.handlers"]')
        modules = []
        for i, entry in enumerate(value):
            if not isinstance(entry, str) or _MODULE_ENTRY.fullmatch(entry) is None:
                raise SettingsError(
                    f"{key}[{i}]",
                    f"is not a module, module prefix or module:function, got {entry!r}",
                    'write e.g. "my_service" (it and its submodules), "my_service." (its submodules) or '
                    '"my_service.handlers:square"',
                    source=source,
                )
            modules.append(entry)
        return tuple(dict.fromkeys(modules))
    raise AssertionError(kind)  # pragma: no cover


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise SettingsError(
            "(file)", f"{path} does not exist", "pass --config with an existing file", source=str(path)
        ) from None
    except tomllib.TOMLDecodeError as err:
        raise SettingsError("(file)", f"not valid TOML: {err}", source=str(path)) from None
    except OSError as err:
        raise SettingsError("(file)", f"cannot read it: {err.strerror or err}", source=str(path)) from None


def _from_file(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for section, body in data.items():
        if section not in SECTIONS:
            raise SettingsError(
                f"[{section}]", "unknown section", f"use one of {', '.join(SECTIONS)}", source=source
            )
        if not isinstance(body, Mapping):
            raise SettingsError(f"[{section}]", "must be a table", source=source)
        if section == "controller":
            try:
                values["controller"] = ControllerConfig.from_dict(body)
            except ConfigError as err:
                raise SettingsError(
                    f"[controller].{err.field}", err.problem, err.hint, source=source
                ) from None
            continue
        if section == "budgets":  # [[budgets.limits]]: spend limits, kept in the controller's config
            values["budgets"] = _budgets(body, source)
            continue
        if section == "kubernetes":  # agents of bought nodes as pods (docs/agent.md)
            values["kubernetes"] = kubernetes_settings(body, source)
            continue
        if section == "providers" and isinstance(body.get("sfcompute"), Mapping):
            values["sfcompute_buy"] = sfcompute_buy_settings(body["sfcompute"], source)
            body = {k: v for k, v in body.items() if k != "sfcompute"}
        known = SCHEMA[section]
        for key, value in body.items():
            if key not in known:
                raise SettingsError(
                    f"[{section}].{key}",
                    "unknown setting",
                    f"use one of {', '.join(known)}",
                    source=source,
                )
            name, kind = known[key]
            values[name] = _check(f"[{section}].{key}", kind, value, source)
    if "budgets" in values:
        values["controller"] = replace(
            values.get("controller", ControllerConfig()), budgets=values.pop("budgets")
        )
    return values


def _budgets(body: Mapping[str, Any], source: str) -> tuple[BudgetLimit, ...]:
    for key in body:
        if key != "limits":
            raise SettingsError(f"[budgets].{key}", "unknown setting", "use limits", source=source)
    try:
        return limits_from_list(body.get("limits", []), "limits")
    except InvalidSpecError as err:
        raise SettingsError(f"[budgets].{err.field}", err.problem, err.hint, source=source) from None


_K8S_STRINGS = ("namespace", "kubeconfig", "context", "server", "token_env", "controller_url", "image")
_K8S_KEYS = (
    *_K8S_STRINGS,
    "providers",
    "agent_command",
    "fake_gpus",
    "gpu_resource",
    "reconcile_s",
    "join_token_ttl_s",
)


def kubernetes_settings(body: Mapping[str, Any], source: str = CONFIG_NAME) -> KubernetesSettings:
    """Read and check a ``[kubernetes]`` table; a bad key raises :class:`SettingsError` saying the fix."""
    values: dict[str, Any] = {}
    for key, value in body.items():
        where = f"[kubernetes].{key}"
        if key not in _K8S_KEYS:
            raise SettingsError(where, "unknown setting", f"use one of {', '.join(_K8S_KEYS)}", source=source)
        if key in ("reconcile_s", "join_token_ttl_s"):
            values[key] = _check(where, _POSITIVE, value, source)
        elif key == "providers":
            values[key] = _check(where, _NAMES, value, source)
        elif key == "agent_command":
            if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
                raise SettingsError(
                    where,
                    f"must be a non-empty list of strings, got {value!r}",
                    'e.g. ["python", "-m", "scalar.agent"]',
                    source=source,
                )
            values[key] = tuple(value)
        elif key == "gpu_resource" and value == "":  # request no GPUs (a cluster without the device plugin)
            values[key] = ""
        else:
            values[key] = _check(where, _STRING, value, source)
    if "fake_gpus" in values:
        from scalar.agent.facts import FactsError, parse_fake_gpus

        try:
            parse_fake_gpus(values["fake_gpus"])
        except FactsError as err:
            raise SettingsError(
                "[kubernetes].fake_gpus", str(err), "e.g. 8xH100-80GB", source=source
            ) from None
    if ("kubeconfig" in values) == ("server" in values):
        raise SettingsError(
            "[kubernetes]",
            "needs exactly one of kubeconfig and server",
            "set kubeconfig = PATH, or server = URL with the token in the environment variable token_env",
            source=source,
        )
    for required, example in (
        ("controller_url", "http://controller.example:8000"),
        ("image", "registry.example/scalar:0.1.0"),
    ):
        if required not in values:
            raise SettingsError(
                f"[kubernetes].{required}", "is required", f'e.g. {required} = "{example}"', source=source
            )
    if not values["controller_url"].startswith(("http://", "https://")):
        raise SettingsError(
            "[kubernetes].controller_url",
            f"must be an http(s) URL, got {values['controller_url']!r}",
            "the agents in the pods dial it: use an address they can reach",
            source=source,
        )
    return KubernetesSettings(**values)


_SFC_KEYS = (
    "buy_via",
    "controller_url",
    "image_id",
    "zone",
    "node_type",
    "python",
    "pip_spec",
    "join_token_ttl_s",
)


def sfcompute_buy_settings(body: Mapping[str, Any], source: str = CONFIG_NAME) -> SFComputeBuySettings:
    """Read and check ``[providers.sfcompute]``; a bad key raises :class:`SettingsError` saying the fix."""
    values: dict[str, Any] = {}
    for key, value in body.items():
        where = f"[providers.sfcompute].{key}"
        if key not in _SFC_KEYS:
            raise SettingsError(where, "unknown setting", f"use one of {', '.join(_SFC_KEYS)}", source=source)
        kind = _POSITIVE if key == "join_token_ttl_s" else _STRING
        values[key] = _check(where, kind, value, source)
    choices = {"buy_via": ("orders", "nodes"), "node_type": ("autoreserved", "reserved")}
    for key, allowed in choices.items():
        if key in values and values[key] not in allowed:
            raise SettingsError(
                f"[providers.sfcompute].{key}",
                f"must be one of {', '.join(allowed)}, got {values[key]!r}",
                source=source,
            )
    if values.get("buy_via") == "nodes":
        url = values.get("controller_url", "")
        if not url.startswith(("http://", "https://")):
            raise SettingsError(
                "[providers.sfcompute].controller_url",
                'is required with buy_via = "nodes"' if not url else f"must be an http(s) URL, got {url!r}",
                'the bought nodes\' agents dial it: e.g. controller_url = "https://scalar.example:8000"',
                source=source,
            )
    return SFComputeBuySettings(**values)


def _flag_key(name: str) -> tuple[str, str]:
    spot = _FIELD_KEYS.get(name)
    if spot is None:
        return name, _STRING
    return f"--{name.replace('_', '-')}", spot[2]


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
    values: dict[str, Any] = {}
    if path is not None:
        values = _from_file(_read_file(Path(path)), str(path))
    url = environ.get(DATABASE_URL_ENV, "").strip()
    if url:
        values["database_url"] = _check(DATABASE_URL_ENV, _URL, url, "environment")
    settable = {f.name for f in fields(Settings)} | {"enabled", "market_database_url"}
    for name, value in (overrides or {}).items():
        if value is None:
            continue
        if name not in settable:
            raise SettingsError(name, "unknown setting", source="command line")
        key, kind = _flag_key(name)
        if name in ("controller", "providers", "holder", "kubernetes"):
            values[name] = value
        else:
            values[name] = _check(key, kind, value, "command line")
    providers = ProvidersSettings(
        enabled=values.pop("enabled", MARKET_PROVIDERS),
        market_database_url=values.pop("market_database_url", None) or None,
        sfcompute=values.pop("sfcompute_buy", None),
    )
    values.setdefault("providers", providers)
    if "data_dir" in values:
        values["data_dir"] = Path(values["data_dir"])
    settings = Settings(**values)
    if settings.lease_renew_s >= settings.lease_ttl_s:
        raise SettingsError(
            "[lease].renew_s",
            f"is {settings.lease_renew_s:g} s but ttl_s is {settings.lease_ttl_s:g} s",
            "renew well within the lease, e.g. renew_s <= ttl_s / 3",
            source=str(path) if path else CONFIG_NAME,
        )
    if settings.park_ttl_s <= settings.action_stale_after_s:
        raise SettingsError(
            "[loops].park_ttl_s",
            f"is {settings.park_ttl_s:g} s but action_stale_after_s is {settings.action_stale_after_s:g} s",
            "node events must wait longer than a crashed purchase takes to be executed again "
            "(keep park_ttl_s well above action_stale_after_s)",
            source=str(path) if path else CONFIG_NAME,
        )
    try:
        settings.market_config()
    except MarketConfigError as err:
        raise SettingsError(
            "[market]", err.message, err.hint, source=str(path) if path else CONFIG_NAME
        ) from None
    return settings
