"""Handlers are code an admin chose: a local endpoint's ``handler`` runs on the control plane's
host, so a user may deploy only handlers under ``[endpoints] handlers``; an admin may deploy any."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scalar.runtime.endpoints.service import handler_allowed
from tests.endpoints.harness import spec
from tests.security.conftest import Secured, secured_api

ALLOWED = ("tests.endpoints.handlers",)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Secured]:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    with secured_api(url, tmp_path, settings={"endpoint_handlers": ALLOWED}) as served:
        yield served


def _refused(response: object) -> None:
    import httpx

    assert isinstance(response, httpx.Response)
    assert response.status_code == 403, response.text
    body = response.json()
    assert body["type"] == "urn:scalar:problem:forbidden"
    assert [e["field"] for e in body["errors"]] == ["handler"]
    assert "tests.endpoints.handlers" in body["errors"][0]["fix"]  # says what is allowed


def test_a_user_cannot_deploy_a_handler_outside_the_allow_list(api: Secured) -> None:
    with api.client(api.token("team-a")) as user:
        for handler in ("subprocess:run", "os:system", "builtins:exec", "tests.endpoints.handlersx:square"):
            _refused(user.post("/endpoints", json=spec("evil", handler=handler)))
            _refused(user.post("/endpoints", params={"target": "local"}, json=spec("evil", handler=handler)))
        assert user.get("/endpoints").json()["count"] == 0
        created = user.post("/endpoints", json=spec("fine", handler="tests.endpoints.handlers:square"))
        assert created.status_code == 201, created.text
        endpoint_id = created.json()["id"]
        _refused(user.patch(f"/endpoints/{endpoint_id}", json={"handler": "subprocess:run"}))
        assert user.get(f"/endpoints/{endpoint_id}").json()["handler"] == "tests.endpoints.handlers:square"
        changed = user.patch(f"/endpoints/{endpoint_id}", json={"workersMax": 2})  # other fields: fine
        assert changed.status_code == 200, changed.text


def test_an_admin_chooses_any_handler_and_users_may_still_edit_that_endpoint(api: Secured) -> None:
    with api.client(api.admin) as admin:
        created = admin.post(
            "/endpoints", json=spec("gpu", handler="tests.endpoints.gpu_handlers:square_on_gpu")
        )
        assert created.status_code == 201, created.text
        endpoint_id = created.json()["id"]
    with api.client(api.token("default")) as user:  # the admin's tenant: its users keep the handler
        changed = user.patch(f"/endpoints/{endpoint_id}", json={"workersMax": 1})
        assert changed.status_code == 200, changed.text
        assert changed.json()["handler"] == "tests.endpoints.gpu_handlers:square_on_gpu"


@pytest.mark.parametrize(
    ("handler", "allowed", "expected"),
    [
        ("pkg:f", ["pkg"], True),
        ("pkg.sub.mod:f", ["pkg"], True),
        ("pkgx:f", ["pkg"], False),
        ("pkg:f", ["pkg."], False),
        ("pkg.sub:f", ["pkg."], True),
        ("pkg.mod:f", ["pkg.mod:f"], True),
        ("pkg.mod:g", ["pkg.mod:f"], False),
        ("subprocess:run", [], False),
        ("subprocess:run", ["sub"], False),
    ],
)
def test_handler_allowed(handler: str, allowed: list[str], expected: bool) -> None:
    assert handler_allowed(handler, allowed) is expected
