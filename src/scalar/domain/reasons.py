"""Every decision carries its reason, as data and as a sentence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Reason:
    """Why something was decided.

    ``code`` is a stable machine-readable identifier (``insufficient_gpus``, ``expires_too_soon``...),
    ``message`` the sentence a person reads. ``resource``/``need``/``have``/``limit`` carry the numbers
    when the reason is about a quantity: "needs 4 GPUs with 60 GB free, has 2".
    """

    code: str
    message: str
    resource: str | None = None
    need: float | int | str | None = None
    have: float | int | str | None = None
    limit: float | int | str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "resource": self.resource,
            "need": self.need,
            "have": self.have,
            "limit": self.limit,
            "message": self.message,
        }

    def __str__(self) -> str:
        return self.message
