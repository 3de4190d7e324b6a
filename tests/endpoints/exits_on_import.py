"""A worker module whose process ends while it is imported (``tests.endpoints.exits_on_import:handler``)."""

from __future__ import annotations

import os
from typing import Any

os._exit(4)


def handler(job: dict[str, Any]) -> Any:  # never reached
    return job
