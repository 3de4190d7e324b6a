"""Handlers for endpoint workers run by node agents (``tests.endpoints.gpu_handlers:...``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def square_on_gpu(job: dict[str, Any]) -> dict[str, Any]:
    """x squared, with the process and the GPUs it saw. With ``hang_once`` (a path): the first delivery
    writes its pid there and hangs ``hang_s`` seconds (120; a test kills it or fences its late answer),
    later deliveries answer at once."""
    inp = job["input"]
    marker = inp.get("hang_once")
    if marker and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        time.sleep(float(inp.get("hang_s", 120)))
    return {
        "square": inp["x"] * inp["x"],
        "pid": os.getpid(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cuda_device_order": os.environ.get("CUDA_DEVICE_ORDER"),
    }
