"""Serverless endpoints end to end over HTTP, on a real control plane with injected time (SQLite and
PostgreSQL): deploy, send RunPod-style requests, get results, scale up under a burst and back to zero; a
worker lost mid-request; GPU groups sold nowhere; bad specs refused with the field and the fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.api.real_control_plane import stored_jobs
from tests.endpoints.harness import drive_until, driving_in_background, endpoint_api, spec


def test_deploy_serve_a_burst_scale_up_and_back_to_zero(db_url: str, tmp_path: Path) -> None:
    with endpoint_api(db_url, tmp_path) as (client, plane, clock):
        created = client.post("/endpoints", json=spec("burst"))
        assert created.status_code == 201, created.text
        endpoint = created.json()
        eid = endpoint["id"]
        assert endpoint["target"] == "builtin" and endpoint["workers"] == []
        assert client.get("/endpoints").json()["count"] == 1

        ids = [client.post(f"/v2/{eid}/run", json={"input": {"n": i}}).json()["id"] for i in range(12)]
        assert client.get(f"/v2/{eid}/status/{ids[0]}").json()["status"] == "IN_QUEUE"
        assert client.get(f"/v2/{eid}/health").json()["jobs"]["inQueue"] == 12

        most = 0

        def all_done() -> bool:
            nonlocal most
            most = max(most, len(client.get(f"/endpoints/{eid}").json()["workers"]))
            return all(client.get(f"/v2/{eid}/status/{i}").json()["status"] == "COMPLETED" for i in ids)

        drive_until(plane, clock, all_done, max_s=240)
        result = client.get(f"/v2/{eid}/status/{ids[3]}").json()
        assert result["output"]["echo"] == {"n": 3} and result["attempts"] == 1
        assert result["delayTime"] > 0 and result["executionTime"] > 0 and result["workerId"]
        assert most >= 2, "the burst should have added workers"
        codes = {d["code"] for d in client.get(f"/endpoints/{eid}").json()["scaling"]}
        assert "scale_from_zero" in codes and "queue_delay" in codes

        drive_until(plane, clock, lambda: client.get(f"/endpoints/{eid}").json()["workers"] == [], max_s=120)
        view = client.get(f"/endpoints/{eid}").json()
        assert view["health"]["workers"] == {
            "idle": 0,
            "initializing": 0,
            "ready": 0,
            "running": 0,
            "throttled": 0,
            "unhealthy": 0,
        }
        assert view["health"]["jobs"]["completed"] == 12
        assert view["scaling"][0]["code"] in ("scale_to_zero", "hold")
        assert any(d["code"] == "scale_to_zero" for d in view["scaling"])
        assert "scales to zero" in view["no_workers_reason"]
        assert view["latency_ms"]["samples"] == 12 and view["latency_ms"]["p99"] >= view["latency_ms"]["p50"]
        assert view["cost"]["worker_hours"] > 0 and view["cost"]["cost_per_1000_requests_usd"] is not None

        # the workers were jobs of the control plane, tagged with the endpoint, cancelled by scale-down
        def worker_jobs() -> list[dict[str, Any]]:
            return [j for j in stored_jobs(plane) if j.get("endpoint_id") == eid]

        drive_until(plane, clock, lambda: all(j["state"] != "RUNNING" for j in worker_jobs()))
        jobs = worker_jobs()
        assert len(jobs) >= 2 and all(j["state"] == "CANCELLED" for j in jobs)
        assert jobs[0]["gpu_models"][0] == "RTX6000Ada"  # ADA_48_PRO first: the spec's preference order
        logs = client.get(f"/endpoints/{eid}/logs").json()["lines"]
        assert any(line["kind"] == "scaling" for line in logs)

        deleted = client.delete(f"/endpoints/{eid}")
        assert deleted.status_code == 200 and deleted.json()["state"] == "deleted"
        assert client.post(f"/v2/{eid}/run", json={"input": {}}).status_code == 404


def test_a_worker_lost_mid_request_has_the_request_retried_once_and_completed(
    db_url: str, tmp_path: Path
) -> None:
    with endpoint_api(db_url, tmp_path) as (client, plane, clock):
        eid = client.post("/endpoints", json=spec("retry", workersMax=1)).json()["id"]
        rid = client.post(f"/v2/{eid}/run", json={"input": {"work_s": 30}}).json()["id"]
        drive_until(
            plane, clock, lambda: client.get(f"/v2/{eid}/status/{rid}").json()["status"] == "IN_PROGRESS"
        )
        first = client.get(f"/v2/{eid}/status/{rid}").json()
        worker = next(
            w for w in client.get(f"/endpoints/{eid}").json()["workers"] if w["id"] == first["workerId"]
        )
        plane.cancel_job(worker["job_id"])  # the worker's job ends under it: the worker is lost

        drive_until(
            plane, clock, lambda: client.get(f"/v2/{eid}/status/{rid}").json()["status"] == "COMPLETED"
        )
        done = client.get(f"/v2/{eid}/status/{rid}").json()
        assert done["attempts"] == 2 and done["retries"] == 1
        assert done["workerId"] != first["workerId"]
        health = client.get(f"/v2/{eid}/health").json()
        assert health["jobs"]["retried"] == 1 and health["jobs"]["completed"] == 1
        assert health["workers"]["unhealthy"] == 1
        logs = client.get(f"/endpoints/{eid}/logs").json()["lines"]
        assert any(line["code"] == "lost" and "CANCELLED" in line["message"] for line in logs)


def test_an_endpoint_whose_gpu_groups_are_sold_nowhere_says_why_it_has_no_workers(
    db_url: str, tmp_path: Path
) -> None:
    with endpoint_api(db_url, tmp_path) as (client, plane, clock):
        eid = client.post("/endpoints", json=spec("nowhere", gpus=["ADA_32_PRO"])).json()["id"]
        rid = client.post(f"/v2/{eid}/run", json={"input": {}}).json()["id"]
        drive_until(plane, clock, lambda: client.get(f"/endpoints/{eid}").json()["scaling"] != [])
        view = client.get(f"/endpoints/{eid}").json()
        assert view["workers"] == [] and view["health"]["workers"]["ready"] == 0
        assert "RTX5090" in view["no_workers_reason"] and "ADA_32_PRO" in view["no_workers_reason"]
        assert view["scaling"][0]["code"] == "worker_refused"
        assert client.get(f"/v2/{eid}/status/{rid}").json()["status"] == "IN_QUEUE"
        page = client.get("/ui/endpoints", headers={"Accept": "text/html"})  # the dashboard shows why
        assert page.status_code == 200 and "nowhere" in page.text and "queue depth" in page.text
        assert "RTX5090" in page.text and 'href="/ui/endpoints"' in page.text


def test_bad_specs_and_requests_are_refused_with_the_field_and_the_fix(db_url: str, tmp_path: Path) -> None:
    with endpoint_api(db_url, tmp_path) as (client, _plane, _clock):
        cases = [
            ({**spec("a"), "gpus": ["H100"]}, "gpus[0]", "ADA_80_PRO"),
            ({**spec("b"), "workersMin": 4, "workersMax": 2}, "workersMin", "raise workersMax"),
            ({**spec("c"), "workerMax": 2}, "workerMax", "workersMax"),
            ({**spec("d"), "handler": "no_colon"}, "handler", "module:function"),
            ({**spec("e"), "scalerValue": "four"}, "scalerValue", ""),
        ]
        for body, field, fix in cases:
            response = client.post("/endpoints", json=body)
            assert response.status_code == 422, response.text
            assert response.headers["content-type"].startswith("application/problem+json")
            error = response.json()["errors"][0]
            assert error["field"] == field and fix in error["fix"], error
        eid = client.post("/endpoints", json=spec("ok")).json()["id"]
        dup = client.post("/endpoints", json=spec("ok"))
        assert dup.status_code == 422 and dup.json()["errors"][0]["field"] == "name"
        patched = client.patch(f"/endpoints/{eid}", json={"workersMax": 0, "workersMin": 1})
        assert patched.status_code == 422 and patched.json()["errors"][0]["field"] == "workersMin"
        assert client.patch(f"/endpoints/{eid}", json={"workersMax": 5}).json()["spec"]["workersMax"] == 5
        assert client.get("/endpoints/ep-nope").status_code == 404
        # the data plane answers in RunPod's shapes
        bad = client.post(f"/v2/{eid}/run", json={"inputs": {}})
        assert bad.status_code == 422 and "input" in bad.json()["error"]
        assert bad.json()["errors"][0]["field"] in ("input", "inputs")
        assert client.get("/v2/ep-nope/health").status_code == 404
        assert "error" in client.get(f"/v2/{eid}/status/req-nope").json()


def test_a_local_endpoint_runs_its_python_handler_in_a_subprocess(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'local.db'}"
    with endpoint_api(db_url, tmp_path) as (client, plane, clock):
        body = spec("local-square", handler="tests.endpoints.handlers:square", workersMax=1)
        del body["imageName"]
        created = client.post("/endpoints", json=body).json()
        eid = created["id"]
        assert created["target"] == "local" and created["spec"]["imageName"] == "scalar/python-handler:local"
        with driving_in_background(plane, clock):
            answer = client.post(f"/v2/{eid}/runsync", json={"input": {"x": 7}}).json()
            failed = client.post(f"/v2/{eid}/runsync", json={"input": {"x": -1}}).json()
        assert answer["status"] == "COMPLETED", answer
        assert answer["output"]["square"] == 49 and answer["output"]["request_id"] == answer["id"]
        assert answer["output"]["pid"] != os.getpid()  # computed by the handler in its own process
        assert failed["status"] == "FAILED" and "x must be >= 0" in failed["error"]


def test_requests_time_out_per_execution_timeout_and_can_be_cancelled(db_url: str, tmp_path: Path) -> None:
    with endpoint_api(db_url, tmp_path) as (client, plane, clock):
        eid = client.post("/endpoints", json=spec("timeouts", workersMax=1, executionTimeoutMs=3000)).json()[
            "id"
        ]
        slow = client.post(f"/v2/{eid}/run", json={"input": {"work_s": 60}}).json()["id"]
        queued = client.post(f"/v2/{eid}/run", json={"input": {"work_s": 60}}).json()["id"]
        cancelled = client.post(f"/v2/{eid}/cancel/{queued}").json()
        assert cancelled["status"] == "CANCELLED"
        drive_until(
            plane, clock, lambda: client.get(f"/v2/{eid}/status/{slow}").json()["status"] == "TIMED_OUT"
        )
        timed_out = client.get(f"/v2/{eid}/status/{slow}").json()
        assert "executionTimeoutMs 3000" in timed_out["error"] and 3000 <= timed_out["executionTime"] <= 5000
        assert client.get(f"/v2/{eid}/status/{queued}").json()["status"] == "CANCELLED"  # never delivered
        assert client.get(f"/v2/{eid}/health").json()["jobs"]["failed"] == 1
