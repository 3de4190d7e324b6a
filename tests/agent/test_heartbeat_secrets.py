"""A heartbeat reply carries a job's opened secrets only while its agent has not reported starting it
(an assignment not started yet gets its environment again from the next reply; one that runs
needs none, so none crosses the wire again)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.agent.harness import controller, wait_until

FACTS = {
    "hostname": "fake-host",
    "gpus": [{"index": 0, "uuid": "GPU-test-0", "model": "H100", "memory_gb": 80.0}],
    "cpu_count": 16,
    "ram_gb": 128.0,
    "disk_gb": 100.0,
    "fake_gpus": True,
}


def test_the_environment_is_sent_until_the_agent_reports_the_assignment(
    sqlite_url: str, tmp_path: Path
) -> None:
    with controller(sqlite_url, tmp_path) as c:
        from scalar import __version__
        from scalar.wire.agent import PROTOCOL

        reply = c.http.post(
            "/agent/v1/register",
            json={"join_token": c.token(), "version": __version__, "protocol": PROTOCOL, "facts": FACTS},
        )
        assert reply.status_code == 200, reply.text
        me = reply.json()
        seq = iter(range(1, 10_000))

        def beat(reports: list[dict[str, Any]]) -> dict[str, Any]:
            body = {"node_id": me["node_id"], "node_token": me["node_token"], "seq": next(seq)}
            response = c.http.post("/agent/v1/heartbeat", json={**body, "assignments": reports})
            assert response.status_code == 200, response.text
            return dict(response.json())

        job_id = c.submit(
            command=["true"], env={"KEY": {"value": "opened-4b1d", "secret": True}, "PLAIN": "p"}
        )
        first = wait_until(lambda: beat([])["assignments"], 40, "the assignment")[0]
        assert first["env"] == {"KEY": "opened-4b1d", "PLAIN": "p"}
        again = beat([])["assignments"][0]  # not reported yet: sent again, with its environment
        assert again["env"] == first["env"]
        running = {"assignment_id": first["assignment_id"], "state": "running", "pid": 123}
        later = beat([running])["assignments"]
        assert [a["assignment_id"] for a in later] == [first["assignment_id"]]
        assert later[0]["env"] == {} and later[0]["argv"] == ["true"] and later[0]["tenant"] == "default"
        assert c.job(job_id)["env"]["KEY"] == "***"
