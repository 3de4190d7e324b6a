"""A real handler for local endpoints (``tests.endpoints.handlers:square``), run in a worker subprocess."""

from __future__ import annotations

import os
from typing import Any


def square(job: dict[str, Any]) -> dict[str, Any]:
    x = job["input"]["x"]
    if x < 0:
        raise ValueError("x must be >= 0")
    return {"square": x * x, "pid": os.getpid(), "request_id": job["id"]}
