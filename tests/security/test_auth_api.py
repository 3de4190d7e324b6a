"""Authentication over real HTTP: 401 without or with a bad token, shown once, hashed at rest, revocable."""

from __future__ import annotations

import hashlib
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from scalar.api.auth import COOKIE_NAME, token_of
from scalar.store.schema_auth import api_tokens
from tests.security.conftest import Secured

JOB = {"tier": "FAST", "gpu_count": 1, "expected_duration_sec": 60}


def _unauthorized(response: object) -> dict[str, object]:
    import httpx

    assert isinstance(response, httpx.Response)
    assert response.status_code == 401, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"].startswith("Bearer")
    body: dict[str, object] = response.json()
    assert body["type"] == "urn:scalar:problem:unauthorized"
    return body


def test_every_route_but_the_public_ones_needs_a_token(secured: Secured) -> None:
    with secured.client() as anonymous:
        assert anonymous.get("/healthz").status_code == 200
        # the API's description is public: it holds no data
        assert anonymous.get("/openapi.json").json()["info"]["title"] == "Scalar"
        assert "swagger" in anonymous.get("/docs").text.lower()
        bodies = [
            _unauthorized(anonymous.get("/jobs")),
            _unauthorized(anonymous.post("/jobs", json=JOB)),
            _unauthorized(anonymous.get("/jobs/job-1")),
            _unauthorized(anonymous.delete("/jobs/job-1")),
            _unauthorized(anonymous.get("/orderbook", params={"instance_type": "8xH100"})),
            _unauthorized(anonymous.get("/no-such-route")),  # unknown routes too: nothing is learned
            _unauthorized(anonymous.get("/tokens")),
        ]
        for body in bodies:
            assert {k: v for k, v in body.items() if k != "instance"} == {
                k: v for k, v in bodies[0].items() if k != "instance"
            }
    with secured.client(secured.admin) as admin:
        assert admin.get("/jobs").status_code == 200


def test_every_bad_token_gets_the_same_answer(secured: Secured) -> None:
    good = secured.token("team-a")
    token_id = good.split(".")[1]
    revoked = secured.token("team-a")
    secured.cp.revoke_token(revoked.split(".")[1])
    wrong_secret = f"scalar.{token_id}." + "A" * 43
    unknown_id = "scalar.tok_0000000000000000." + good.split(".")[2]
    answers = []
    for bad in [wrong_secret, unknown_id, revoked, "nonsense", "scalar..", "x" * 5000, good + "x"]:
        with secured.client(bad) as client:
            body = _unauthorized(client.get("/jobs"))
            answers.append(body)
            assert bad not in str(body) and token_id not in str(body)
    assert all(a == answers[0] for a in answers)
    with secured.client(cookie="scalar_token=" + wrong_secret) as client:
        _unauthorized(client.get("/jobs"))
    with secured.client(good) as client:
        assert client.get("/jobs").status_code == 200


def test_a_token_is_shown_once_and_stored_hashed(secured: Secured) -> None:
    with secured.client(secured.admin) as admin:
        created = admin.post("/tokens", json={"tenant": "team-a", "role": "user", "name": "ci"})
        assert created.status_code == 201, created.text
        token = created.json()["token"]
        token_id, secret = created.json()["id"], token.split(".")[2]
        listed = admin.get("/tokens")
        assert listed.status_code == 200
        assert token_id in listed.text
        assert secret not in listed.text and token not in listed.text
        assert all("token" not in t and "secret_sha256" not in t for t in listed.json()["tokens"])
        assert secret not in admin.get("/audit").text
    assert secured.cp.store is not None
    with secured.cp.store.read() as tx:
        rows = [dict(r._mapping) for r in tx.conn.execute(select(api_tokens))]
    row = next(r for r in rows if r["id"] == token_id)
    assert row["secret_sha256"] == hashlib.sha256(secret.encode()).hexdigest()
    assert not any(secret in str(value) for r in rows for value in r.values())
    with secured.client(token) as client:
        assert client.get("/whoami").json() == {
            "token_id": token_id,
            "tenant": "team-a",
            "role": "user",
            "auth_required": True,
        }


def test_a_revoked_token_is_refused_from_the_next_request(secured: Secured) -> None:
    token = secured.token("team-a")
    token_id = token.split(".")[1]
    with secured.client(token) as client, secured.client(secured.admin) as admin:
        assert client.get("/jobs").status_code == 200
        revoked = admin.delete(f"/tokens/{token_id}")
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["revoked_at"] is not None
        _unauthorized(client.get("/jobs"))
        assert admin.delete("/tokens/tok_ffffffffffffffff").status_code == 404
        actions = [e["action"] for e in admin.get("/audit", params={"tenant": "team-a"}).json()["entries"]]
        assert actions == ["token.create", "token.revoke"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/tokens", None),
        ("POST", "/tokens", {"tenant": "team-b", "role": "admin"}),
        ("DELETE", "/tokens/tok_0000000000000000", None),
        ("GET", "/audit", None),
        ("POST", "/providers", {}),
        ("POST", "/orders", {}),
        ("DELETE", "/blocks/b-1", None),
        ("POST", "/budgets", {}),
        ("PUT", "/budgets", {}),
        ("POST", "/agents/join-tokens", {}),
    ],
)
def test_admin_only_routes_refuse_a_user_token(
    secured_sqlite: Secured, method: str, path: str, body: object
) -> None:
    user = secured_sqlite.token("team-a")
    with secured_sqlite.client(user) as client:
        response = client.request(method, path, json=body)
    assert response.status_code == 403, response.text
    assert response.json()["type"] == "urn:scalar:problem:forbidden"
    assert len(secured_sqlite.cp.list_tokens()) == 2  # nothing was created


def test_token_fields_are_validated(secured_sqlite: Secured) -> None:
    with secured_sqlite.client(secured_sqlite.admin) as admin:
        for body in [
            {"tenant": "Team A", "role": "user"},
            {"tenant": "team-a", "role": "root"},
            {"tenant": "", "role": "user"},
            {"tenant": "a" * 65},
            {"tenant": "team-a", "extra": 1},
        ]:
            response = admin.post("/tokens", json=body)
            assert response.status_code == 422, (body, response.text)
            assert response.json()["errors"][0]["field"] in {"tenant", "role", "extra"}


MALFORMED_COOKIES = [
    "scalar_token",  # no '='
    "scalar_token=",  # empty value
    "=;;;=",
    'scalar_token="',  # an unclosed quote
    "scalar_token=a=b=c",
    ";;scalar_token; ;x",
    "scalar_token=" + "x" * 5000,
    "other=1; scalar_token=scalar..; third",
]


def test_the_cookie_is_read_from_a_real_cookie_header_and_a_bad_one_is_401(secured_sqlite: Secured) -> None:
    good = secured_sqlite.token("team-a")
    for header in (f"scalar_token={good}", f'theme=dark; lang="en us"; scalar_token="{good}"; x=1'):
        with secured_sqlite.client(cookie=header) as client:
            assert client.get("/whoami").json()["tenant"] == "team-a", header
    answers = []
    for header in MALFORMED_COOKIES:
        with secured_sqlite.client(cookie=header) as client:
            answers.append(_unauthorized(client.get("/jobs")))
    same = [{k: v for k, v in a.items() if k != "instance"} for a in answers]
    assert all(a == same[0] for a in same)  # every malformed header: the same 401 as no token at all
    with secured_sqlite.client(
        good, cookie="scalar_token=nonsense"
    ) as client:  # the bearer token comes first
        assert client.get("/whoami").json()["tenant"] == "team-a"


@given(st.text(max_size=200))
def test_any_cookie_header_gives_a_token_or_none_and_never_raises(header: str) -> None:
    found = token_of({"cookie": header})
    assert found is None or (found and COOKIE_NAME in header)


@given(st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=1, max_size=80))
def test_a_token_cookie_among_others_is_found(token: str) -> None:
    header = f"theme=dark; {COOKIE_NAME}={token}; lang=en"
    assert token_of({"cookie": header}) == token
    assert token_of({"cookie": header, "authorization": "Bearer other"}) == "other"
