"""Reading user files for the CLI: every problem becomes an ``InputError`` naming file, field and fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import BaseModel, TypeAdapter, ValidationError

from scalar.domain.errors import DomainError, InvalidSpecError

T = TypeVar("T")


class InputError(Exception):
    """Bad user input. The CLI prints ``str(err)`` and exits 2."""

    def __init__(self, source: str, field: str | None, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        where = source if field is None else f"{source}: field '{field}'"
        super().__init__(f"{where}: {problem}")


def _loc_to_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += part if not out else f".{part}"
    return out or "(top level)"


def read_json(path: Path | str) -> Any:
    """Load a JSON file, or raise ``InputError`` saying why it cannot be read."""
    p = Path(path)
    source = str(path)
    if not p.exists():
        raise InputError(source, None, "file not found; check the path")
    if p.is_dir():
        raise InputError(source, None, "is a directory; give a JSON file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(source, None, f"cannot be read ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            source, None, f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None


def validation_error_to_input_error(source: str, exc: ValidationError) -> InputError:
    """Turn pydantic's error list into one message naming the first bad field (and how many others)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    field = _loc_to_path(tuple(first.get("loc", ())))
    problem = str(first.get("msg", "is invalid"))
    if "input" in first and first.get("type") not in {"missing"}:
        shown = json.dumps(first["input"], default=str)
        if len(shown) <= 60:
            problem += f" (got {shown})"
    if len(errors) > 1:
        problem += f"; {len(errors) - 1} more problem(s) in this file"
    return InputError(source, field, problem)


def parse_json_file(path: Path | str, schema: type[T]) -> T:
    """Read ``path`` and validate it against a pydantic model (use ``RootModel`` for a top-level list)."""
    data = read_json(path)
    return parse_data(str(path), data, schema)


def parse_data(source: str, data: Any, schema: type[T]) -> T:
    try:
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return cast(T, schema.model_validate(data))
        return TypeAdapter(schema).validate_python(data)
    except ValidationError as exc:
        raise validation_error_to_input_error(source, exc) from None
    except InvalidSpecError as exc:
        raise InputError(source, exc.field, exc.message.split(": ", 1)[-1]) from None
    except DomainError as exc:
        raise InputError(source, None, str(exc)) from None
