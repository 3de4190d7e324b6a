"""The endpoint, token and agent answers are typed: the runtime builds each from its model
(``wire/endpoints_api.py``, ``wire/auth.py``, ``wire/agent.py``) field by field. A model field the runtime
left unfilled (a new field, or a misspelt keyword, which pydantic drops) would go out as its default on
every surface, so every field must be one the runtime set, nested models included; the few RunPod leaves
out until they are known are named. Over HTTP the answers keep their keys in the model's order, and a
webhook keeps the body it has always had."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from scalar import __version__
from scalar.runtime import ControlPlane
from scalar.runtime.endpoints.records import WEBHOOK_KEYS, webhook_body
from scalar.wire.agent import PROTOCOL, AgentOut, GpuFact, HostFacts, JoinTokenRequest, RegisterRequest
from scalar.wire.endpoints_api import EndpointOut, RequestStatusOut, StreamOut, WorkerOut
from tests.endpoints.harness import drive_until, endpoint_api, spec
from tests.runtime.helpers import Clock

# Fields RunPod sends only once known (a request's run, its worker, its output or error): left unset until then.
NOT_YET_KNOWN = {"RequestStatusOut": {"executionTime", "workerId", "output", "error"}}


def _models_in(value: Any) -> list[BaseModel]:
    if isinstance(value, BaseModel):
        return [value]
    if isinstance(value, list):
        return [m for item in value for m in _models_in(item)]
    return []


def assert_filled(answer: BaseModel, where: str = "") -> int:
    """Every field of ``answer`` (and of the models in it) was set by the runtime, but ``NOT_YET_KNOWN``;
    returns how many models it checked."""
    name = type(answer).__name__
    unset = set(type(answer).model_fields) - answer.model_fields_set
    assert unset <= NOT_YET_KNOWN.get(name, set()), (where or name, sorted(unset))
    checked = 1
    for field in type(answer).model_fields:
        for inner in _models_in(getattr(answer, field)):
            checked += assert_filled(inner, f"{where or name}.{field}")
    return checked


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[httpx.Client, ControlPlane, Clock]]:
    with endpoint_api(f"sqlite:///{tmp_path / 'scalar.db'}", tmp_path) as api:
        yield api


def test_every_field_of_the_endpoint_answers_is_filled_by_the_runtime(
    served: tuple[httpx.Client, ControlPlane, Clock],
) -> None:
    _, plane, clock = served
    svc = plane.endpoints
    created = svc.create(spec("typed", workersMax=2))
    assert assert_filled(created) == 1 + 5  # the endpoint, its health and the two counts, latency, cost
    eid = created.id
    accepted = [svc.submit_request(eid, {"n": i}) for i in range(3)]
    assert all(assert_filled(a) == 1 for a in accepted)
    queued = svc.request_status(eid, accepted[0].id)
    assert queued.status == "IN_QUEUE" and assert_filled(queued) == 1
    assert queued.model_fields_set.isdisjoint(NOT_YET_KNOWN["RequestStatusOut"])
    drive_until(plane, clock, lambda: svc.request_status(eid, accepted[0].id).status == "COMPLETED")
    done = svc.request_status(eid, accepted[0].id)
    assert assert_filled(done) == 1 and {"executionTime", "workerId", "output"} <= done.model_fields_set
    assert assert_filled(svc.stream(eid, accepted[0].id)) == 1 + 0  # its chunks were taken before: none
    view = svc.get(eid)
    assert view is not None and view.workers and view.scaling
    # the endpoint, its workers and scaling decisions, health and its counts, latency, cost
    assert assert_filled(view) == 1 + len(view.workers) + len(view.scaling) + 3 + 1 + 1
    assert assert_filled(svc.health(eid)) == 3 and assert_filled(svc.metrics(eid)) == 3
    lines = svc.logs(eid)
    assert lines and all(assert_filled(line) == 1 for line in lines)
    assert assert_filled(svc.purge_queue(eid)) == 1
    assert assert_filled(svc.delete(eid)) >= 6


def test_every_field_of_the_token_and_agent_answers_is_filled_by_the_runtime(
    served: tuple[httpx.Client, ControlPlane, Clock],
) -> None:
    client, plane, _ = served
    made = plane.create_token("team-a", "user", "ci")
    assert assert_filled(made) == 1 and plane.authenticate(made.token) is not None
    assert all(assert_filled(t) == 1 for t in plane.list_tokens())
    assert assert_filled(plane.revoke_token(made.id)) == 1
    entries = plane.audit()
    assert [e.action for e in entries] == ["token.create", "token.revoke"]
    assert all(assert_filled(e) == 1 for e in entries)
    joining = plane.agents.create_join_token(
        JoinTokenRequest(provider="byo", price_per_gpu_hour=Decimal("1.5"))
    )
    assert assert_filled(joining) == 1
    gpu = GpuFact(index=0, uuid="GPU-0", model="H100", memory_gb=80.0)
    facts = HostFacts(hostname="host-1", gpus=[gpu], cpu_count=8, ram_gb=64.0, disk_gb=100.0)
    joined = plane.agents.register(
        RegisterRequest(join_token=joining.token, version=__version__, protocol=PROTOCOL, facts=facts)
    )
    [registered] = plane.agents.agents()
    assert registered.node_id == joined.node_id and assert_filled(registered) == 1
    assert list(client.get("/agents").json()["agents"][0]) == list(AgentOut.model_fields)
    removing = plane.agents.remove_node(joined.node_id, force=False, actor="test")
    assert removing.state == "removing" and assert_filled(removing) == 1
    job = plane.submit_job(
        {"tier": "FAST", "gpu_count": 1, "expected_duration_sec": 600, "vram_per_gpu_gb": 10}
    )
    logs = plane.agents.job_logs(job.id, 0, None)
    assert logs is not None and assert_filled(logs) == 1 and logs.data == "" and logs.attempt is None


def _fields(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def test_the_answers_keep_their_keys_in_the_models_order_and_a_webhook_its_body(
    served: tuple[httpx.Client, ControlPlane, Clock],
) -> None:
    client, plane, clock = served
    eid = client.post("/endpoints", json=spec("order")).json()["id"]
    rid = client.post(f"/v2/{eid}/run", json={"input": {"n": 1}}).json()["id"]
    queued_stream = client.get(f"/v2/{eid}/stream/{rid}").json()
    assert list(queued_stream) == ["id", "status", "stream", "error", "delayTime"]  # not started yet
    assert list(client.get(f"/v2/{eid}/status/{rid}").json()) == _fields(RequestStatusOut)

    def done() -> bool:
        return bool(client.get(f"/v2/{eid}/status/{rid}").json()["status"] == "COMPLETED")

    drive_until(plane, clock, done)
    assert list(client.get(f"/v2/{eid}/stream/{rid}").json()) == _fields(StreamOut)
    view = client.get(f"/endpoints/{eid}").json()
    assert list(view) == _fields(EndpointOut)
    assert view["workers"] and all(list(w) == _fields(WorkerOut) for w in view["workers"])
    status = plane.endpoints.request_status(eid, rid)
    body = webhook_body(status)
    assert list(body) == [k for k in WEBHOOK_KEYS if k != "error"]  # a completed request has no error
    assert body == {k: v for k, v in client.get(f"/v2/{eid}/status/{rid}").json().items() if k in body}


def test_a_webhook_body_names_only_what_is_known() -> None:
    queued = RequestStatusOut(id="req-1", status="IN_QUEUE", delayTime=0, attempts=0, retries=0)
    assert webhook_body(queued) == {
        "id": "req-1",
        "status": "IN_QUEUE",
        "delayTime": 0,
        "attempts": 0,
        "retries": 0,
    }
    failed = RequestStatusOut(
        **{**queued.model_dump(exclude_unset=True), "status": "FAILED", "error": "boom"}
    )
    assert list(webhook_body(failed)) == ["id", "status", "delayTime", "attempts", "retries", "error"]
