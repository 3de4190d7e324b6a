"""RunPod-style handlers for local endpoints (``tests.endpoints.runpod_handlers:...``), each run in its
worker's own process by the RunPod semantics Scalar implements (sync, async, generator, async generator)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any


def plain(job: dict[str, Any]) -> Any:
    """By ``input.mode``: ``echo`` (the input back, with the pid), ``error`` (RunPod's error return),
    ``sleep`` (``s`` seconds, then echo), ``crash`` (the process dies under the request), ``raise``."""
    inp = job["input"]
    mode = inp.get("mode", "echo")
    if mode == "error":
        return {"error": f"bad input {inp.get('value')!r}", "seen": inp.get("value")}
    if mode == "sleep":
        time.sleep(float(inp["s"]))
    if mode == "crash":
        os._exit(3)
    if mode == "raise":
        raise ValueError("x must be >= 0")
    return {"echo": inp, "pid": os.getpid(), "request_id": job["id"]}


async def async_plain(job: dict[str, Any]) -> Any:
    await asyncio.sleep(0.01)
    return {"async_echo": job["input"], "refresh_worker": bool(job["input"].get("refresh"))}


def count(job: dict[str, Any]) -> Iterator[Any]:
    """Yields ``{"n": i}`` for i < ``input.n``, ``pause`` seconds apart; ``fail_at`` yields RunPod's error."""
    inp = job["input"]
    for i in range(int(inp["n"])):
        if inp.get("fail_at") == i:
            yield {"error": f"failed at {i}"}
            return
        time.sleep(float(inp.get("pause", 0.0)))
        yield {"n": i}


async def async_count(job: dict[str, Any]) -> AsyncIterator[Any]:
    for i in range(int(job["input"]["n"])):
        await asyncio.sleep(float(job["input"].get("pause", 0.0)))
        yield f"token-{i}"


def env_seen(job: dict[str, Any]) -> Any:
    """The worker's value of each variable named in ``input.names`` (``None``: not set)."""
    return {name: os.environ.get(name) for name in job["input"]["names"]}
