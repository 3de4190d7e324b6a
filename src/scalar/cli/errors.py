"""User errors on the command line: one clear line on stderr, exit code 2, never a traceback."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar

import typer

from scalar.cli.inputs import InputError
from scalar.domain.errors import DomainError

P = ParamSpec("P")
R = TypeVar("R")

USAGE_ERROR = 2


def fail(message: str, code: int = USAGE_ERROR) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(code)


def user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command so ``InputError``/``DomainError`` exit 2 with their message."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (InputError, DomainError) as exc:
            fail(str(exc))

    return wrapper
