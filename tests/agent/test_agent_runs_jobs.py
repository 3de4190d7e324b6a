"""Real ``scalar agent`` processes against a control plane on loopback: registration, version refusal, jobs
with the right GPUs, logs that outlive the agent, OOM, cancellation."""

from __future__ import annotations

import os
import shutil
import signal
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from scalar.agent.facts import fake_gpu_list, parse_fake_gpus
from tests.agent.harness import agent, controller, kill_tree_of, wait_until

pytestmark = pytest.mark.slow  # real agents running jobs, end to end

PRINT_GPUS = (
    "import os, time; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['CUDA_DEVICE_ORDER'], "
    "os.environ.get('GREETING'), os.environ.get('SCALAR_GPU_MODEL'), flush=True); "
    "time.sleep(float(os.environ.get('HOLD', '0')))"
)


def finished(c: Any, job_id: str) -> dict[str, Any] | None:
    job = c.job(job_id)
    return job if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") else None


def test_registration_refuses_an_incompatible_agent_and_a_spent_token(
    sqlite_url: str, tmp_path: Path
) -> None:
    with controller(sqlite_url, tmp_path) as c:
        token = c.token()
        old = agent(
            c.url, token, tmp_path / "old", "2xH100-80GB", "--agent-protocol", "0", "--agent-version", "0.0.1"
        ).start()
        assert old.proc is not None and old.proc.wait(60) == 3
        assert "run scalar agent version 0.1.0 (protocol 1)" in old.output()
        good = agent(c.url, token, tmp_path / "good", "2xH100-80GB").start()  # the refusal did not spend it
        try:
            [registered] = wait_until(c.agents, 30, "registration")
            uuids = [g["uuid"] for g in registered["facts"]["gpus"]]
            expected = fake_gpu_list(parse_fake_gpus("2xH100-80GB"), str((tmp_path / "good").resolve()))
            assert uuids == [g["uuid"] for g in expected]  # stable fake UUIDs
            assert registered["provider"] == "local" and registered["facts"]["fake_gpus"] is True
            node_id = registered["node_id"]
            assert "host_registered" in wait_until(lambda: c.story_codes(node_id), 10, "the node's story")
            again = agent(c.url, token, tmp_path / "again", "2xH100-80GB").start()
            assert again.proc is not None and again.proc.wait(60) == 3
            assert "already used" in again.output()
        finally:
            good.stop()


def test_jobs_get_their_own_gpus_env_and_logs_that_outlive_the_agent(sqlite_url: str, tmp_path: Path) -> None:
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "4xH100-80GB").start()
        try:
            [registered] = wait_until(c.agents, 30, "registration")
            uuid_of = {g["index"]: g["uuid"] for g in registered["facts"]["gpus"]}
            # a secret value: sealed at rest and shown as *** by the API, opened only in the agent's copy
            env = {"GREETING": {"value": "hello", "secret": True}, "HOLD": "3"}
            jobs = {
                c.submit(gpu_count=n, command=["python", "-c", PRINT_GPUS], env=env): n for n in (1, 1, 2, 1)
            }
            ids = list(jobs)
            assert c.job(ids[0])["env"]["GREETING"] == "***"
            running = wait_until(
                lambda: (
                    [j for j in map(c.job, ids[:3]) if j["state"] == "RUNNING"]
                    if all(c.job(i)["state"] == "RUNNING" for i in ids[:3])
                    else None
                ),
                40,
                "three jobs running",
            )
            chosen = {j["id"]: [uuid_of[i] for i in j["placements"][0]["gpu_indices"]] for j in running}
            assert c.job(ids[3])["state"] == "PENDING"  # the 4 GPUs are taken: the 4th job waits
            for job_id in ids:
                job = wait_until(partial(c.ended, job_id), 60, f"{job_id} to finish")
                assert job["state"] == "SUCCEEDED", job["reason"]
            printed = {}
            for job_id in ids:
                logs = wait_until(partial(c.output, job_id), 20, "logs")
                devices, order, greeting, model = logs.split()
                assert order == "PCI_BUS_ID" and greeting == "hello"
                assert model == "H100"  # $SCALAR_GPU_MODEL: the model of the GPUs it got
                printed[job_id] = devices.split(",")
                assert len(printed[job_id]) == jobs[job_id]
            for job_id, uuids in chosen.items():
                assert printed[job_id] == uuids  # exactly the GPUs the packer chose
            together = [u for job_id in ids[:3] for u in printed[job_id]]
            assert sorted(together) == sorted(uuid_of.values())  # no GPU given to two running jobs
        finally:
            node.stop()
        shutil.rmtree(tmp_path / "a")  # the node and its files are gone: the logs are not
        assert c.logs(ids[0])["data"].startswith(",".join(printed[ids[0]]))
        assert c.logs(ids[0], offset=5)["data"] == c.logs(ids[0])["data"][5:]


@pytest.mark.parametrize("cgroups", [True, False], ids=["cgroup", "watch"])
def test_a_job_over_its_memory_limit_is_reported_as_oom(
    sqlite_url: str, tmp_path: Path, cgroups: bool
) -> None:
    hog = "import time\nb = []\nfor i in range(60):\n    b.append(bytearray(8 << 20)); time.sleep(0.02)\n"
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "1xH100-80GB")
        node.env = {"SCALAR_AGENT_NO_CGROUPS": "" if cgroups else "1"}
        node.start()
        try:
            job_id = c.submit(gpu_count=1, ram_gb=0.1, command=["python", "-c", hog])
            job = wait_until(lambda: finished(c, job_id), 60, "the memory hog to end")
            assert job["state"] == "FAILED"
            assert "OOM" in job["reason"], job["reason"]
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def test_cancel_stops_the_process_group(sqlite_url: str, tmp_path: Path) -> None:
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "1xH100-80GB").start()
        try:
            job_id = c.submit(command=["sh", "-c", "sleep 120 & sleep 120"])
            wait_until(lambda: c.job(job_id)["state"] == "RUNNING", 40, "the job to run")
            pid_file = wait_until(
                lambda: next((tmp_path / "a").glob("assignments/*/child.pid"), None), 20, "pid"
            )
            pgid = int(pid_file.read_text())
            assert c.http.delete(f"/jobs/{job_id}").status_code == 202
            wait_until(lambda: c.job(job_id)["state"] == "CANCELLED", 20, "cancelled")

            def group_gone() -> bool:
                try:
                    os.killpg(pgid, 0)
                except ProcessLookupError:
                    return True
                return False

            wait_until(group_gone, 20, "the job's process group to be stopped")
            exit_file = pid_file.parent / "exit.json"
            wait_until(exit_file.is_file, 10, "exit.json")
            assert f'"signal": {int(signal.SIGTERM)}' in exit_file.read_text()
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")
