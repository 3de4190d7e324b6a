"""User errors on the command line: one clear line on stderr, exit code 2, never a traceback."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar

import typer

from scalar.cli.inputs import InputError
from scalar.domain.errors import DomainError

P = ParamSpec("P")
R = TypeVar("R")

USAGE_ERROR = 2

# The server's fix hints name its HTTP routes; on the command line the same advice names a command.
# Longest routes first, so ``POST /jobs/preview`` is not read as ``POST /jobs``.
CLI_EQUIVALENTS: tuple[tuple[str, str], ...] = (
    ("POST /jobs/preview", "`scalar submit --dry-run`"),
    ("GET /jobs/{id}/logs", "`scalar logs JOB`"),
    ("POST /jobs", "`scalar submit`"),
    ("GET /jobs", "`scalar jobs`"),
    ("DELETE /jobs", "`scalar cancel`"),
    ("POST /endpoints", "`scalar endpoint deploy`"),
    ("GET /endpoints", "`scalar endpoint list`"),
    ("POST /v2/{endpoint_id}/run", "the endpoint's /run route"),
    ("GET /tokens", "`scalar token list`"),
    ("POST /tokens", "`scalar token create`"),
    ("GET /providers", "`scalar providers`"),
    ("GET /prices", "`scalar prices`"),
    ("GET /agents", "`scalar nodes`"),
    ("GET /nodes", "`scalar nodes`"),
    ("GET /blocks", "`scalar blocks`"),
    ("GET /healthz", "`scalar status`"),
    ("GET /status", "`scalar status`"),
)
_ROUTE = re.compile("|".join(re.escape(route) + r"(?![\w/{])" for route, _ in CLI_EQUIVALENTS))
_SAME_TWICE = re.compile(r"(`scalar [^`]+`) \(or \1\)")


def cli_hints(text: str) -> str:
    """``give a job id as returned by POST /jobs (GET /jobs lists them)`` -> ``... as returned by
    `scalar submit` (`scalar jobs` lists them)``: a server message as a command-line user acts on it."""
    commands = dict(CLI_EQUIVALENTS)
    out = _ROUTE.sub(lambda m: commands[m.group(0)], text)
    return _SAME_TWICE.sub(r"\1", out)


def fail(message: str, code: int = USAGE_ERROR) -> NoReturn:
    sys.stderr.write(f"error: {cli_hints(message)}\n")
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
