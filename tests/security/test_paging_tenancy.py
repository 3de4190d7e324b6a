"""Cursor paging under tenancy: a tenant pages through its own jobs only, and a cursor never carries one
tenant's rows (or its listing) to another; the audit log pages with the same cursors."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.runtime.helpers import job
from tests.security.conftest import Secured


def _walk(client: httpx.Client, path: str, items: str, **params: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = None
    while True:
        got = client.get(path, params={**params, **({"after": after} if after else {})})
        assert got.status_code == 200, got.text
        body = got.json()
        out += body[items]
        after = body["next"]
        if after is None:
            return out


def test_a_tenant_pages_through_its_own_jobs_and_a_cursor_stays_with_its_tenant(secured: Secured) -> None:
    cp = secured.cp
    a_ids = [cp.submit_job({**job(gpus=1, duration=30), "tenant": "team-a"}).id for _ in range(5)]
    b_ids = [cp.submit_job({**job(gpus=1, duration=30), "tenant": "team-b"}).id for _ in range(4)]
    with secured.client(secured.token("team-a")) as a, secured.client(secured.token("team-b")) as b:
        assert [j["id"] for j in _walk(a, "/jobs", "jobs", limit=2)] == sorted(a_ids, reverse=True)
        assert [j["id"] for j in _walk(b, "/jobs", "jobs", limit=3, order="oldest")] == sorted(b_ids)

        a_cursor = a.get("/jobs", params={"limit": 2}).json()["next"]
        # team-b cannot use team-a's cursor: it belongs to another listing (another caller)
        stolen = b.get("/jobs", params={"limit": 2, "after": a_cursor})
        assert stolen.status_code == 422 and stolen.json()["errors"][0]["field"] == "after"

        # a cursor forged to start at another tenant's job id still lists only the caller's own jobs
        listing = json.loads(base64.urlsafe_b64decode(a_cursor + "=" * (-len(a_cursor) % 4)))["l"]
        for start in (b_ids[2], a_ids[3], "job-99999999T999999-ffffff"):
            raw = json.dumps({"k": start, "b": 0, "l": listing}).encode()
            forged = base64.urlsafe_b64encode(raw).decode().rstrip("=")
            got = a.get("/jobs", params={"limit": 100, "after": forged})
            assert got.status_code == 200
            assert {j["id"] for j in got.json()["jobs"]} <= set(a_ids)

    with secured.client(secured.admin) as admin:  # an admin pages through every tenant's jobs
        assert {j["id"] for j in _walk(admin, "/jobs", "jobs", limit=4)} == set(a_ids) | set(b_ids)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60))
def test_any_text_as_a_cursor_is_a_problem_or_a_page_never_a_500(secured: Secured, text: str) -> None:
    with secured.client(secured.admin) as admin:
        for path in ("/jobs", "/nodes", "/blocks", "/endpoints", "/audit"):
            got = admin.get(path, params={"after": text})
            assert got.status_code in (200, 422), (path, got.status_code, got.text)
            if got.status_code == 422:
                assert got.json()["errors"][0]["field"] == "after"


def test_the_audit_log_pages_with_a_cursor(secured: Secured) -> None:
    tokens = [secured.cp.create_token("team-a", "user", f"t{i}").id for i in range(5)]
    with secured.client(secured.admin) as admin:
        everything = admin.get("/audit", params={"limit": 1000}).json()["entries"]
        paged = _walk(admin, "/audit", "entries", limit=2)
        assert [e["id"] for e in paged] == [e["id"] for e in everything]
        assert len(everything) >= len(tokens)
        first = admin.get("/audit", params={"limit": 2}).json()
        second = admin.get("/audit", params={"limit": 2, "after": first["next"]}).json()
        back = admin.get("/audit", params={"limit": 2, "after": second["prev"]}).json()
        assert [e["id"] for e in back["entries"]] == [e["id"] for e in first["entries"]]
        other = admin.get("/audit", params={"limit": 2, "after": first["next"], "action": "buy"})
        assert other.status_code == 422 and other.json()["errors"][0]["field"] == "after"
