"""An endpoint spec's ``env`` (over ``template.env``) reaches a handler endpoint's workers, and nothing of
the control plane's or the agent's own environment does: in a handler process the control plane starts,
and in a worker a node agent runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import runpod

from tests.agent.harness import agent, controller, kill_tree_of, wait_until
from tests.endpoints.harness import driving_in_background
from tests.endpoints.runpod_sdk import runpod_side

HANDLER = "tests.endpoints.runpod_handlers:env_seen"
NAMES = ["GREETING", "MODEL", "SCALAR_TEST_HOST_ONLY", "RUNPOD_SKIP_AUTO_SYSTEM_CHECKS"]
DECLARED = {
    "template": {
        "env": [{"key": "MODEL", "value": "small"}, {"key": "GREETING", "value": "from the template"}]
    },
    "env": {"GREETING": "hello", "RUNPOD_SKIP_AUTO_SYSTEM_CHECKS": "true"},  # env overrides template.env
}
SEEN = {
    "GREETING": "hello",
    "MODEL": "small",
    "SCALAR_TEST_HOST_ONLY": None,
    "RUNPOD_SKIP_AUTO_SYSTEM_CHECKS": "true",
}


def test_a_handler_process_of_the_control_plane_sees_the_declared_env_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALAR_TEST_HOST_ONLY", "the control plane's own")
    db_url = f"sqlite:///{tmp_path / 'rp.db'}"
    with runpod_side(db_url, tmp_path, monkeypatch) as side:
        eid = side.handler_endpoint("env-local", "env_seen", workersMax=1, **DECLARED)
        with side.client() as client:
            spec = client.get(f"/endpoints/{eid}").json()["spec"]
        assert spec["env"] == {
            "MODEL": "small",
            "GREETING": "hello",
            "RUNPOD_SKIP_AUTO_SYSTEM_CHECKS": "true",
        }
        side.wait_ready(eid)
        with driving_in_background(side.cp, side.clock):
            seen = runpod.Endpoint(eid).run_sync({"input": {"names": NAMES}}, timeout=60)
        assert seen == SEEN
        # a process on the control plane's host (not sandboxed) takes no loader or interpreter variables
        steer = {"LD_PRELOAD": "/tmp/evil.so", "PYTHONINSPECT": "1", "PATH": "/tmp/evil"}
        eid = side.handler_endpoint("env-steer", "env_seen", workersMax=1, env={**DECLARED["env"], **steer})
        side.wait_ready(eid)
        with driving_in_background(side.cp, side.clock):
            seen = runpod.Endpoint(eid).run_sync({"input": {"names": [*NAMES, *steer]}}, timeout=60)
        assert seen["LD_PRELOAD"] is None and seen["PYTHONINSPECT"] is None and seen["PATH"] != "/tmp/evil"
        assert seen["GREETING"] == "hello"


def test_a_handler_worker_on_an_agent_sees_the_declared_env_only(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALAR_TEST_HOST_ONLY", "the agent's own")  # the agent inherits this process's env
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "registration")
            spec = {
                "name": "env-agent",
                "handler": HANDLER,
                "gpus": ["ADA_80_PRO"],
                "workersMin": 1,
                "workersMax": 1,
                **DECLARED,
            }
            created = c.http.post("/endpoints", params={"target": "local"}, json=spec)
            assert created.status_code == 201, created.text
            eid = created.json()["id"]
            sync = c.http.post(f"/v2/{eid}/runsync", json={"input": {"names": NAMES}}, timeout=90).json()
            assert sync["status"] == "COMPLETED", sync
            assert sync["output"] == SEEN
            [worker] = c.http.get(f"/endpoints/{eid}").json()["workers"]
            assert c.job(worker["job_id"])["command"]  # it ran as the agent's assignment
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")
