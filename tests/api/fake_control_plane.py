"""An in-memory control plane with the same calls as ``scalar.runtime.ControlPlane`` (for API tests).

It refuses what the real one refuses at submission in the simplest form (more GPUs than ``max_gpus``,
too much VRAM), keeps jobs in a dict and answers /orderbook over seed 000's example book. A job named
``explode`` makes ``submit_job`` raise an unexpected error, to test that the API never leaks it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from scalar.domain.orderbook import analyze_orderbook, required_gpus_for
from scalar.domain.reasons import Reason
from scalar.runtime.service import JobRejectedError
from scalar.wire.orderbook import OrderbookFile, build_orderbook_response
from tests.conftest import EXAMPLES

SEED_BOOK = OrderbookFile.model_validate_json((EXAMPLES / "book_seed000.json").read_text())
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "REJECTED"}


class FakeControlPlane:
    def __init__(self, *, max_gpus: int = 32, max_vram_gb: float = 141.0) -> None:
        self.max_gpus = max_gpus
        self.max_vram_gb = max_vram_gb
        self.jobs: dict[str, dict[str, Any]] = {}
        self.submitted: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.status = "ok"

    def submit_job(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        if fields.get("name") == "explode":
            raise RuntimeError("secret internal detail /etc/passwd")
        reasons: list[Reason] = []
        if fields["gpu_count"] > self.max_gpus:
            reasons.append(
                Reason(
                    "too_large",
                    f"needs {fields['gpu_count']} GPUs; the most any offer or gang can hold is {self.max_gpus}",
                    "gpu_count",
                    need=fields["gpu_count"],
                    have=self.max_gpus,
                )
            )
        if fields["vram_per_gpu_gb"] > self.max_vram_gb:
            reasons.append(
                Reason(
                    "vram_too_large",
                    f"needs {fields['vram_per_gpu_gb']:g} GB VRAM per GPU; the largest GPU on offer has "
                    f"{self.max_vram_gb:g} GB",
                    "vram_per_gpu_gb",
                    need=fields["vram_per_gpu_gb"],
                    have=self.max_vram_gb,
                )
            )
        if reasons:
            raise JobRejectedError(reasons)
        with self._lock:
            job_id = f"job-{next(self._ids):04d}"
            job = {
                "id": job_id,
                "name": fields.get("name"),
                "state": "PENDING",
                "reason": "waiting to be scheduled",
                "tier": fields["tier"],
                "gpu_count": fields["gpu_count"],
                "vram_per_gpu_gb": fields["vram_per_gpu_gb"],
                "cpu_cores": fields["cpu_cores"],
                "ram_gb": fields["ram_gb"],
                "expected_duration_sec": fields["expected_duration_sec"],
                "priority": fields["priority"],
                "gpu_models": fields.get("gpu_models"),
                "share_gpu": fields["share_gpu"],
                "submitted_at": datetime(2025, 1, 9, 12, tzinfo=UTC).isoformat(),
                "started_at": None,
                "finished_at": None,
                "placements": [],
            }
            self.jobs[job_id] = job
            self.submitted.append(dict(fields))
            return dict(job)

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        with self._lock:
            job = self.jobs[job_id]
            if job["state"] in TERMINAL:
                raise ValueError(f"it is already {job['state']}")
            job["state"] = "CANCELLED"
            job["reason"] = "cancelled by request"
            return dict(job)

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        job = self.jobs.get(job_id)
        return None if job is None else dict(job)

    def list_jobs(
        self,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        newest_first: bool = False,
        after: str | None = None,
    ) -> list[dict[str, Any]]:
        jobs = sorted(
            (j for j in self.jobs.values() if state is None or j["state"] == state), key=lambda j: j["id"]
        )
        if newest_first:
            jobs.reverse()
        if after is not None:
            jobs = [j for j in jobs if (j["id"] < after if newest_first else j["id"] > after)]
        return [dict(j) for j in jobs[offset : offset + limit]]

    def orderbook(self, instance_type: str, node_count: int, gpus_per_node: int = 8) -> dict[str, Any]:
        if instance_type != SEED_BOOK.instance_type:
            raise KeyError(f"unknown instance type {instance_type!r}; books: {SEED_BOOK.instance_type}")
        required = required_gpus_for(node_count, gpus_per_node)
        analysis = analyze_orderbook(SEED_BOOK.ask_orders(), SEED_BOOK.bid_orders(), required)
        assert SEED_BOOK.last_updated is not None
        response = build_orderbook_response(
            analysis, instance_type, node_count, gpus_per_node, SEED_BOOK.last_updated
        )
        return response.model_dump(mode="json")

    def health(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "role": "leader",
            "database": "postgresql+psycopg://scalar:hunter2@db.example:5432/scalar",
            "last_step_at": None,
        }
