"""Bounds on every field: a table of hostile bodies and parameters per route, over real HTTP.

Each gets a 4xx problem (never a 500) that names the offending field, and nothing stored changes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.security.conftest import Secured

_HUGE = "x" * 100_000
_FACTS: dict[str, Any] = {"hostname": "h", "gpus": [], "cpu_count": 4, "ram_gb": 16.0, "disk_gb": 100.0}
_GPU = {"index": 0, "uuid": "GPU-1", "model": "H100", "memory_gb": 80.0}
_REGISTER: dict[str, Any] = {"join_token": "jt", "version": "1", "protocol": 1, "facts": _FACTS}
_BEAT: dict[str, Any] = {"node_id": "n", "node_token": "t", "seq": 0, "assignments": []}
_REPORT: dict[str, Any] = {"assignment_id": "a", "state": "running"}


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**base, **changes}


# (method, path, raw JSON body or None, query params, the field the problem must name)
CASES: list[tuple[str, str, str | None, dict[str, Any] | None, str]] = [
    # POST /quote: seed 002's WorkloadRequirements
    ("POST", "/quote", '{"minCPU": -1}', None, "minCPU"),
    ("POST", "/quote", '{"minCPU": 1e300}', None, "minCPU"),
    ("POST", "/quote", '{"minCPU": NaN}', None, "minCPU"),
    ("POST", "/quote", '{"minMemoryGB": Infinity}', None, "minMemoryGB"),
    ("POST", "/quote", '{"gpuCount": -8}', None, "gpuCount"),
    ("POST", "/quote", '{"gpuCount": 1e9}', None, "gpuCount"),
    ("POST", "/quote", '{"maxPricePerHour": NaN}', None, "maxPricePerHour"),
    ("POST", "/quote", '{"maxPricePerHour": 1e20}', None, "maxPricePerHour"),
    ("POST", "/quote", '{"networkBandwidthGbps": -0.5}', None, "networkBandwidthGbps"),
    ("POST", "/quote", '{"networkBandwidthGbps": 1e300}', None, "networkBandwidthGbps"),
    ("POST", "/quote", '{"maxInterruptionRate": 2}', None, "maxInterruptionRate"),
    ("POST", "/quote", json.dumps({"gpuType": _HUGE}), None, "gpuType"),
    ("POST", "/quote", json.dumps({"preferredRegions": [_HUGE]}), None, "preferredRegions"),
    ("POST", "/quote", json.dumps({"preferredRegions": ["r"] * 1000}), None, "preferredRegions"),
    ("POST", "/quote", '{"gpus": 1}', None, "gpus"),
    ("POST", "/quote", "{}", {"scorer": "evil"}, "scorer"),
    # POST /jobs and /preview
    ("POST", "/jobs", '{"tier": "FAST", "gpu_count": -1}', None, "gpu_count"),
    ("POST", "/jobs", '{"tier": "FAST", "gpu_count": 10000000}', None, "gpu_count"),
    ("POST", "/jobs", '{"tier": "FAST", "gpu_count": 1, "ram_gb": NaN}', None, "ram_gb"),
    ("POST", "/jobs", '{"tier": "FAST", "gpu_count": 1, "cpu_cores": Infinity}', None, "cpu_cores"),
    ("POST", "/jobs", '{"tier": "WARP", "gpu_count": 1}', None, "tier"),
    ("POST", "/jobs", json.dumps({"tier": "FAST", "gpu_count": 1, "name": _HUGE}), None, "name"),
    ("POST", "/jobs/preview", '{"tier": "FAST", "gpu_count": -1}', None, "gpu_count"),
    # query parameters
    ("GET", "/jobs", None, {"limit": -1}, "limit"),
    ("GET", "/jobs", None, {"limit": 10**9}, "limit"),
    ("GET", "/jobs", None, {"offset": -5}, "offset"),
    ("GET", "/jobs", None, {"state": "NOPE"}, "state"),
    ("GET", "/jobs/j-1/logs", None, {"offset": -1}, "offset"),
    ("GET", "/jobs/j-1/logs", None, {"offset": 2**70}, "offset"),
    ("GET", "/jobs/j-1/logs", None, {"attempt": 0}, "attempt"),
    ("GET", "/jobs/j-1/logs", None, {"attempt": 10**12}, "attempt"),
    ("GET", "/costs", None, {"points": 10**6}, "points"),
    ("GET", "/audit", None, {"limit": 0}, "limit"),
    ("GET", "/audit", None, {"after_id": -1}, "after_id"),
    ("GET", "/orderbook", None, {"instance_type": "8xH100", "node_count": -1}, "node_count"),
    ("GET", "/orderbook", None, {"instance_type": "8xH100", "gpus_per_node": 10**6}, "gpus_per_node"),
    ("GET", "/blocks", None, {"status": "EXPLODED"}, "status"),
    # tokens and budgets
    ("POST", "/tokens", json.dumps({"tenant": "team-a", "name": _HUGE}), None, "name"),
    ("POST", "/tokens", json.dumps({"tenant": "Team A!"}), None, "tenant"),
    ("POST", "/tokens", json.dumps({"tenant": "team-a", "role": "root"}), None, "role"),
    ("POST", "/tokens", json.dumps({"tenant": "team-a", "expires_in": "-1d"}), None, "expires_in"),
    ("PUT", "/budgets", '{"limits": [{"usd_per_hour": "-1"}]}', None, "usd_per_hour"),
    ("PUT", "/budgets", '{"limits": [{"usd_per_hour": "NaN"}]}', None, "usd_per_hour"),
    ("PUT", "/budgets", '{"limits": [{"usd_per_period": "1e999"}]}', None, "usd_per_period"),
    ("PUT", "/budgets", '{"limits": [{"period": "century"}]}', None, "period"),
    ("PUT", "/budgets", json.dumps({"limits": [{}] * 5000}), None, "limits"),
    # the agent protocol
    ("POST", "/agent/v1/register", json.dumps(_with(_REGISTER, version=_HUGE)), None, "version"),
    ("POST", "/agent/v1/register", json.dumps(_with(_REGISTER, protocol=-1)), None, "protocol"),
    (
        "POST",
        "/agent/v1/register",
        json.dumps(_with(_REGISTER, facts=_with(_FACTS, cpu_count=-4))),
        None,
        "cpu_count",
    ),
    (
        "POST",
        "/agent/v1/register",
        json.dumps(_with(_REGISTER, facts=_with(_FACTS, cpu_count=10**12))),
        None,
        "cpu_count",
    ),
    (
        "POST",
        "/agent/v1/register",
        json.dumps(_with(_REGISTER, facts=_with(_FACTS, gpus=[_GPU] * 65))),
        None,
        "gpus",
    ),
    (
        "POST",
        "/agent/v1/register",
        json.dumps(_with(_REGISTER, facts=_with(_FACTS, gpus=[_with(_GPU, memory_gb=1e30)]))),
        None,
        "memory_gb",
    ),
    (
        "POST",
        "/agent/v1/register",
        json.dumps(_with(_REGISTER, facts=_with(_FACTS, driver_version=_HUGE))),
        None,
        "driver_version",
    ),
    (
        "POST",
        "/agent/v1/register",
        json.dumps(_with(_REGISTER, facts=_with(_FACTS, hostname=_HUGE))),
        None,
        "hostname",
    ),
    (
        "POST",
        "/agent/v1/register",
        '{"version": "1", "protocol": 1, "facts": '
        '{"hostname": "h", "cpu_count": 1, "ram_gb": NaN, "disk_gb": 1}}',
        None,
        "ram_gb",
    ),
    ("POST", "/agent/v1/heartbeat", json.dumps(_with(_BEAT, seq=-1)), None, "seq"),
    (
        "POST",
        "/agent/v1/heartbeat",
        json.dumps(_with(_BEAT, assignments=[_REPORT] * 10_001)),
        None,
        "assignments",
    ),
    (
        "POST",
        "/agent/v1/heartbeat",
        json.dumps(_with(_BEAT, assignments=[_with(_REPORT, usage={"rss_bytes": -1})])),
        None,
        "rss_bytes",
    ),
    (
        "POST",
        "/agent/v1/heartbeat",
        json.dumps(_with(_BEAT, assignments=[_with(_REPORT, pid=-3)])),
        None,
        "pid",
    ),
    (
        "POST",
        "/agent/v1/heartbeat",
        json.dumps(_with(_BEAT, assignments=[_with(_REPORT, state="zombie")])),
        None,
        "state",
    ),
    (
        "POST",
        "/agent/v1/logs",
        json.dumps({"node_id": "n", "node_token": "t", "assignment_id": "a", "offset": -1, "data_b64": ""}),
        None,
        "offset",
    ),
    ("POST", "/agents/join-tokens", '{"ttl_s": -1}', None, "ttl_s"),
    ("POST", "/agents/join-tokens", '{"tier": "WARP"}', None, "tier"),
]


def _stored(admin: Any) -> dict[str, Any]:
    return {path: admin.get(path).json() for path in ("/jobs", "/tokens", "/budgets", "/agents", "/audit")}


def _registered(admin: Any) -> tuple[str, str]:
    """A real node's id and token: the agent's routes check them before they look at the rest."""
    join = admin.post("/agents/join-tokens", json={})
    assert join.status_code == 201, join.text
    reply = admin.post("/agent/v1/register", json=_with(_REGISTER, join_token=join.json()["token"]))
    assert reply.status_code == 200, reply.text
    return reply.json()["node_id"], reply.json()["node_token"]


def test_every_hostile_field_is_refused_by_name(secured_sqlite: Secured) -> None:
    failures: list[str] = []
    with secured_sqlite.client(secured_sqlite.admin) as admin:
        submitted = admin.post("/jobs", json={"tier": "FLEX", "gpu_count": 1})
        assert submitted.status_code in (201, 202), submitted.text
        node_id, node_token = _registered(admin)
        before = _stored(admin)
        for method, path, raw, params, field in CASES:
            body = None
            if raw is not None:
                real = f'"node_id": {json.dumps(node_id)}, "node_token": {json.dumps(node_token)}'
                body = raw.replace('"node_id": "n", "node_token": "t"', real)
            response = admin.request(
                method,
                path,
                content=None if body is None else body.encode(),
                params=params,
                headers={"content-type": "application/json"} if body is not None else {},
            )
            label = f"{method} {path} {params or ''} {(body or '')[:80]}"
            if not 400 <= response.status_code < 500 or response.status_code in (401, 403, 404):
                failures.append(f"{label}: {response.status_code} {response.text[:200]}")
                continue
            if response.headers.get("content-type") != "application/problem+json":
                failures.append(f"{label}: not a problem: {response.headers.get('content-type')}")
                continue
            problem = response.json()
            named = [e.get("field", "") for e in problem.get("errors", [])]
            if not any(field in n for n in named) or not all(e.get("fix") for e in problem["errors"]):
                failures.append(f"{label}: fields {named}, want {field!r} with a fix")
        after = _stored(admin)
    assert not failures, "\n".join(failures)
    assert after == before


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "-1", "1e400"])
def test_requirements_numbers_are_finite_and_non_negative(value: str) -> None:
    from pydantic import ValidationError

    from scalar.wire.quote import RequirementsFile

    for field in ("minCPU", "minMemoryGB", "gpuCount", "maxPricePerHour", "networkBandwidthGbps"):
        with pytest.raises(ValidationError, match=field):
            RequirementsFile.model_validate_json(f'{{"{field}": {value}}}')
