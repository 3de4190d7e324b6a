"""Bring your own nodes, priced and removed: real ``scalar agent`` processes against a control
plane on loopback. A join token's ``price_per_gpu_hour`` becomes the host's block price (``/blocks``, and
``/costs`` accrues at it); ``POST /agents/{node}/remove`` (``scalar node remove``) drains the host, lets its
job finish or (``force``) requeues it as when the node is lost, then ends its block and refuses its agent's
token, and the agent exits 0. Admin only; a bought node is 409, an unknown one 404."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from scalar.engine.config import ControllerConfig
from tests.agent.harness import AGENT_SETTINGS, agent, controller, kill_tree_of, serve_on, wait_until
from tests.agent.test_ssh_node_add import Sshd, add, sshd, stop_agent

pytestmark = pytest.mark.slow  # real agents on hosts added over SSH, end to end

__all__ = ["sshd"]  # the fixture: a real OpenSSH server on loopback (tests/agent/test_ssh_node_add.py)

ATTEMPT_JOB = (
    "import os, time; a = os.environ['SCALAR_ATTEMPT']; print('attempt', a, 'starts', flush=True); "
    "time.sleep(float(os.environ['HOLD']) if a == '1' else 0); print('attempt', a, 'done', flush=True)"
)


def block_of(c: Any, node_id: str) -> dict[str, Any]:
    [block] = [b for b in c.http.get("/blocks").json()["blocks"] if b["block_id"] == f"byo-{node_id}"]
    return dict(block)


def local_costs(c: Any) -> dict[str, Any]:
    [row] = [p for p in c.http.get("/costs").json()["by_provider"] if p["provider"] == "local"]
    return dict(row)


def identity(state_dir: Path) -> dict[str, Any]:
    return dict(json.loads((state_dir / "identity.json").read_text()))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.is_file() and stat.read_text().split(")")[-1].split()[0] != "Z"


def scalar_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALAR_")}
    return subprocess.run(
        [sys.executable, "-m", "scalar.cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_priced_host_costs_its_price_and_removing_it_lets_its_job_finish(
    sqlite_url: str, tmp_path: Path
) -> None:
    with controller(sqlite_url, tmp_path / "data") as c:
        response = c.http.post("/agents/join-tokens", json={"price_per_gpu_hour": "2.50"})
        assert response.status_code == 201, response.text
        assert Decimal(response.json()["price_per_gpu_hour"]) == Decimal("2.50")
        node = agent(c.url, response.json()["token"], tmp_path / "a", "2xH100-80GB").start()
        try:
            [registered] = wait_until(c.agents, 30, "registration")
            node_id = registered["node_id"]
            block = wait_until(
                lambda: block_of(c, node_id) if c.http.get("/blocks").json()["blocks"] else None
            )
            assert Decimal(str(block["price_per_gpu_hour"])) == Decimal("2.5") and block["status"] == "open"
            # /costs accrues at 2.50 $/GPU-h for both GPUs (each figure is rounded to micro-dollars)
            row = wait_until(
                lambda: (
                    r if Decimal(str((r := local_costs(c))["paid_gpu_hours"])) > Decimal("0.002") else None
                )
            )
            paid, accrued = Decimal(str(row["paid_gpu_hours"])), Decimal(str(row["accrued"]))
            assert abs(accrued - Decimal("2.5") * paid) <= Decimal("0.00001"), row

            job_id = c.submit(command=["python", "-c", ATTEMPT_JOB], env={"HOLD": "3"})
            wait_until(lambda: "attempt 1 starts" in c.logs(job_id)["data"], 90, "the job to start")
            removed = scalar_cli("node", "remove", node_id, "--wait-s", "60", "--server", c.url, cwd=tmp_path)
            assert removed.returncode == 0, removed.stderr
            assert f"node {node_id} removed" in removed.stdout
            # the job that ran finished there; nothing new was placed on the draining host
            job = c.job(job_id)
            assert job["state"] == "SUCCEEDED", job.get("reason")
            assert "attempt 1 done" in c.logs(job_id)["data"]
            assert node.proc is not None and node.proc.wait(30) == 0
            assert "this node was removed" in node.output()
            block = block_of(c, node_id)
            assert block["status"] == "released"
            spent = local_costs(c)["accrued"]
            time.sleep(0.6)  # a few ticks later: no further cost
            assert local_costs(c)["accrued"] == spent
            [gone] = c.agents()
            assert gone["lease_state"] == "removed"
            me = identity(tmp_path / "a")  # the agent's token is refused from now on
            beat = {
                "node_id": node_id,
                "node_token": me["node_token"],
                "seq": me["seq"] + 1,
                "assignments": [],
            }
            refused = c.http.post("/agent/v1/heartbeat", json=beat)
            assert refused.status_code == 410 and "removed" in refused.json()["detail"]
            later = c.submit(command=["true"])
            time.sleep(1.0)
            assert c.job(later)["state"] == "PENDING"
            actions = [(e["action"], e["entity_id"]) for e in c.http.get("/audit").json()["entries"]]
            assert ("node.remove", node_id) in actions and ("node.removed", node_id) in actions
            codes = c.story_codes(node_id)
            assert "host_removal" in codes
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def test_removing_a_host_with_force_requeues_its_job_and_stops_the_process(
    sqlite_url: str, tmp_path: Path
) -> None:
    with controller(sqlite_url, tmp_path / "data") as c:
        first = agent(c.url, c.token(), tmp_path / "a", "1xH100-80GB").start()
        second = None
        try:
            [registered] = wait_until(c.agents, 30, "registration")
            node_id = registered["node_id"]
            job_id = c.submit(command=["python", "-c", ATTEMPT_JOB], env={"HOLD": "120"})
            wait_until(lambda: "attempt 1 starts" in c.logs(job_id)["data"], 90, "attempt 1 to start")
            [child_pid_file] = (tmp_path / "a").glob("assignments/*/child.pid")
            child = int(child_pid_file.read_text())
            assert alive(child)
            response = c.http.post(f"/agents/{node_id}/remove", json={"force": True})
            assert response.status_code == 202, response.text
            assert response.json()["state"] == "removing" and response.json()["jobs"] == [job_id]
            # requeued as when the node is lost: attempt 2 waits (no other host), attempt 1 is stopped
            job = wait_until(lambda: j if (j := c.job(job_id))["state"] == "PENDING" else None, 20, "requeue")
            assert job["preemptions"] == 1
            assert first.proc is not None and first.proc.wait(90) == 0
            wait_until(lambda: not alive(child), 10, "attempt 1's process to be gone")
            assert block_of(c, node_id)["status"] == "released"
            assert "node_lost" in c.story_codes(job_id)
            # asking again is harmless: the host is removed
            again = c.http.post(f"/agents/{node_id}/remove", json={})
            assert again.status_code == 202 and again.json()["state"] == "removed"
            # another host takes attempt 2
            second = agent(c.url, c.token(), tmp_path / "b", "1xH100-80GB").start()
            done = wait_until(
                lambda: j if (j := c.job(job_id))["state"] in ("SUCCEEDED", "FAILED") else None,
                40,
                "attempt 2",
            )
            assert done["state"] == "SUCCEEDED", done.get("reason")
            assert c.logs(job_id)["attempt"] == 2 and "attempt 2 done" in c.logs(job_id)["data"]
            assert "attempt 1 done" not in c.logs(job_id, attempt=1)["data"]
        finally:
            first.stop()
            if second is not None:
                second.stop()
            kill_tree_of(tmp_path / "a")
            kill_tree_of(tmp_path / "b")


def test_only_admins_remove_and_only_hosts_of_their_own(sqlite_url: str, tmp_path: Path) -> None:
    """403 for a user token, 404 for an unknown node, 409 for a node Scalar bought; bad prices are 422."""
    from scalar.api.app import create_app
    from scalar.runtime import ControlPlane, load_settings
    from tests.agent.harness import Clock, free_port

    settings = load_settings(
        None,
        {
            **AGENT_SETTINGS,
            "auth_required": True,
            "data_dir": tmp_path / "data",
            "database_url": sqlite_url,
            "time_scale": 600.0,
            "market_seed": 7,
            "enabled": ("sfcompute",),
            # The book moves every 6 s at 600x: an order placed on a book seen a moment too early can be
            # refused, and the default 300 s backoff would outlast the wait for a bought node below.
            "controller": ControllerConfig(reservation_s=0.0, backoff_s=2.0),
        },
        {},
    )
    plane = ControlPlane(settings, clock=Clock(), live_providers=[])
    plane.start()
    try:
        admin = plane.create_token("default", "admin").token
        user = plane.create_token("default", "user").token
        with serve_on(create_app(plane), free_port()) as url:
            as_admin = httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {admin}"})
            as_user = httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {user}"})
            with as_admin, as_user:
                body = {"tier": "FAST", "gpu_count": 8, "expected_duration_sec": 600}
                assert as_admin.post("/jobs", json=body).status_code == 201  # a reservation: Scalar buys
                bought = wait_until(lambda: as_admin.get("/nodes").json()["nodes"], 120, "a bought node")[0][
                    "node_id"
                ]
                forbidden = as_user.post(f"/agents/{bought}/remove", json={})
                assert forbidden.status_code == 403
                refused = as_admin.post(f"/agents/{bought}/remove", json={"force": True})
                assert refused.status_code == 409, refused.text
                problem = refused.json()
                assert refused.headers["content-type"].startswith("application/problem+json")
                assert "release the block" in problem["errors"][0]["fix"]
                assert "Scalar bought" in problem["detail"]
                missing = as_admin.post("/agents/node-nope/remove", json={})
                assert missing.status_code == 404 and missing.json()["errors"][0]["field"] == "node_id"
                for price in ("1000.01", "-1", "NaN", "Infinity", "abc"):
                    bad = as_admin.post("/agents/join-tokens", json={"price_per_gpu_hour": price})
                    assert bad.status_code == 422, (price, bad.text)
                both = as_admin.post(
                    "/agents/join-tokens", json={"price_per_gpu_hour": "1", "node_id": bought}
                )
                assert both.status_code == 422 and "price_per_gpu_hour" in both.text
                ok = as_admin.post("/agents/join-tokens", json={"price_per_gpu_hour": 1000})
                assert ok.status_code == 201 and Decimal(ok.json()["price_per_gpu_hour"]) == 1000
                assert as_user.post("/agents/join-tokens", json={}).status_code == 403
    finally:
        plane.stop()
    cli = scalar_cli(
        "join-token", "--price-per-gpu-hour", "2000", "--server", "http://127.0.0.1:9", cwd=tmp_path
    )
    assert cli.returncode == 2 and "--price-per-gpu-hour" in cli.stderr and "0 to 1000" in cli.stderr


def test_the_engine_prices_a_host_drains_it_and_reads_old_registrations_at_price_0() -> None:
    """Deterministic, no processes: the block's price and accrual, draining without force, and a
    ``HostRegistered`` stored before the price existed."""
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    from scalar.engine.actions import ReleaseBlock, StartWork
    from scalar.engine.codec import event_from_dict, event_to_dict
    from scalar.engine.controller import Controller
    from scalar.engine.events import (
        AssignmentReported,
        HostRegistered,
        HostRemoveRequested,
        JobSpec,
        JobSubmitted,
        Tick,
    )
    from scalar.engine.lifecycle import JobState

    t0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
    priced = HostRegistered(
        "reg",
        "n1",
        "byo-n1",
        "local",
        "2xH100",
        "H100",
        2,
        80.0,
        16.0,
        64.0,
        price_per_gpu_hour=Decimal("1.5"),
    )
    old = event_to_dict(priced)
    del old["price_per_gpu_hour"]
    assert event_from_dict(old) == replace(priced, price_per_gpu_hour=Decimal(0))
    assert event_from_dict(event_to_dict(priced)) == priced

    def submit(job_id: str) -> JobSubmitted:
        return JobSubmitted(job_id, JobSpec(job_id, "FAST", 1, expected_duration_sec=600, command=("true",)))

    ctl = Controller()
    actions = ctl.step(t0, [priced, submit("a")])
    assert [a.job_id for a in actions if isinstance(a, StartWork)] == ["a"]
    block = ctl.state.blocks["byo-n1"]
    assert block.grant.price_per_gpu_hour == Decimal("1.5") and block.block.cost_per_hour == Decimal(3)
    ctl.step(t0 + timedelta(hours=1), [Tick("t1")])
    assert block.accrued == Decimal(3)  # 2 GPUs x 1 h x 1.50
    # removal without force: the running job stays, a new one is not placed, the block stays open
    actions = ctl.step(
        t0 + timedelta(hours=1), [HostRemoveRequested("rm", "n1", actor="tok_admin"), submit("b")]
    )
    assert not [a for a in actions if isinstance(a, StartWork | ReleaseBlock)]
    assert ctl.state.jobs["a"].state is JobState.SCHEDULED and ctl.state.jobs["b"].state is JobState.PENDING
    assert block.open
    from scalar.engine.queries import node_view

    assert node_view(ctl.state.nodes["n1"]).draining  # GET /nodes shows it
    # the job ends: the block is released, its cost stops
    actions = ctl.step(t0 + timedelta(hours=2), [AssignmentReported("done", "n1", "a", 1, "succeeded", None)])
    assert [a.block_id for a in actions if isinstance(a, ReleaseBlock)] == ["byo-n1"]
    assert not block.open and block.accrued == Decimal(6)
    ctl.step(t0 + timedelta(hours=3), [Tick("t3")])
    assert block.accrued == Decimal(6) and ctl.state.jobs["b"].state is JobState.PENDING


def test_a_host_added_over_ssh_at_a_price_is_removed_and_its_agent_stopped(
    sqlite_url: str, tmp_path: Path, sshd: Sshd
) -> None:
    """``scalar node add --price-per-gpu-hour`` against a real sshd, then ``scalar node remove --ssh``."""
    from typer.testing import CliRunner

    from scalar.cli.main import app

    remote = tmp_path / "remote"
    with controller(sqlite_url, tmp_path / "data") as c:
        try:
            code, out = add(
                sshd,
                c.url,
                remote,
                "--gpus",
                "1xH100-80GB",
                "--accept-new-host-key",
                "--price-per-gpu-hour",
                "0.75",
            )
            assert code == 0, out
            [registered] = c.agents()
            node_id = registered["node_id"]
            assert "$0.75/GPU-h" in out
            block = wait_until(
                lambda: block_of(c, node_id) if c.http.get("/blocks").json()["blocks"] else None
            )
            assert Decimal(str(block["price_per_gpu_hour"])) == Decimal("0.75")
            pid = int((remote / "agent.pid").read_text())
            assert alive(pid)
            ssh = ["--ssh", "root@127.0.0.1", "--port", str(sshd.port), "--identity", str(sshd.key)]
            result = CliRunner().invoke(
                app,
                [
                    "node",
                    "remove",
                    node_id,
                    *ssh,
                    "--known-hosts",
                    str(sshd.known_hosts),
                    "--remote-dir",
                    str(remote),
                    "--server",
                    c.url,
                ],
            )
            assert result.exit_code == 0, result.output
            assert f"node {node_id} removed" in result.output and "the agent in" in result.output
            assert not alive(pid)
            assert "this node was removed" in (remote / "agent.log").read_text()
            assert block_of(c, node_id)["status"] == "released"
            bad = CliRunner().invoke(app, ["node", "remove", node_id, "--ssh", "nobody", "--server", c.url])
            assert bad.exit_code == 2 and "user@host" in bad.output
        finally:
            stop_agent(remote)
