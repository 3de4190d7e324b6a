"""Endpoint workers carry the spec's ``cudaVersions`` to the packer (seed 004): over HTTP, on the built-in
market, whose nodes run CUDA 12.8 (``BUILTIN_CUDA_VERSION``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalar.providers.builtin.config import BUILTIN_CUDA_VERSION
from scalar.runtime import ControlPlane
from tests.endpoints.harness import drive_until, endpoint_api, spec


def worker_jobs(plane: ControlPlane, eid: str) -> list[dict[str, Any]]:
    return [j for j in plane.list_jobs(limit=1000) if j.get("endpoint_id") == eid]


def test_workers_run_on_nodes_of_an_allowed_cuda_version_and_wait_when_none_is(
    sqlite_url: str, tmp_path: Path
) -> None:
    assert BUILTIN_CUDA_VERSION == "12.8"
    with endpoint_api(sqlite_url, tmp_path) as (client, plane, clock):
        ok = client.post("/endpoints", json=spec("cuda-ok", workersMin=1, cudaVersions=["12.4", "12.8"]))
        assert ok.status_code == 201, ok.text
        old = client.post("/endpoints", json=spec("cuda-old", workersMin=1, cudaVersions=["12.1"]))
        assert old.status_code == 201, old.text
        ok_id, old_id = ok.json()["id"], old.json()["id"]

        drive_until(plane, clock, lambda: any(j["state"] == "RUNNING" for j in worker_jobs(plane, ok_id)))
        [running] = [j for j in worker_jobs(plane, ok_id) if j["state"] == "RUNNING"]
        assert running["cuda_versions"] == ["12.4", "12.8"]
        assert running["gpu_models"][0] == "RTX6000Ada"  # the spec's first group first
        node_id = running["placements"][0]["node_id"]
        [node] = [n for n in client.get("/nodes").json()["nodes"] if n["node_id"] == node_id]
        assert node["cuda_version"] == "12.8"

        waiting = worker_jobs(plane, old_id)
        assert waiting and all(j["state"] == "PENDING" and not j["placements"] for j in waiting)
        assert all(j["cuda_versions"] == ["12.1"] for j in waiting)
        reason = waiting[0]["reason"] or ""
        assert "cuda_mismatch" in reason or "CUDA version" in reason, reason
