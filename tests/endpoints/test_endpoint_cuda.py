"""Endpoint workers carry the spec's ``cudaVersions`` to the packer (seed 004) as "at or above the lowest"
on Scalar's own fleet (a driver runs applications built for an older CUDA): over HTTP, on the built-in
market, whose nodes run CUDA 12.8 (``BUILTIN_CUDA_VERSION``); RunPod gets the exact list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.endpoints import fleet_cuda_versions
from scalar.domain.gpus import CudaVersion
from scalar.providers.builtin.config import BUILTIN_CUDA_VERSION
from scalar.runtime import ControlPlane
from tests.api.real_control_plane import stored_jobs
from tests.endpoints.harness import drive_until, endpoint_api, spec


def worker_jobs(plane: ControlPlane, eid: str) -> list[dict[str, Any]]:
    return [j for j in stored_jobs(plane) if j.get("endpoint_id") == eid]


def test_workers_run_on_nodes_of_an_allowed_cuda_version_and_wait_when_none_is(
    sqlite_url: str, tmp_path: Path
) -> None:
    assert BUILTIN_CUDA_VERSION == "12.8"
    with endpoint_api(sqlite_url, tmp_path) as (client, plane, clock):
        ok = client.post("/endpoints", json=spec("cuda-ok", workersMin=1, cudaVersions=["12.4", "12.8"]))
        assert ok.status_code == 201, ok.text
        old = client.post("/endpoints", json=spec("cuda-new", workersMin=1, cudaVersions=["12.9", "13.0"]))
        assert old.status_code == 201, old.text
        ok_id, old_id = ok.json()["id"], old.json()["id"]

        drive_until(plane, clock, lambda: any(j["state"] == "RUNNING" for j in worker_jobs(plane, ok_id)))
        [running] = [j for j in worker_jobs(plane, ok_id) if j["state"] == "RUNNING"]
        assert running["cuda_versions"][:2] == ["12.4", "12.5"] and "13.0" in running["cuda_versions"]
        assert client.get(f"/endpoints/{ok_id}").json()["spec"]["cudaVersions"] == ["12.4", "12.8"]
        assert running["gpu_models"][0] == "RTX6000Ada"  # the spec's first group first
        node_id = running["placements"][0]["node_id"]
        [node] = [n for n in client.get("/nodes").json()["nodes"] if n["node_id"] == node_id]
        assert node["cuda_version"] == "12.8"

        waiting = worker_jobs(plane, old_id)
        assert waiting and all(j["state"] == "PENDING" and not j["placements"] for j in waiting)
        assert all(j["cuda_versions"] == ["12.9", "13.0", "13.1", "13.2"] for j in waiting)
        reason = waiting[0]["reason"] or ""
        assert "cuda_mismatch" in reason or "CUDA version" in reason, reason


@given(st.lists(st.sampled_from(list(CudaVersion)), min_size=1, unique=True))
def test_on_the_fleet_a_worker_accepts_every_known_version_at_or_above_the_lowest_allowed(
    allowed: list[CudaVersion],
) -> None:
    fleet = fleet_cuda_versions(allowed)
    assert set(allowed) <= set(fleet)  # never narrower than the spec
    assert all(v >= min(allowed) for v in fleet)  # never below its lowest
    assert fleet == tuple(sorted(v for v in CudaVersion if v >= min(allowed)))
    if min(allowed) <= CudaVersion.V13_0:  # a driver 580 host (CUDA 13.0) serves any 12.x or 13.0 spec
        assert CudaVersion.V13_0 in fleet
    assert fleet_cuda_versions([]) == ()  # no list: any version
