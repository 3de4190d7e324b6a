"""Unmodified RunPod workers (``runpod.serverless.start``, runpod 1.12.0) run as a Scalar endpoint's
workers on a real node agent: the endpoint spec's ``command``, ``workdir`` and ``env``; the worker protocol
(job-take long poll, job-done with output, error and both, job-stream, ping) behind the worker's own raw
``Authorization`` key; sync, generator and async handlers; a raised exception; a worker that dies
mid-request. Every worker's spec sets ``RUNPOD_SKIP_AUTO_SYSTEM_CHECKS=true`` (the SDK's own checks would
dial outside addresses), and the tests check the worker saw it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from scalar.cli.main import app
from tests.agent.harness import Controller, agent, controller, kill_tree_of, wait_until

WORKER = Path(__file__).parent / "runpod_workers" / "worker.py"
SKIP_CHECKS = {"RUNPOD_SKIP_AUTO_SYSTEM_CHECKS": "true"}


def worker_spec(name: str, kind: str, workdir: Path, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "command": [sys.executable, "-u", str(WORKER)],
        "workdir": str(workdir),
        "template": {"imageName": "example/worker:1", "env": [{"key": "WORKER_KIND", "value": "sync"}]},
        "env": {**SKIP_CHECKS, "WORKER_KIND": kind},  # env overrides template.env
        "gpus": ["ADA_80_PRO"],  # the H100s of the agent's host
        "workersMin": 1,
        "workersMax": 1,
        "scalerType": "QUEUE_DELAY",
        "scalerValue": 1,
        "idleTimeout": 5,
        "executionTimeoutMs": 60_000,
        **more,
    }


def deploy(c: Controller, spec: dict[str, Any]) -> str:
    created = c.http.post("/endpoints", json=spec)
    assert created.status_code == 201, created.text
    view = created.json()
    assert view["target"] == "local" and view["spec"]["env"]["RUNPOD_SKIP_AUTO_SYSTEM_CHECKS"] == "true"
    return str(view["id"])


def finished(c: Controller, eid: str, rid: str, timeout_s: float = 60) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        body = dict(c.http.get(f"/v2/{eid}/status/{rid}").json())
        return body if body["status"] not in ("IN_QUEUE", "IN_PROGRESS") else None

    return wait_until(done, timeout_s, f"request {rid}")


def run(c: Controller, eid: str, job_input: Any) -> str:
    return str(c.http.post(f"/v2/{eid}/run", json={"input": job_input}).json()["id"])


def test_an_unmodified_runpod_worker_serves_sync_error_and_streaming_requests(
    sqlite_url: str, tmp_path: Path
) -> None:
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "registration")
            # deployed as a RunPod user would: a spec file and `scalar endpoint deploy`
            spec_path = tmp_path / "spec.yaml"
            spec_path.write_text(yaml.safe_dump(worker_spec("rp-sync", "sync", tmp_path)))
            deployed = CliRunner().invoke(
                app, ["endpoint", "deploy", str(spec_path), "--server", c.url, "--json"]
            )
            assert deployed.exit_code == 0, deployed.output
            eid = json.loads(deployed.stdout)["id"]
            view = c.http.get(f"/endpoints/{eid}").json()
            assert view["target"] == "local" and view["spec"]["env"] == {**SKIP_CHECKS, "WORKER_KIND": "sync"}
            assert view["spec"]["command"][0] == sys.executable and view["spec"]["workdir"] == str(tmp_path)
            gid = deploy(c, worker_spec("rp-gen", "gen", tmp_path))
            ok = finished(c, eid, run(c, eid, {"x": 7}), 90)
            assert ok["status"] == "COMPLETED", ok
            out = ok["output"]
            assert out["square"] == 49 and out["skip_checks"] == "true", out  # the spec's env reached it
            assert out["pod"] == ok["workerId"] and out["endpoint"] == eid and out["cwd"] == str(tmp_path)

            failed = finished(c, eid, run(c, eid, {"mode": "error", "x": 3}))
            assert failed["status"] == "FAILED" and failed["error"] == "bad input 3", failed
            raised = finished(c, eid, run(c, eid, {"mode": "raise"}))
            assert raised["status"] == "FAILED"
            assert json.loads(raised["error"])["error_message"] == "boom"

            rid = run(c, gid, {"n": 4})
            chunks: list[Any] = []

            def streamed() -> bool:
                body = c.http.get(f"/v2/{gid}/stream/{rid}").json()
                chunks.extend(chunk["output"] for chunk in body["stream"])
                return body["status"] == "COMPLETED" and not body["stream"]

            wait_until(streamed, 90, "the stream")
            assert chunks == [{"i": i} for i in range(4)]
            assert c.http.get(f"/v2/{gid}/status/{rid}").json()["output"] == [{"i": i} for i in range(4)]
            view = c.http.get(f"/endpoints/{eid}").json()
            assert view["start_error"] is None and view["health"]["jobs"]["failed"] == 2
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def test_a_runpod_worker_that_dies_mid_request_is_replaced_and_the_request_fails_after_the_retries(
    sqlite_url: str, tmp_path: Path
) -> None:
    with controller(sqlite_url, tmp_path, endpoint_max_request_retries=1) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "registration")
            eid = deploy(c, worker_spec("rp-die", "async", tmp_path))
            died = finished(c, eid, run(c, eid, {"mode": "die"}), 120)
            assert died["status"] == "FAILED" and died["attempts"] == 2 and died["retries"] == 1, died
            assert "max_request_retries = 1" in died["error"], died
            fine = finished(c, eid, run(c, eid, {"mode": "ok"}), 120)  # a fresh worker serves the next
            assert fine["status"] == "COMPLETED" and fine["output"] == {"async": {"mode": "ok"}}
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def test_the_worker_routes_take_only_the_workers_own_raw_key(sqlite_url: str, tmp_path: Path) -> None:
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "registration")
            eid = deploy(c, worker_spec("rp-auth", "sync", tmp_path))
            finished(c, eid, run(c, eid, {"x": 2}), 90)
            [worker] = [w for w in c.http.get(f"/endpoints/{eid}").json()["workers"] if w["state"] != "lost"]
            sealed = c.plane.job_service.get_document(worker["job_id"])["env"]["SCALAR_WORKER_TOKEN"]
            key = c.plane.agents.secret_box().open(sealed)
            base = f"{c.url}/agent/v1/runpod/{eid}"
            with httpx.Client(timeout=30) as raw:
                wrong = raw.get(f"{base}/ping/{worker['id']}?attempt=1", headers={"Authorization": "nope"})
                assert wrong.status_code == 401 and "status" in wrong.json()
                missing = raw.get(f"{base}/ping/{worker['id']}?attempt=1")
                assert missing.status_code == 401 and missing.json()["errors"][0]["field"] == "Authorization"
                ping = raw.get(
                    f"{base}/ping/{worker['id']}?attempt=1&job_id=&runpod_version=1.12.0",
                    headers={"Authorization": key},
                )
                assert ping.status_code == 200 and ping.json()["ok"] is True
                started = time.monotonic()
                idle = raw.get(
                    f"{base}/job-take/{worker['id']}?attempt=1&job_in_progress=1",
                    headers={"Authorization": key},
                )
                assert idle.status_code == 204 and time.monotonic() - started <= 25
                # another worker's routes: this key is not its key (nothing learned of which workers exist)
                other = raw.get(f"{base}/ping/wk-someone-else?attempt=1", headers={"Authorization": key})
                assert other.status_code == 401 and other.json()["errors"][0]["field"] == "Authorization"
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def test_the_worker_protocol_over_raw_http_take_batch_abandoned_poll_done_stream_and_stop(
    sqlite_url: str, tmp_path: Path
) -> None:
    """The test plays the worker (its job runs a process that never calls), with the worker's own key."""
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "registration")
            spec = worker_spec("rp-raw", "sync", tmp_path)
            spec["command"] = [sys.executable, "-c", "import time; time.sleep(600)"]
            eid = deploy(c, spec)

            def started() -> dict[str, Any] | None:
                found = [
                    w for w in c.http.get(f"/endpoints/{eid}").json()["workers"] if w["state"] != "pending"
                ]
                return found[0] if found else None

            worker = wait_until(started, 30, "the worker's job running")
            key = c.plane.agents.secret_box().open(
                c.plane.job_service.get_document(worker["job_id"])["env"]["SCALAR_WORKER_TOKEN"]
            )
            base = f"{c.url}/agent/v1/runpod/{eid}"
            wid = worker["id"]
            auth = {"Authorization": key}
            with httpx.Client(timeout=30, headers=auth) as raw:
                assert (
                    raw.get(f"{base}/ping/{wid}?attempt=1&job_id=&runpod_version=1.12.0").status_code == 200
                )
                wait_until(
                    lambda: c.http.get(f"/endpoints/{eid}").json()["workers"][0]["state"] == "idle",
                    30,
                    "ready",
                )
                # an abandoned poll hands nothing out: the request waits for the next poll
                with pytest.raises(httpx.ReadTimeout):
                    raw.get(f"{base}/job-take/{wid}?attempt=1&job_in_progress=0", timeout=0.5)
                rid = run(c, eid, {"x": 3})
                wait_until(
                    lambda: c.http.get(f"/v2/{eid}/status/{rid}").json()["status"] == "IN_PROGRESS",
                    30,
                    "delivery",
                )
                time.sleep(1.0)  # the abandoned poll's loop has seen the request by now, and the hang-up
                # job_in_progress=1 skips requests handed out before: it comes, so the abandoned poll handed out nothing
                batch = raw.get(f"{base}/job-take-batch/{wid}?attempt=1&batch_size=4&job_in_progress=1")
                assert batch.status_code == 200 and batch.json() == [{"id": rid, "input": {"x": 3}}]
                # a worker that says it has nothing in progress gets its unfinished request again
                again = raw.get(f"{base}/job-take/{wid}?attempt=1&job_in_progress=0")
                assert again.status_code == 200 and again.json()["id"] == rid
                # a chunk, then the result: output and error together (FAILED, the output kept)
                form = {"Content-Type": "application/x-www-form-urlencoded", "X-Request-ID": rid}
                chunk = raw.post(
                    f"{base}/job-stream/{wid}/{rid}?attempt=1&isStream=false",
                    content=json.dumps({"output": "part-1"}),
                    headers=form,
                )
                assert chunk.status_code == 200 and chunk.json()["accepted"], chunk.text
                assert c.http.get(f"/v2/{eid}/stream/{rid}").json()["stream"] == [{"output": "part-1"}]
                assert c.http.get(f"/v2/{eid}/stream/{rid}").json()["stream"] == []  # each chunk once
                wrong = raw.post(
                    f"{base}/job-done/{wid}/{rid}?attempt=1&isStream=false",
                    content="{}",
                    headers={**form, "X-Request-ID": "req-other"},
                )
                assert wrong.status_code == 422 and wrong.json()["errors"][0]["field"] == "X-Request-ID"
                done = raw.post(
                    f"{base}/job-done/{wid}/{rid}?attempt=1&isStream=false",
                    content=json.dumps({"output": {"partial": 1}, "error": "half done"}),
                    headers=form,
                )
                assert done.status_code == 200 and done.json()["accepted"], done.text
                body = c.http.get(f"/v2/{eid}/status/{rid}").json()
                assert body["status"] == "FAILED" and body["error"] == "half done"
                # a stale attempt is fenced
                late = raw.post(
                    f"{base}/job-done/{wid}/{rid}?attempt=2&isStream=false",
                    content=json.dumps({"output": 1}),
                    headers=form,
                )
                assert late.status_code == 200 and late.json()["accepted"] is True  # already recorded
                # a cancelled request reaches the worker's stop channel once
                rid2 = run(c, eid, {"x": 4})
                wait_until(
                    lambda: c.http.get(f"/v2/{eid}/status/{rid2}").json()["status"] == "IN_PROGRESS",
                    30,
                    "delivery",
                )
                assert raw.get(f"{base}/job-take/{wid}?attempt=1&job_in_progress=0").json()["id"] == rid2
                c.http.post(f"/v2/{eid}/cancel/{rid2}")
                stop = raw.get(f"{base}/job-stop/{wid}?attempt=1")
                assert stop.status_code == 200 and stop.json() == {"jobsToStop": [rid2]}
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def test_refresh_worker_replaces_the_runpod_workers_process_after_the_job(
    sqlite_url: str, tmp_path: Path
) -> None:
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "registration")
            eid = deploy(c, worker_spec("rp-refresh", "sync", tmp_path))
            first = finished(c, eid, run(c, eid, {"mode": "refresh"}), 90)
            assert first["status"] == "COMPLETED" and "refresh_worker" not in first["output"], first
            second = finished(c, eid, run(c, eid, {"x": 3}), 90)
            assert second["status"] == "COMPLETED" and second["output"]["square"] == 9, second
            # a fresh worker, in a fresh process, served the next request
            assert second["workerId"] != first["workerId"]
            assert second["output"]["pid"] != first["output"]["pid"]
            view = c.http.get(f"/endpoints/{eid}").json()
            assert first["workerId"] not in [w["id"] for w in view["workers"]]
            assert view["spec"]["env"]["RUNPOD_SKIP_AUTO_SYSTEM_CHECKS"] == "true"
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")
