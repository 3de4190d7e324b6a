"""The controller's config file: the pydantic model of ``[controller]``, read into a ``ControllerConfig``.

:class:`ControllerFile` is the shape a TOML/YAML/JSON file parses into. It owns the shape: which keys exist,
the lists and tables, tier names, amounts written as numbers or text. The frozen dataclasses of
``engine/config.py`` own the values' rules (a config built in code obeys them too), so a value the file
gives is passed on as it was written and checked once, in the same words, wherever it comes from. A
``ValidationError`` becomes a ``ConfigError`` naming the dotted key (``scale_groups[1].max_slices``), which
``runtime/settings.py`` shows under its table (``[controller].scale_groups[1].max_slices: ...``).

The one engine module that imports pydantic: a boundary, loaded only when a file is read or written; the
engine's steps never touch it (docs/decisions/engine.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, fields
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainValidator,
    ValidationError,
    field_serializer,
    model_validator,
)

from scalar.domain.consolidation import ConsolidationPolicy
from scalar.domain.errors import InvalidSpecError
from scalar.domain.tier import Tier
from scalar.engine.budget import BudgetLimit, limits_from_list
from scalar.engine.config import (
    ConfigError,
    ControllerConfig,
    ScaleGroupConfig,
    TierConfig,
)

LIST_FIELDS = ("providers", "instance_types", "gpu_models", "regions")


def read_config(data: Mapping[str, Any]) -> ControllerConfig:
    """``ControllerConfig.from_dict``: the file's shape checked here, its values by the dataclasses."""
    if not isinstance(data, Mapping):
        raise ConfigError("(root)", "must be a table of settings")
    try:
        file = ControllerFile.model_validate(dict(data))
    except ValidationError as err:
        raise _config_error(err) from None
    return file.to_config()


class _Refused(ValueError):
    """A file value's problem; ``at`` is the key below where pydantic found it (``[2]``, ``.FLEX``)."""

    def __init__(self, problem: str, hint: str | None = None, at: str = "") -> None:
        super().__init__(problem)
        self.problem, self.hint, self.at = problem, hint, at


def _as_written(value: Any) -> Any:
    return value


AsWritten = PlainValidator(_as_written)  # the dataclass checks it (and says what is wrong)


def _tier_named(value: Any, at: str = "") -> Tier:
    try:
        return Tier.parse(value)
    except ValueError as err:
        raise _Refused(str(err), at=at) from None


def _name_list(value: Any) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise _Refused("must be a list of names")
    return tuple(value)


def _tier_list(value: Any) -> tuple[Tier, ...]:
    if not isinstance(value, list | tuple):
        raise _Refused("must be a list of tiers")
    return tuple(_tier_named(t, f"[{i}]") for i, t in enumerate(value))


def _tier_table(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _Refused("must be a table like {FLEX = {max_price_per_gpu_hour = 10}}")
    return {_tier_named(name, f".{name}").value: body for name, body in value.items()}


def _amount(value: Any) -> Decimal:
    if isinstance(value, bool):
        raise _Refused(f"must be an amount, got {value!r}")
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise _Refused(f"must be an amount, got {value!r}") from None


def _scale_groups(value: Any) -> Any:
    if not isinstance(value, list | tuple):
        raise _Refused("must be a list of scale groups")
    return value


def _budgets(value: Any) -> tuple[BudgetLimit, ...]:
    try:
        return limits_from_list(value, "")
    except InvalidSpecError as err:
        raise _Refused(err.problem, err.hint, at=err.field) from None


def _consolidation(value: Any) -> ConsolidationPolicy:
    if isinstance(value, ConsolidationPolicy):
        return value
    if not isinstance(value, Mapping):
        raise _Refused("must be a table")
    known = [f.name for f in fields(ConsolidationPolicy)]
    for key in value:
        if key not in known:
            raise _Refused("unknown setting", f"use one of {', '.join(sorted(known))}", at=f".{key}")
    try:
        return ConsolidationPolicy(**value)
    except InvalidSpecError as err:
        raise _Refused(err.problem, err.hint, at=f".{err.field}") from None


def _default(cls: type, name: str) -> Any:
    """A dataclass field's default, so the file's defaults are the engine's (one place says them)."""
    f = next(f for f in fields(cls) if f.name == name)
    return f.default_factory() if f.default is MISSING and f.default_factory is not MISSING else f.default


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    @model_validator(mode="before")
    @classmethod
    def _a_table(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise _Refused("must be a table")
        return data


class TierFile(_Table):
    """``[controller.tiers.FLEX]``."""

    max_price_per_gpu_hour: Annotated[
        Decimal | None, PlainValidator(lambda v: None if v is None else _amount(v))
    ] = None

    @field_serializer("max_price_per_gpu_hour")
    def _text(self, value: Decimal | None) -> str | None:
        return None if value is None else str(value)

    def to_config(self) -> TierConfig:
        return TierConfig(self.max_price_per_gpu_hour)


class ScaleGroupFile(_Table):
    """``[[controller.scale_groups]]``: one entry of the list, as :class:`ScaleGroupConfig` reads it."""

    name: Annotated[str, AsWritten] = _default(ScaleGroupConfig, "name")
    providers: Annotated[tuple[str, ...], PlainValidator(_name_list)] = ()
    instance_types: Annotated[tuple[str, ...], PlainValidator(_name_list)] = ()
    gpu_models: Annotated[tuple[str, ...], PlainValidator(_name_list)] = ()
    regions: Annotated[tuple[str, ...], PlainValidator(_name_list)] = ()
    tiers: Annotated[tuple[Tier, ...], PlainValidator(_tier_list)] = _default(ScaleGroupConfig, "tiers")
    spot: Annotated[bool | None, AsWritten] = None
    min_slices: Annotated[int, AsWritten] = _default(ScaleGroupConfig, "min_slices")
    max_slices: Annotated[int, AsWritten] = _default(ScaleGroupConfig, "max_slices")
    slice_size: Annotated[int, AsWritten] = _default(ScaleGroupConfig, "slice_size")
    contract_length_s: Annotated[int | None, AsWritten] = None

    @field_serializer(*LIST_FIELDS)
    def _list(self, value: tuple[str, ...]) -> list[str]:
        return list(value)

    @field_serializer("tiers")
    def _tier_names(self, value: tuple[Tier, ...]) -> list[str]:
        return [t.value for t in value]

    @classmethod
    def of(cls, group: ScaleGroupConfig) -> ScaleGroupFile:
        return cls.model_construct(**{f.name: getattr(group, f.name) for f in fields(group)})

    def to_config(self) -> ScaleGroupConfig:
        return ScaleGroupConfig(**{name: getattr(self, name) for name in self.model_fields_set})


class ControllerFile(_Table):
    """``[controller]``: the keys :class:`ControllerConfig` reads from a file (what each means: there).

    A key left out takes the engine's default: :meth:`to_config` passes on only the keys the file gave."""

    scale_groups: Annotated[tuple[ScaleGroupFile, ...], BeforeValidator(_scale_groups)] = (ScaleGroupFile(),)
    tiers: Annotated[dict[str, TierFile], BeforeValidator(_tier_table)] = {
        t.value: TierFile(max_price_per_gpu_hour=c.max_price_per_gpu_hour)
        for t, c in _default(ControllerConfig, "tiers").items()
    }
    contract_length_s: Annotated[int, AsWritten] = _default(ControllerConfig, "contract_length_s")
    request_timeout_s: Annotated[float, AsWritten] = _default(ControllerConfig, "request_timeout_s")
    boot_timeout_s: Annotated[float, AsWritten] = _default(ControllerConfig, "boot_timeout_s")
    backoff_s: Annotated[float, AsWritten] = _default(ControllerConfig, "backoff_s")
    idle_release_s: Annotated[float, AsWritten] = _default(ControllerConfig, "idle_release_s")
    flex_batch_wait_s: Annotated[float, AsWritten] = _default(ControllerConfig, "flex_batch_wait_s")
    flex_batch_gpus: Annotated[int, AsWritten] = _default(ControllerConfig, "flex_batch_gpus")
    safety_margin_s: Annotated[float, AsWritten] = _default(ControllerConfig, "safety_margin_s")
    reservation_s: Annotated[float, AsWritten] = _default(ControllerConfig, "reservation_s")
    max_demand_entries: Annotated[int, AsWritten] = _default(ControllerConfig, "max_demand_entries")
    max_job_attempts: Annotated[int, AsWritten] = _default(ControllerConfig, "max_job_attempts")
    agent_providers: Annotated[tuple[str, ...], AsWritten] = ()
    budgets: Annotated[tuple[BudgetLimit, ...], PlainValidator(_budgets)] = ()
    routing_memo: Annotated[bool, AsWritten] = _default(ControllerConfig, "routing_memo")
    pending_index: Annotated[bool, AsWritten] = _default(ControllerConfig, "pending_index")
    interruption_period_hours: Annotated[float, AsWritten] = _default(
        ControllerConfig, "interruption_period_hours"
    )
    interruption_prior: Annotated[float, AsWritten] = _default(ControllerConfig, "interruption_prior")
    fast_max_wait_s: Annotated[float, AsWritten] = _default(ControllerConfig, "fast_max_wait_s")
    fast_restart_wait_s: Annotated[float, AsWritten] = _default(ControllerConfig, "fast_restart_wait_s")
    flex_max_rework: Annotated[float, AsWritten] = _default(ControllerConfig, "flex_max_rework")
    spot_limit_headroom: Annotated[float, AsWritten] = _default(ControllerConfig, "spot_limit_headroom")
    fast_spare_per_services: Annotated[int, AsWritten] = _default(ControllerConfig, "fast_spare_per_services")
    market_time_scales: Annotated[dict[str, float], AsWritten] = {}
    packing_score: Annotated[str, AsWritten] = _default(ControllerConfig, "packing_score")
    fast_preference_limit: Annotated[float | None, AsWritten] = None
    consolidation: Annotated[ConsolidationPolicy, PlainValidator(_consolidation)] = ConsolidationPolicy()

    @field_serializer("scale_groups")
    def _groups(self, value: tuple[ScaleGroupFile, ...]) -> list[dict[str, Any]]:
        return [g.model_dump() for g in value]

    @field_serializer("budgets")
    def _limits(self, value: tuple[BudgetLimit, ...]) -> list[dict[str, Any]]:
        return [limit.to_dict() for limit in value]

    @field_serializer("consolidation")
    def _policy(self, value: ConsolidationPolicy) -> dict[str, Any]:
        return {f.name: getattr(value, f.name) for f in fields(value)}

    @classmethod
    def of(cls, config: ControllerConfig) -> ControllerFile:
        values = {f.name: getattr(config, f.name) for f in fields(config)}
        values["scale_groups"] = tuple(ScaleGroupFile.of(g) for g in config.scale_groups)
        values["tiers"] = {
            t.value: TierFile.model_construct(max_price_per_gpu_hour=c.max_price_per_gpu_hour)
            for t, c in config.tiers.items()
        }
        return cls.model_construct(**values)

    def to_config(self) -> ControllerConfig:
        values = {name: getattr(self, name) for name in self.model_fields_set}
        if "scale_groups" in values:
            values["scale_groups"] = tuple(g.to_config() for g in self.scale_groups)
        if "tiers" in values:
            values["tiers"] = {Tier(name): body.to_config() for name, body in self.tiers.items()}
        return ControllerConfig(**values)


_TABLES: dict[str, type[_Table]] = {"scale_groups": ScaleGroupFile, "tiers": TierFile}


def _key(loc: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _config_error(err: ValidationError) -> ConfigError:
    """The first problem (an unknown key before a bad value, as a reader meets them) as a ``ConfigError``."""
    errors = err.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(first["loc"])
    key = _key(loc)
    if first["type"] == "extra_forbidden":
        table = ControllerFile if len(loc) == 1 else _TABLES[str(loc[0])]
        known = sorted(table.model_fields)
        hint = f"use {known[0]}" if len(known) == 1 else f"use one of {', '.join(known)}"
        return ConfigError(key, "unknown setting", hint)
    refused = (first.get("ctx") or {}).get("error")
    if isinstance(refused, _Refused):
        return ConfigError(f"{key}{refused.at}" or "(root)", refused.problem, refused.hint)
    return ConfigError(key or "(root)", first["msg"])
