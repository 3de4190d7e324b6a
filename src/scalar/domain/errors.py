"""Typed errors of the decision core. Each says what was wrong and how to fix it."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every error the decision core raises on purpose.

    ``hint`` tells the user what to change ("To fix: ..."); surfaces print ``str(err)``, never a traceback.
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} To fix: {hint}")


class InvalidSpecError(DomainError, ValueError):
    """A value given to the core is invalid. ``field`` names it (dotted path, e.g. ``gpus[1]``)."""

    def __init__(self, field: str, problem: str, hint: str | None = None) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}", hint)


class UnknownGpuModelError(DomainError, LookupError):
    """A GPU model name the registry (``scalar.domain.gpus``) does not know."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        self.known = known
        super().__init__(
            f"{name!r} is not a known GPU model.",
            f"use one of {', '.join(sorted(known))} (or an alias of one; docs/gpus.md lists them)",
        )
