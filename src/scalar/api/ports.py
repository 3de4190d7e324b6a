"""What the API needs from a control plane: the calls of ``scalar.runtime.ControlPlane`` it uses.

A ``Protocol``: the API is typed against the calls it uses, not the whole class (the optional route groups
check for their own ports at ``create_app``). A job is answered as ``wire/jobs.py``'s ``JobOut``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from scalar.wire.jobs import HealthDetailsOut, JobOut
from scalar.wire.orderbook import OrderbookResponse


class ControlPlanePort(Protocol):
    def submit_job(self, fields: Mapping[str, Any]) -> JobOut: ...

    def cancel_job(self, job_id: str) -> JobOut: ...

    def get_job(self, job_id: str) -> JobOut | None: ...

    def list_jobs(
        self,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        newest_first: bool = False,
        after: str | None = None,
    ) -> list[JobOut]: ...

    def orderbook(self, instance_type: str, node_count: int, gpus_per_node: int = 8) -> OrderbookResponse: ...

    def health(self) -> HealthDetailsOut: ...
