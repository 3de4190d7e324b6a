"""A serverless handler as RunPod writes them: a function of the job (``{"id", "input"}``) that returns
the output. docs/endpoints.md's quick start deploys it (examples/endpoint_quickstart.yaml)."""

from __future__ import annotations

from typing import Any


def square(job: dict[str, Any]) -> dict[str, Any]:
    x = job["input"]["x"]
    return {"square": x * x}
