"""The real ``runpod`` client SDK (1.12.0), sync and async, against Scalar's ``/v2`` with a tenant token:
run_sync, run, status, output, stream, cancel, health, purge_queue; RunPod's handler semantics (async,
generator and async-generator handlers, ``return_aggregate_stream``, ``{"error": ...}`` returns,
``refresh_worker``); ``policy`` and ``ttl``; error bodies a client cannot mistake for a job status."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import runpod
from runpod.endpoint import AsyncioEndpoint, AsyncioJob

from scalar.store import endpoints as repo
from tests.endpoints.harness import drive_until, driving_in_background
from tests.endpoints.runpod_sdk import runpod_side, wait_real
from tests.providers.fakeserver import FakeServer, Reply


def test_the_sync_client_runs_streams_cancels_and_purges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = f"sqlite:///{tmp_path / 'rp.db'}"
    with runpod_side(db_url, tmp_path, monkeypatch) as side:
        plain = side.handler_endpoint("plain", "plain", workersMax=1)
        gen = side.handler_endpoint("gen", "count", handlerConfig={"return_aggregate_stream": True})
        agen = side.handler_endpoint("agen", "async_count")
        side.wait_ready(plain, gen, agen)
        ep = runpod.Endpoint(plain)
        with driving_in_background(side.cp, side.clock):
            # run_sync: the handler's output, computed in the worker's own process
            out = ep.run_sync({"input": {"mode": "echo", "x": 7}}, timeout=60)
            assert out["echo"] == {"mode": "echo", "x": 7} and out["request_id"].startswith("req-")

            # run / status / output
            job = ep.run({"input": {"mode": "echo", "x": 8}})
            assert job.status() in ("IN_QUEUE", "IN_PROGRESS", "COMPLETED")
            assert job.output(timeout=60)["echo"]["x"] == 8
            assert job.status() == "COMPLETED"

            # RunPod's error return: FAILED with the handler's error
            failed = ep.run({"input": {"mode": "error", "value": 3}})
            failed.output(timeout=60)
            assert failed.status() == "FAILED"
            with side.client() as client:
                body = client.get(f"/v2/{plain}/status/{failed.job_id}").json()
            assert body["status"] == "FAILED" and body["error"] == "bad input 3"

            # a raised exception: FAILED with RunPod's JSON error (type, message, traceback)
            raised = ep.run({"input": {"mode": "raise"}})
            raised.output(timeout=60)
            with side.client() as client:
                error = json.loads(client.get(f"/v2/{plain}/status/{raised.job_id}").json()["error"])
            assert error["error_message"] == "x must be >= 0" and "ValueError" in error["error_type"]
            assert "Traceback" in error["error_traceback"]

            # cancel a request in progress, purge the ones queued behind it (one worker)
            slow = ep.run({"input": {"mode": "sleep", "s": 30}})
            drive_until_status(side, plain, slow.job_id, "IN_PROGRESS")
            queued = [ep.run({"input": {"mode": "echo", "k": k}}) for k in range(3)]
            health = ep.health()
            assert health["jobs"]["inQueue"] == 3 and health["jobs"]["inProgress"] == 1
            assert health["workers"]["running"] == 1
            assert ep.purge_queue() == {"removed": 3, "status": "completed"}
            assert all(q.status() == "CANCELLED" for q in queued)
            assert slow.cancel()["status"] == "CANCELLED"
            assert ep.health()["jobs"]["inQueue"] == 0

            # a generator handler: each chunk streamed exactly once, in order; aggregated as the output
            streamed = runpod.Endpoint(gen).run({"input": {"n": 5, "pause": 0.3}})
            assert list(streamed.stream()) == [{"n": i} for i in range(5)]
            assert streamed.output(timeout=30) == [{"n": i} for i in range(5)]
            # an async generator without return_aggregate_stream: streamed; the output is empty
            tokens = runpod.Endpoint(agen).run({"input": {"n": 4, "pause": 0.2}})
            assert list(tokens.stream()) == [f"token-{i}" for i in range(4)]
            assert tokens.output(timeout=30) == []
            # a yielded {"error": ...} ends the stream FAILED
            broken = runpod.Endpoint(gen).run({"input": {"n": 5, "fail_at": 2}})
            assert list(broken.stream()) == [{"n": 0}, {"n": 1}]
            assert broken.status() == "FAILED"


def drive_until_status(side: Any, endpoint_id: str, request_id: str, status: str) -> None:
    import time

    with side.client() as client:
        for _ in range(600):
            if client.get(f"/v2/{endpoint_id}/status/{request_id}").json()["status"] == status:
                return
            time.sleep(0.05)
    raise AssertionError(f"{request_id} never reached {status}")


def test_the_async_client_runs_streams_cancels_purges_and_fails_fast_on_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = f"sqlite:///{tmp_path / 'rp.db'}"
    with runpod_side(db_url, tmp_path, monkeypatch) as side:
        aplain = side.handler_endpoint("aplain", "async_plain", workersMax=1)
        gen = side.handler_endpoint("gen", "count")
        slow = side.handler_endpoint("slow", "plain", workersMax=1)
        side.wait_ready(aplain, gen, slow)

        async def scenario() -> dict[str, Any]:
            seen: dict[str, Any] = {}
            async with aiohttp.ClientSession() as session:
                ep = AsyncioEndpoint(aplain, session)
                job = await ep.run({"x": 2})
                assert await job.status() in ("IN_QUEUE", "IN_PROGRESS", "COMPLETED")
                seen["output"] = await job.output(timeout=60)
                seen["health"] = await ep.health()
                stream_job = await AsyncioEndpoint(gen, session).run({"n": 3, "pause": 0.2})
                seen["stream"] = [chunk async for chunk in stream_job.stream()]
                slow_ep = AsyncioEndpoint(slow, session)
                running = await slow_ep.run({"mode": "sleep", "s": 30})
                while await running.status() != "IN_PROGRESS":
                    await asyncio.sleep(0.05)
                await slow_ep.run({"mode": "echo"})
                seen["purge"] = await slow_ep.purge_queue()
                seen["cancel"] = await running.cancel()
                # a missing request: the error body has no job-like status, so stream() ends at once
                missing = AsyncioJob(slow, "req-nope", session, dict(ep.headers))
                try:
                    await asyncio.wait_for(_drain(missing), timeout=15)
                except KeyError as exc:
                    seen["missing"] = str(exc)
                # a missing endpoint's purge answers 404 (not a success)
                async with session.post(
                    f"{runpod.endpoint_url_base}/ep-nope/purge-queue", headers=ep.headers
                ) as resp:
                    seen["purge_missing"] = (resp.status, await resp.json())
            return seen

        with driving_in_background(side.cp, side.clock):
            seen = asyncio.run(scenario())
        assert seen["output"] == {"async_echo": {"x": 2}}
        assert seen["health"]["workers"]["ready"] >= 1 and seen["health"]["jobs"]["completed"] >= 1
        assert seen["stream"] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert seen["purge"] == {"removed": 1, "status": "completed"}
        assert seen["cancel"]["status"] == "CANCELLED"
        assert seen["missing"] == "'status'"
        status, body = seen["purge_missing"]
        assert status == 404 and "status" not in body and "ep-nope" in body["error"]


async def _drain(job: AsyncioJob) -> list[Any]:
    return [chunk async for chunk in job.stream()]


def test_refresh_worker_restarts_the_worker_process_after_the_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = f"sqlite:///{tmp_path / 'rp.db'}"
    with runpod_side(db_url, tmp_path, monkeypatch) as side:
        eid = side.handler_endpoint("fresh", "plain", workersMax=1, handlerConfig={"refresh_worker": True})
        side.wait_ready(eid)
        ep = runpod.Endpoint(eid)
        with driving_in_background(side.cp, side.clock):
            pids = [ep.run_sync({"input": {"mode": "echo", "i": i}}, timeout=60)["pid"] for i in range(3)]
        assert len(set(pids)) == 3, pids  # a fresh process for every request


def test_policy_execution_timeout_and_ttl_are_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = f"sqlite:///{tmp_path / 'rp.db'}"
    with runpod_side(db_url, tmp_path, monkeypatch) as side:
        eid = side.handler_endpoint("policy", "plain", workersMax=1)
        with side.client() as client:
            # queued with a short ttl while no worker is ready yet: it expires in the queue
            expired = client.post(f"/v2/{eid}/run", json={"input": {"mode": "echo"}, "policy": {"ttl": 1000}})
            side.wait_ready(eid)
            drive_until(side.cp, side.clock, lambda: _status(client, eid, expired.json()["id"]) != "IN_QUEUE")
            ttl_body = client.get(f"/v2/{eid}/status/{expired.json()['id']}").json()
            assert ttl_body["status"] == "TIMED_OUT" and "policy.ttl" in ttl_body["error"]
            # the request's own execution timeout replaces the endpoint's (600 s by default)
            slow = client.post(
                f"/v2/{eid}/run",
                json={"input": {"mode": "sleep", "s": 60}, "policy": {"executionTimeout": 3000}},
            ).json()["id"]
            drive_until(side.cp, side.clock, lambda: _status(client, eid, slow) == "TIMED_OUT", max_s=60)
            body = client.get(f"/v2/{eid}/status/{slow}").json()
            assert "policy.executionTimeout 3000" in body["error"] and 3000 <= body["executionTime"] <= 6000
            # bad policies are refused naming the field
            bad = client.post(f"/v2/{eid}/run", json={"input": {}, "policy": {"ttl": 0}})
            assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "policy.ttl"
            assert "status" not in bad.json()


def _status(client: Any, eid: str, rid: str) -> str:
    return str(client.get(f"/v2/{eid}/status/{rid}").json()["status"])


def test_a_request_that_crashes_its_worker_is_retried_within_the_limit_then_fails_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = f"sqlite:///{tmp_path / 'rp.db'}"
    with runpod_side(db_url, tmp_path, monkeypatch, endpoint_max_request_retries=1) as side:
        eid = side.handler_endpoint("crashy", "plain", workersMax=1)
        side.wait_ready(eid)
        with side.client() as client:
            rid = client.post(f"/v2/{eid}/run", json={"input": {"mode": "crash"}}).json()["id"]
            with driving_in_background(side.cp, side.clock):
                wait_real(lambda: _status(client, eid, rid) == "FAILED", 60, "the crashing request's failure")
                body = client.get(f"/v2/{eid}/status/{rid}").json()
                assert body["attempts"] == 2 and body["retries"] == 1, body
                assert "died during attempt 2" in body["error"] and "max_request_retries = 1" in body["error"]
                # the worker serves the next request with a fresh process
                ok = client.post(f"/v2/{eid}/run", json={"input": {"mode": "echo"}}).json()["id"]
                wait_real(lambda: _status(client, eid, ok) == "COMPLETED", 60, "the next request")


def test_webhooks_get_the_final_status_retried_with_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = f"sqlite:///{tmp_path / 'rp.db'}"
    with (
        FakeServer() as hook,
        runpod_side(db_url, tmp_path, monkeypatch, endpoint_webhook_allow_private=True) as side,
    ):
        hook.route("POST", "/hook", [Reply.json({}, 503), Reply.json({}, 500), Reply.json({"ok": True})])
        eid = side.handler_endpoint("hooked", "plain", workersMax=1)
        side.wait_ready(eid)
        with side.client() as client:
            rid = client.post(
                f"/v2/{eid}/run",
                json={"input": {"mode": "echo", "x": 1}, "webhook": f"{hook.url}/hook?token=t"},
            ).json()["id"]
            with driving_in_background(side.cp, side.clock):
                wait_real(lambda: len(hook.requests) >= 3, 60, "three webhook deliveries")
                wait_real(lambda: _webhook_state(side, rid) == "delivered", 30, "the delivery recorded")
        posted = [r for r in hook.requests if r.path == "/hook"]
        assert len(posted) == 3 and posted[-1].param("token") == "t"
        final = posted[-1].json()
        assert (
            final["id"] == rid
            and final["status"] == "COMPLETED"
            and final["output"]["echo"] == {"mode": "echo", "x": 1}
        )
        with side.cp.endpoints.store.read() as tx:
            stored = repo.get_request(tx.conn, rid)
        assert stored is not None and stored["webhook_attempts"] == 3


def _webhook_state(side: Any, rid: str) -> str | None:
    with side.cp.endpoints.store.read() as tx:
        row = repo.get_request(tx.conn, rid)
    return None if row is None else row["webhook_status"]


def test_a_webhook_to_a_private_address_is_refused_unless_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = f"sqlite:///{tmp_path / 'rp.db'}"
    with runpod_side(db_url, tmp_path, monkeypatch) as side:
        eid = side.handler_endpoint("nohook", "plain", workersMax=1)
        with side.client() as client:
            for url in (
                "http://127.0.0.1:9/hook",
                "http://localhost/x",
                "http://10.1.2.3/x",
                "http://[::1]/x",
            ):
                refused = client.post(f"/v2/{eid}/run", json={"input": {}, "webhook": url})
                assert refused.status_code == 422, refused.text
                error = refused.json()["errors"][0]
                assert error["field"] == "webhook" and "webhook_allow_private" in error["problem"]


def test_an_unchanged_client_moves_by_its_environment_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/endpoints.md, "Coming from RunPod", step 3: only RUNPOD_ENDPOINT_BASE_URL and the key change."""
    import subprocess
    import sys

    db_url = f"sqlite:///{tmp_path / 'rp.db'}"
    with runpod_side(db_url, tmp_path, monkeypatch) as side:
        eid = side.handler_endpoint("moved", "plain", workersMax=1)
        side.wait_ready(eid)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),  # no ~/.runpod credentials file: the key comes from the environment
            "RUNPOD_API_KEY": side.token,
            "RUNPOD_ENDPOINT_BASE_URL": f"{side.url}/v2",
        }
        client = Path(__file__).parent / "runpod_workers" / "client.py"
        with driving_in_background(side.cp, side.clock):
            done = subprocess.run(
                [sys.executable, str(client), eid], env=env, capture_output=True, text=True, timeout=180
            )
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        assert answer["run_sync"]["echo"] == {"mode": "echo", "x": 5}
        assert answer["output"]["echo"]["x"] == 6 and answer["status"] == "COMPLETED"
