"""Whatever JSON arrives at POST /jobs, the answer is a job or a problem: never a 500."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.wire.jobs import JobSubmission

JOB_FIELDS = list(JobSubmission.model_fields)

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(["FAST", "FLEX", "fast", "", "H100", "\x00"])
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
)
job_like = st.dictionaries(
    st.sampled_from([*JOB_FIELDS, "id", "gpus"]) | st.text(max_size=10), json_values, max_size=12
)
bodies = job_like | json_values


def _encode(body: Any) -> bytes:
    # json.dumps writes NaN/Infinity, which the server's JSON parser accepts: both must be handled.
    return json.dumps(body).encode()


def check(client: httpx.Client, raw: bytes) -> None:
    response = client.post("/jobs", content=raw, headers={"content-type": "application/json"})
    assert response.status_code in {201, 400, 422}, (raw, response.status_code, response.text)
    if response.status_code != 201:
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert problem["errors"] and all(e["field"] and e["fix"] for e in problem["errors"])
    else:
        assert response.json()["state"] == "PENDING"


def test_random_json_bodies_never_give_a_500(client: httpx.Client) -> None:
    @settings(max_examples=150)
    @given(bodies)
    def post(body: Any) -> None:
        check(client, _encode(body))

    post()


def test_invalid_utf8_is_a_400_problem_about_the_body(client: httpx.Client) -> None:
    response = client.post("/jobs", content=b"\x80", headers={"content-type": "application/json"})

    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "(body)"


def test_random_bytes_never_give_a_500(client: httpx.Client) -> None:
    @settings(max_examples=60)
    @given(st.binary(max_size=64))
    def post(raw: bytes) -> None:
        check(client, raw)

    post()
