"""Over HTTP: hosts register with their CUDA version, and a job that lists ``cuda_versions`` is placed only
on a host with one of them (seed 004's allowed CUDA versions, docs/api.md).

A real control plane on loopback (no market: only the registered hosts), real agent registrations through
``POST /agent/v1/register`` carrying the facts an agent gathers, jobs through ``POST /jobs``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalar import __version__
from scalar.wire.agent import PROTOCOL
from tests.agent.harness import Controller, controller, wait_until


def register(c: Controller, hostname: str, cuda: str | None, driver: str | None = "570.86") -> str:
    facts: dict[str, Any] = {
        "hostname": hostname,
        "gpus": [
            {"index": i, "uuid": f"GPU-{hostname}-{i}", "model": "H100", "memory_gb": 80.0} for i in range(2)
        ],
        "cpu_count": 16,
        "ram_gb": 64.0,
        "disk_gb": 100.0,
        "cuda_version": cuda,
        "driver_version": driver,
    }
    body = {"join_token": c.token(), "version": __version__, "protocol": PROTOCOL, "facts": facts}
    response = c.http.post("/agent/v1/register", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["node_id"])


def nodes_if(c: Controller, count: int) -> list[dict[str, Any]] | None:
    nodes = c.http.get("/nodes").json()["nodes"]
    return list(nodes) if len(nodes) == count else None


def explained_if(c: Controller, job_id: str, text: str) -> dict[str, Any] | None:
    explained = c.http.get(f"/jobs/{job_id}/explain").json()
    return dict(explained) if text in str(explained) else None


def placed_on(c: Controller, job_id: str) -> str | None:
    placements = c.job(job_id)["placements"]
    return str(placements[0]["node_id"]) if placements else None


def test_a_job_with_cuda_versions_is_placed_only_on_a_matching_node(sqlite_url: str, tmp_path: Path) -> None:
    with controller(sqlite_url, tmp_path) as c:
        new = register(c, "a-new", "12.8")  # node-a-new-... sorts first: it wins every tie
        old = register(c, "b-old", "12.4")
        nodes = wait_until(lambda: nodes_if(c, 2), 20, "both nodes")
        assert {n["node_id"]: n["cuda_version"] for n in nodes} == {new: "12.8", old: "12.4"}
        assert {n["driver_version"] for n in nodes} == {"570.86"}

        wanted = c.submit(command=["true"], cuda_versions=["12.4"], gpu_count=1)
        assert c.job(wanted)["cuda_versions"] == ["12.4"]
        assert wait_until(lambda: placed_on(c, wanted), 20, "the 12.4 job placed") == old

        nowhere = c.submit(command=["true"], cuda_versions=["11.8"], gpu_count=1)
        explained = wait_until(lambda: explained_if(c, nowhere, "CUDA version"), 20, "the 11.8 job explained")
        assert "cuda_mismatch" in str(explained)
        assert c.job(nowhere)["state"] == "PENDING" and placed_on(c, nowhere) is None

        anything = c.submit(command=["true"], gpu_count=1)  # no list: any CUDA version
        assert wait_until(lambda: placed_on(c, anything), 20, "the job without a list placed") in {new, old}


def test_bad_cuda_versions_are_refused_naming_the_field(sqlite_url: str, tmp_path: Path) -> None:
    with controller(sqlite_url, tmp_path) as c:
        for versions, field in (
            (["12"], "cuda_versions[0]"),
            ([], "cuda_versions"),
            (["12.4"] * 17, "cuda_versions"),
        ):
            response = c.http.post("/jobs", json={"tier": "FAST", "gpu_count": 1, "cuda_versions": versions})
            assert response.status_code == 422, response.text
            assert response.headers["content-type"].startswith("application/problem+json")
            [problem] = response.json()["errors"]
            assert problem["field"] == field
            assert "MAJOR.MINOR" in problem["fix"] or "MAJOR.MINOR" in problem["problem"]
