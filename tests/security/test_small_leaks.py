"""Small leaks: PUT /budgets needs ``limits``; NUL in argv/env and ``=`` in env names are refused
at submission; agents' and workers' calls are checked before any write transaction and rate-limited per
node."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scalar.api import access
from scalar.wire.jobs import JobSubmission, submission_problems
from tests.security.conftest import Secured, secured_api

JOB = {"tier": "FLEX", "gpu_count": 1, "command": ["echo", "hi"]}
FACTS = {"hostname": "h", "gpus": [], "cpu_count": 1, "ram_gb": 1.0, "disk_gb": 1.0}


def test_put_budgets_needs_limits_and_an_empty_list_clears_them_audited(secured_sqlite: Secured) -> None:
    api = secured_sqlite
    with api.client(api.admin) as admin:
        limit = {"scope": "global", "usd_per_hour": "5"}
        assert admin.put("/budgets", json={"limits": [limit]}).status_code == 200
        refused = admin.put("/budgets", json={})
        assert refused.status_code == 422
        assert [e["field"] for e in refused.json()["errors"]] == ["limits"]
        assert admin.get("/budgets").json()["limits"][0]["usd_per_hour"] == "5"  # nothing was deleted
        cleared = admin.put("/budgets", json={"limits": []})
        assert cleared.status_code == 200 and cleared.json()["limits"] == []
        audit = admin.get("/audit").json()["entries"]
        actions = [(e["action"], e["actor"]) for e in audit if e["action"].startswith("budgets.")]
        admin_id = api.admin.split(".")[1]
        assert actions == [("budgets.replace", admin_id), ("budgets.clear", admin_id)]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"command": ["echo", "a\x00b"]}, "command[1]"),
        ({"env": {"A=B": "1"}}, "env.A=B"),
        ({"env": {"A": "x\x00y"}}, "env.A"),
        ({"env": {"A": {"value": "s3kr1t\x00value", "secret": True}}}, "env.A"),
        ({"env": {"A\x00": "1"}}, "env.A\\x00"),
        ({"workdir": "/tmp\x00/x"}, "workdir"),
    ],
)
def test_nul_and_equals_are_refused_at_submission(
    secured_sqlite: Secured, changes: dict[str, Any], field: str
) -> None:
    with secured_sqlite.client(secured_sqlite.token("team-a")) as user:
        for path in ("/jobs", "/jobs/preview"):
            response = user.post(path, json={**JOB, **changes})
            assert response.status_code == 422, response.text
            errors = response.json()["errors"]
            assert [e["field"] for e in errors] == [field]
            assert errors[0]["fix"] and "s3kr1t" not in response.text  # a secret is never echoed
        assert user.get("/jobs").json()["count"] == 0


NAMES = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(env=st.dictionaries(NAMES, st.text(st.characters(codec="utf-8"), max_size=20), max_size=5))
def test_an_env_is_accepted_exactly_when_no_name_has_equals_or_nul_and_no_value_nul(
    env: dict[str, str],
) -> None:
    bad = {k for k, v in env.items() if "=" in k or "\x00" in k or "\x00" in v}
    try:
        JobSubmission.model_validate({**JOB, "env": env})
    except ValidationError as exc:
        named = {p.field for p in submission_problems(exc)}
        assert bad and all(f.startswith("env.") for f in named)
        return
    assert not bad


# ---- agents and workers: cheap refusals, rate limits per node -------------------------------------------


@contextmanager
def _counting_writes(api: Secured) -> Iterator[list[int]]:
    """Count the store's write transactions while the block runs."""
    store = api.cp.store
    assert store is not None
    original = store.write
    count = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(*args, **kwargs)

    store.write = counted  # type: ignore[method-assign]
    try:
        yield count
    finally:
        del store.write


def _register(api: Secured) -> tuple[str, str]:
    with api.client(api.admin) as admin:
        join = admin.post("/agents/join-tokens", json={}).json()["token"]
        reply = admin.post(
            "/agent/v1/register", json={"join_token": join, "version": "1", "protocol": 1, "facts": FACTS}
        )
        assert reply.status_code == 200, reply.text
        return reply.json()["node_id"], reply.json()["node_token"]


def test_bogus_agent_credentials_are_refused_without_a_write(secured_sqlite: Secured) -> None:
    api = secured_sqlite
    node_id, token = _register(api)
    bogus = [
        {"node_id": node_id, "node_token": token[:-1] + ("A" if token[-1] != "A" else "B")},
        {"node_id": "no-such-node", "node_token": token},
        {"node_id": node_id, "node_token": ""},
    ]
    with api.client() as agent, _counting_writes(api) as writes:
        for creds in bogus:
            beat = agent.post("/agent/v1/heartbeat", json={**creds, "seq": 1, "assignments": []})
            assert beat.status_code == 401, beat.text
            assert beat.json()["errors"][0]["field"] == "node_token"
            logs = agent.post(
                "/agent/v1/logs", json={**creds, "assignment_id": "a", "offset": 0, "data_b64": ""}
            )
            assert logs.status_code == 401
            worker = agent.post("/agent/v1/endpoints/e/workers/w/next", json={"token": token, "attempt": 1})
            assert worker.status_code == 401
        assert writes[0] == 0
        good = agent.post(
            "/agent/v1/heartbeat", json={"node_id": node_id, "node_token": token, "seq": 1, "assignments": []}
        )
        assert good.status_code == 200, good.text
        assert writes[0] >= 1


def test_agents_are_rate_limited_per_node(tmp_path: Path) -> None:
    with secured_api(f"sqlite:///{tmp_path / 'r.db'}", tmp_path) as api:
        limiter = api.app.state.agent_rate_limiter
        limiter.rate_per_s, limiter.burst = 1e-6, 3.0  # (no refill while the test runs, however slow)
        first, second = _register(api), _register(api)
        with api.client() as agent:

            def beat(node: tuple[str, str]) -> Any:
                body = {"node_id": node[0], "node_token": node[1], "seq": 1, "assignments": []}
                return agent.post("/agent/v1/heartbeat", json=body)

            codes = [beat(first).status_code for _ in range(4)]
            assert codes == [200, 200, 200, 429]
            limited = beat(first)
            assert limited.json()["type"] == "urn:scalar:problem:rate-limited"
            assert int(limited.headers["retry-after"]) >= 1
            assert beat(second).status_code == 200  # per node: another node is not slowed


def test_a_flood_of_bad_credentials_is_held_back_per_address(
    secured_sqlite: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(access, "FAILURE_DELAY_S", 0.01)  # (held back 1 s by default)
    api = secured_sqlite
    failures = api.app.state.agent_failure_limiter
    failures.rate_per_s, failures.burst = 1e-6, 5.0  # (no refill while the test runs, however slow)
    node_id, token = _register(api)
    body = {"node_id": node_id, "node_token": "bogus", "seq": 1, "assignments": []}
    with api.client() as agent:
        codes = [agent.post("/agent/v1/heartbeat", json=body).status_code for _ in range(8)]
        assert codes == [401] * 5 + [429] * 3
        held = agent.post("/agent/v1/heartbeat", json=body)
        assert held.status_code == 429 and int(held.headers["retry-after"]) >= 1
        # the node itself, with its real token, is not held back by someone else's bad guesses
        good = agent.post("/agent/v1/heartbeat", json={**body, "node_token": token})
        assert good.status_code == 200, good.text
