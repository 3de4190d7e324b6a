"""Events and actions to plain JSON-ready dicts and back, losslessly.

``event_to_dict``/``event_from_dict`` and ``action_to_dict``/``action_from_dict`` write
``{"type": "JobSubmitted", ...fields}``. Money (``Decimal``) is written as a string, times as ISO 8601 with
their offset, enums as their value, tuples as lists. Decoding follows each dataclass's type hints, so a
round trip gives back an equal value (``from_dict(to_dict(x)) == x``). No pydantic: the engine stays plain.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import MISSING, fields, is_dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Any, Union, get_args, get_origin, get_type_hints

from scalar.domain.errors import InvalidSpecError
from scalar.engine.actions import ACTION_TYPES, Action
from scalar.engine.events import EVENT_TYPES, Event

_NONE = type(None)
_HINTS: dict[type, dict[str, Any]] = {}
_EVENTS: dict[str, type] = {cls.__name__: cls for cls in EVENT_TYPES}
_ACTIONS: dict[str, type] = {cls.__name__: cls for cls in ACTION_TYPES}


class CodecError(InvalidSpecError):
    """A stored event or action does not decode; ``field`` is the path of the bad value."""


def encode(value: Any) -> Any:
    """Any engine value (dataclasses, enums, Decimal, datetime, tuples, mappings) to plain JSON types."""
    if isinstance(value, Enum):
        return value.value
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    raise TypeError(f"cannot encode {type(value).__name__}")


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = get_type_hints(cls)
        _HINTS[cls] = hints
    return hints


def decode(tp: Any, raw: Any, path: str = "") -> Any:
    """Rebuild a value of type ``tp`` from what :func:`encode` wrote; raise ``CodecError`` naming ``path``."""
    origin = get_origin(tp)
    if tp is Any:
        return raw
    if origin is Union or origin is types.UnionType:
        return _decode_union(get_args(tp), raw, path)
    if tp is _NONE or tp is None:
        if raw is not None:
            raise CodecError(path or "(root)", f"expected null, got {raw!r}")
        return None
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(raw)
        except ValueError:
            raise CodecError(path or "(root)", f"unknown {tp.__name__} {raw!r}") from None
    if tp is Decimal:
        try:
            return Decimal(raw) if isinstance(raw, str) else _fail(path, "an amount as a string", raw)
        except InvalidOperation:
            return _fail(path, "an amount", raw)
    if tp is datetime:
        if not isinstance(raw, str):
            return _fail(path, "an ISO 8601 time", raw)
        try:
            return datetime.fromisoformat(raw)
        except ValueError:
            return _fail(path, "an ISO 8601 time", raw)
    if tp is bool:
        return raw if isinstance(raw, bool) else _fail(path, "true or false", raw)
    if tp is int:
        return (
            raw if isinstance(raw, int) and not isinstance(raw, bool) else _fail(path, "a whole number", raw)
        )
    if tp is float:
        # An int stays an int (typing lets an int stand for a float): 2 and 2.0 are written differently and
        # must come back the same, or a replay could word a reason differently ("3.00" vs "3.0").
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return raw
        return _fail(path, "a number", raw)
    if tp is str:
        return raw if isinstance(raw, str) else _fail(path, "a string", raw)
    if origin is tuple:
        if not isinstance(raw, list | tuple):
            return _fail(path, "a list", raw)
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], item, f"{path}[{i}]") for i, item in enumerate(raw))
        if len(args) != len(raw):
            return _fail(path, f"a list of {len(args)}", raw)
        return tuple(
            decode(a, item, f"{path}[{i}]") for i, (a, item) in enumerate(zip(args, raw, strict=True))
        )
    if origin is list:
        if not isinstance(raw, list | tuple):
            return _fail(path, "a list", raw)
        (item_tp,) = get_args(tp)
        return [decode(item_tp, item, f"{path}[{i}]") for i, item in enumerate(raw)]
    if origin in (dict, Mapping) or (origin is not None and _is_mapping(origin)):
        if not isinstance(raw, Mapping):
            return _fail(path, "an object", raw)
        key_tp, value_tp = get_args(tp)
        return {decode(key_tp, k, path): decode(value_tp, v, f"{path}.{k}") for k, v in raw.items()}
    if isinstance(tp, type) and is_dataclass(tp):
        return _decode_dataclass(tp, raw, path)
    raise CodecError(path or "(root)", f"no decoder for type {tp!r}")


def _is_mapping(origin: Any) -> bool:
    return isinstance(origin, type) and issubclass(origin, Mapping)


def _fail(path: str, expected: str, raw: Any) -> Any:
    raise CodecError(path or "(root)", f"expected {expected}, got {raw!r}")


def _decode_union(args: tuple[Any, ...], raw: Any, path: str) -> Any:
    if raw is None:
        if _NONE in args:
            return None
        return _fail(path, "a value", raw)
    options = [a for a in args if a is not _NONE]
    if len(options) == 1:
        return decode(options[0], raw, path)
    # A union of plain JSON types (Reason.need: float | int | str | None): keep the JSON value's own type.
    for option in options:
        if option in (int, float, str, bool) and type(raw) is option:
            return raw
    errors: list[str] = []
    for option in options:
        try:
            return decode(option, raw, path)
        except CodecError as err:
            errors.append(err.problem)
    return _fail(path, " or ".join(getattr(o, "__name__", str(o)) for o in options), raw)


def _decode_dataclass(cls: type, raw: Any, path: str) -> Any:
    if not isinstance(raw, Mapping):
        return _fail(path, f"an object ({cls.__name__})", raw)
    hints = _hints(cls)
    names = {f.name for f in fields(cls)}
    for key in raw:
        if key not in names and key != "type":
            raise CodecError(f"{path}.{key}" if path else str(key), f"unknown field of {cls.__name__}")
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in raw:
            kwargs[f.name] = decode(hints[f.name], raw[f.name], f"{path}.{f.name}" if path else f.name)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise CodecError(f"{path}.{f.name}" if path else f.name, f"missing (required by {cls.__name__})")
    try:
        return cls(**kwargs)
    except InvalidSpecError as err:
        raise CodecError(f"{path}.{err.field}" if path else err.field, err.problem) from None


def _to_dict(value: Any) -> dict[str, Any]:
    body = encode(value)
    assert isinstance(body, dict)
    return {"type": type(value).__name__, **body}


def _from_dict(registry: dict[str, type], kind: str, data: Mapping[str, Any]) -> Any:
    if not isinstance(data, Mapping):
        raise CodecError("(root)", f"an {kind} must be an object, got {data!r}")
    name = data.get("type")
    cls = registry.get(name) if isinstance(name, str) else None
    if cls is None:
        raise CodecError("type", f"unknown {kind} type {name!r}", f"use one of {', '.join(registry)}")
    return _decode_dataclass(cls, data, "")


def event_to_dict(event: Event) -> dict[str, Any]:
    return _to_dict(event)


def event_from_dict(data: Mapping[str, Any]) -> Event:
    result: Event = _from_dict(_EVENTS, "event", data)
    return result


def action_to_dict(action: Action) -> dict[str, Any]:
    return _to_dict(action)


def action_from_dict(data: Mapping[str, Any]) -> Action:
    result: Action = _from_dict(_ACTIONS, "action", data)
    return result
