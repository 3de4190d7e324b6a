"""Endpoint workers run by a real node agent: a local-handler endpoint on a
control plane whose only capacity is an agent's host with fake GPUs. The worker is an ordinary assignment:
the handler runs in the agent's worker process with the GPUs the packer chose, requests go through the
RunPod-shaped /v2 path, a worker killed mid-request (or lost with its node) has its request retried exactly
once more, a stale worker's late result is fenced, and a handler that cannot be imported is a worker failure
with its message."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from scalar.runtime.endpoints.agent_workers import WORKER_TOKEN_ENV
from tests.agent.harness import Clock, Controller, agent, controller, kill_tree_of, wait_until

pytestmark = pytest.mark.slow  # real agents running endpoint workers, end to end

HANDLER = "tests.endpoints.gpu_handlers:square_on_gpu"


def endpoint_spec(name: str, handler: str = HANDLER) -> dict[str, Any]:
    return {
        "name": name,
        "handler": handler,
        "gpus": ["ADA_80_PRO"],  # the H100s of the agent's host
        "workersMin": 1,
        "workersMax": 1,
        "scalerType": "QUEUE_DELAY",
        "scalerValue": 1,
        "idleTimeout": 5,
        "executionTimeoutMs": 60_000,
    }


def deploy(c: Controller, spec: dict[str, Any]) -> str:
    created = c.http.post("/endpoints", params={"target": "local"}, json=spec)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def workers(c: Controller, eid: str) -> list[dict[str, Any]]:
    return list(c.http.get(f"/endpoints/{eid}").json()["workers"])


def status(c: Controller, eid: str, rid: str) -> dict[str, Any]:
    return dict(c.http.get(f"/v2/{eid}/status/{rid}").json())


def assigned_uuids(c: Controller, job_id: str) -> str:
    [registered] = c.agents()
    uuid_of = {g["index"]: g["uuid"] for g in registered["facts"]["gpus"]}
    [placement] = c.job(job_id)["placements"]
    return ",".join(uuid_of[i] for i in placement["gpu_indices"])


def worker_token(c: Controller, job_id: str) -> str:
    sealed = c.plane.job_service.get_document(job_id)["env"][WORKER_TOKEN_ENV]  # sealed at rest
    return c.plane.agents.secret_box().open(sealed)


def test_agent_runs_the_worker_with_its_gpus_and_retries_a_killed_request_once(
    sqlite_url: str, tmp_path: Path
) -> None:
    with controller(sqlite_url, tmp_path) as c:
        # deployed before any agent: its first worker waits as a reservation (no capacity at all here) ...
        eid = deploy(c, endpoint_spec("gpu-square"))
        [waiting] = wait_until(lambda: workers(c, eid), 30, "a worker")
        assert waiting["state"] == "pending" and c.job(waiting["job_id"])["command"] is None
        node = agent(c.url, c.token(), tmp_path / "a", "4xH100-80GB").start()
        try:
            # ... and is replaced by one on the agent's node once that has room
            [first] = wait_until(
                lambda: [w for w in workers(c, eid) if w["state"] == "idle"], 30, "a ready worker"
            )
            assert first["id"] != waiting["id"] and first["node_id"] == c.agents()[0]["node_id"]
            replaced = c.http.get(f"/endpoints/{eid}/logs").json()["lines"]
            assert any("replaced by a worker on a node agent" in line["message"] for line in replaced)
            job = c.job(first["job_id"])
            assert job["command"][-6:] == ["--endpoint", eid, "--worker", first["id"], "--handler", HANDLER]
            assert job["env"][WORKER_TOKEN_ENV] == "***"  # the credential is a secret of the job
            gpus = assigned_uuids(c, first["job_id"])
            assert gpus.startswith("GPU-") and len(gpus.split(",")) == 1

            # runsync: the handler's real output, computed in the agent's worker process on its GPU
            sync = c.http.post(f"/v2/{eid}/runsync", json={"input": {"x": 7}}, timeout=60).json()
            assert sync["status"] == "COMPLETED", sync
            assert sync["output"]["square"] == 49 and sync["workerId"] == first["id"]
            assert sync["output"]["cuda_visible_devices"] == gpus
            assert sync["output"]["cuda_device_order"] == "PCI_BUS_ID"
            worker_pid = sync["output"]["pid"]
            assert worker_pid != os.getpid()
            [child_pid] = [int(p.read_text()) for p in (tmp_path / "a").glob("assignments/*/child.pid")]
            assert worker_pid == child_pid  # the agent's assignment, not a controller subprocess

            # run + status
            rid = c.http.post(f"/v2/{eid}/run", json={"input": {"x": 12}}).json()["id"]
            done = wait_until(
                lambda: (s := status(c, eid, rid))["status"] == "COMPLETED" and s, 30, "the async request"
            )
            assert done["output"]["square"] == 144 and done["output"]["pid"] == worker_pid
            assert done["attempts"] == 1 and done["retries"] == 0

            # kill -9 the worker process mid-request: the request goes back to the queue, once
            marker = tmp_path / "hanging.pid"
            rid = c.http.post(f"/v2/{eid}/run", json={"input": {"x": 5, "hang_once": str(marker)}}).json()[
                "id"
            ]
            hung_pid = int(wait_until(lambda: marker.is_file() and marker.read_text(), 30, "the hang"))
            assert hung_pid == worker_pid
            assert status(c, eid, rid)["status"] == "IN_PROGRESS"
            os.kill(hung_pid, signal.SIGKILL)
            retried = wait_until(
                lambda: (s := status(c, eid, rid))["status"] == "COMPLETED" and s, 45, "the retried request"
            )
            assert retried["output"]["square"] == 25
            assert retried["attempts"] == 2 and retried["retries"] == 1  # retried exactly once more
            second = retried["workerId"]
            assert second != first["id"] and retried["output"]["pid"] != hung_pid
            [now] = [w for w in workers(c, eid) if w["id"] == second]
            assert retried["output"]["cuda_visible_devices"] == assigned_uuids(c, now["job_id"])
            lost = c.http.get(f"/endpoints/{eid}/logs").json()["lines"]
            assert any(f"worker {first['id']} (ADA_80_PRO): lost" in line["message"] for line in lost), lost
            assert c.job(first["job_id"])["state"] == "FAILED"

            # the lost worker's late result is fenced: ignored, the completed output stays
            stale = c.http.post(
                f"/agent/v1/endpoints/{eid}/workers/{first['id']}/result",
                json={
                    "token": worker_token(c, first["job_id"]),
                    "attempt": 1,
                    "request_id": rid,
                    "delivery": 1,
                    "output": {"square": -1},
                },
            ).json()
            assert stale["accepted"] is False and "fenced" in stale["reason"]
            assert status(c, eid, rid)["output"]["square"] == 25
            wrong = c.http.post(
                f"/agent/v1/endpoints/{eid}/workers/{second}/next",
                json={"token": "swt_wrong", "attempt": 1, "wait_s": 0},
            )
            assert wrong.status_code == 401, wrong.text
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def test_a_lost_node_requeues_its_request_and_the_stale_workers_late_answer_is_fenced(
    sqlite_url: str, tmp_path: Path
) -> None:
    clock = Clock()
    with controller(sqlite_url, tmp_path, clock) as c:
        nodes = {name: agent(c.url, c.token(), tmp_path / name, "1xH100-80GB").start() for name in ("a", "b")}
        try:
            wait_until(lambda: len(c.agents()) == 2, 30, "two agents")
            eid = deploy(c, endpoint_spec("lost-node"))
            [first] = wait_until(
                lambda: [w for w in workers(c, eid) if w["state"] == "idle"], 30, "a ready worker"
            )
            marker = tmp_path / "hanging.pid"
            body = {"input": {"x": 9, "hang_once": str(marker), "hang_s": 6}}
            rid = c.http.post(f"/v2/{eid}/run", json=body).json()["id"]
            stale_pid = int(wait_until(lambda: marker.is_file() and marker.read_text(), 30, "the hang"))
            [name] = [
                n for n in nodes if (tmp_path / n / "identity.json").read_text().count(first["node_id"])
            ]
            nodes[name].signal(signal.SIGSTOP)  # the node's link is cut; its worker process hangs on
            clock.advance(3.5)
            clock.advance(3.0)  # past lost_after_s (6 s): the node is LOST, its job goes back to the queue
            retried = wait_until(
                lambda: (s := status(c, eid, rid))["status"] == "COMPLETED" and s, 45, "the retried request"
            )
            assert retried["attempts"] == 2 and retried["retries"] == 1
            assert retried["workerId"] != first["id"] and retried["output"]["pid"] != stale_pid
            # the stale worker wakes up and answers: its result is fenced, the retry's output stays
            log = tmp_path / name / "assignments"
            wait_until(
                lambda: any("not taken" in p.read_text() for p in log.glob("*/output.log")),
                30,
                "the late answer",
            )
            after = status(c, eid, rid)
            assert after["output"] == retried["output"] and after["workerId"] == retried["workerId"]
            nodes[name].signal(signal.SIGCONT)
        finally:
            for name, process in nodes.items():
                process.stop()
                kill_tree_of(tmp_path / name)


def test_a_handler_that_cannot_be_imported_is_a_worker_failure(sqlite_url: str, tmp_path: Path) -> None:
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "registration")
            eid = deploy(c, endpoint_spec("broken", "tests.endpoints.no_such_module:handler"))
            rid = c.http.post(f"/v2/{eid}/run", json={"input": {"x": 1}}).json()["id"]
            failed = wait_until(
                lambda: (s := status(c, eid, rid))["status"] == "FAILED" and s, 30, "the request's failure"
            )
            assert "the handler could not be loaded: ModuleNotFoundError" in failed["error"], failed
            logs = c.http.get(f"/endpoints/{eid}/logs").json()["lines"]
            assert any(
                "lost: the handler could not be loaded: ModuleNotFoundError" in line["message"]
                for line in logs
            ), logs
            assert any(line["code"] == "worker_failed" for line in logs), logs
            start_error = c.http.get(f"/endpoints/{eid}").json()["start_error"]
            assert (
                "ModuleNotFoundError" in start_error["error"]
                and start_error["retry_after"] > start_error["at"]
            )
            # no crash loop: no other worker is started within the back-off (30 s), though workersMin is 1
            time.sleep(2)
            lines = c.http.get(f"/endpoints/{eid}/logs").json()["lines"]
            assert len([line for line in lines if line["kind"] == "worker"]) == 1, lines
            assert [w for w in workers(c, eid) if w["state"] != "lost"] == []
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def test_a_worker_whose_process_ends_before_it_is_ready_is_backed_off_and_says_why(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A worker file that exits while it is imported (as one calling ``runpod.serverless.start()`` at top
    level would, used as a handler): the worker is lost before it asked for a request, a start failure:
    backed off (no crash loop) and shown as the endpoint's ``start_error``; its request stays queued."""
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "registration")
            eid = deploy(c, endpoint_spec("exits", "tests.endpoints.exits_on_import:handler"))
            rid = c.http.post(f"/v2/{eid}/run", json={"input": {"x": 1}}).json()["id"]
            view = wait_until(
                lambda: (v := c.http.get(f"/endpoints/{eid}").json())["start_error"] and v,
                30,
                "a start error",
            )
            assert "failed to start" in view["start_error"]["message"], view["start_error"]
            time.sleep(2)
            lines = c.http.get(f"/endpoints/{eid}/logs").json()["lines"]
            assert len([line for line in lines if line["kind"] == "worker"]) == 1, lines
            assert status(c, eid, rid)["status"] == "IN_QUEUE"
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")
