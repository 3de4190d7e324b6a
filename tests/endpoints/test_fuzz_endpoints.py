"""Whatever JSON arrives at POST /endpoints or /v2/{id}/run, the answer is an endpoint, or a problem (on
/v2 also carrying RunPod's error): never a 500."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scalar.api.app import create_app
from scalar.runtime import ControlPlane
from scalar.wire.endpoints import EndpointSpecFile
from tests.api.live_server import serve
from tests.runtime.helpers import Clock, settings_for

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["AMPERE_80", "any", "H100", "12.4", "QUEUE_DELAY", "m:f", "\x00"])
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
)
spec_like = st.dictionaries(
    st.sampled_from([*EndpointSpecFile.model_fields, "id", "template"]) | st.text(max_size=10),
    json_values,
    max_size=10,
)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, str]]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    plane = ControlPlane(settings_for(f"sqlite:///{tmp / 'fuzz.db'}", tmp), clock=Clock())
    plane.open()
    try:
        with (
            serve(create_app(plane, auth_required=False)) as url,
            httpx.Client(base_url=url, timeout=30) as c,
        ):
            created = c.post("/endpoints", json={"name": "fuzz", "imageName": "img:1"})
            assert created.status_code == 201, created.text
            yield c, created.json()["id"]
    finally:
        plane.stop()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(body=spec_like | json_values)
def test_endpoint_specs_get_an_endpoint_or_a_problem(api: tuple[httpx.Client, str], body: Any) -> None:
    client, _ = api
    response = client.post(
        "/endpoints", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code in (201, 422), response.text
    if response.status_code == 422:
        errors = response.json()["errors"]
        assert errors and all(isinstance(e["field"], str) and e["fix"] for e in errors)
    else:
        assert client.delete(f"/endpoints/{response.json()['id']}").status_code == 200


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(body=json_values | st.fixed_dictionaries({"input": json_values}))
@example(body={"input": {"x": math.nan}})
@example(body={"input": [math.inf]})
def test_run_bodies_get_an_id_or_runpods_error(api: tuple[httpx.Client, str], body: Any) -> None:
    client, eid = api
    response = client.post(
        f"/v2/{eid}/run", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code in (200, 400, 422), response.text
    answer = response.json()
    if response.status_code == 200:
        status = client.get(f"/v2/{eid}/status/{answer['id']}")
        assert status.status_code == 200 and status.json()["status"] == "IN_QUEUE"
    else:  # RunPod's error and a problem naming the field
        assert isinstance(answer["error"], str) and answer["errors"][0]["field"]
