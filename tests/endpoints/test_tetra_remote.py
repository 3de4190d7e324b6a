"""tetra-rp's ``@remote`` deploying onto Scalar's fleet, with only RunPod's environment variables changed:
``RUNPOD_API_BASE_URL`` (its ``/graphql``: ``saveEndpoint``, ``deleteEndpoint``, ``myself``),
``RUNPOD_ENDPOINT_BASE_URL`` (``/v2``), ``RUNPOD_REST_API_URL``, ``RUNPOD_HAPI_URL``, ``RUNPOD_CONSOLE_URL``
and ``RUNPOD_API_KEY`` (a Scalar user token). The unmodified tetra-rp 0.25.2 application
(``runpod_workers/tetra_app.py``) runs in its own process against a real control plane with auth on and a
real node agent; its endpoint's workers run Scalar's executor (``scalar.agent.function_worker``) with the
test's interpreter (the agent's ``SCALAR_PYTHON``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.agent.harness import Controller, agent, controller, kill_tree_of, wait_until

APP_DIR = Path(__file__).parent / "runpod_workers"


def runpod_env(url: str, token: str) -> dict[str, str]:
    """This process's environment with RunPod's URLs pointed at Scalar and a Scalar token as the key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "TETRA_", "FLASH_"))}
    env.update(
        RUNPOD_API_KEY=token,
        RUNPOD_API_BASE_URL=url,
        RUNPOD_ENDPOINT_BASE_URL=f"{url}/v2",
        RUNPOD_REST_API_URL=f"{url}/v1",
        RUNPOD_HAPI_URL=url,
        RUNPOD_CONSOLE_URL=f"{url}/console",
    )
    return env


@contextmanager
def secured_fleet(db_url: str, tmp_path: Path) -> Iterator[tuple[Controller, str]]:
    """A control plane with auth on, a node agent with two H100s, and a user token of tenant team-tetra."""
    with controller(db_url, tmp_path, auth_required=True) as c:
        admin = c.plane.create_token("default", "admin", "test admin").token
        c.http.headers["Authorization"] = f"Bearer {admin}"
        user = c.plane.create_token("team-tetra", "user", "tetra app").token
        node = agent(c.url, c.token(), tmp_path / "a", "2xH100-80GB").start()
        try:
            wait_until(c.agents, 30, "registration")
            yield c, user
        finally:
            node.stop()
            kill_tree_of(tmp_path / "a")


def run_app(script: str, arg: str, env: dict[str, str], cwd: Path, timeout_s: float = 240) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(APP_DIR / script), arg],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (
        f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    )
    return dict(json.loads(lines[-1].removeprefix("RESULT ")))


def test_a_tetra_remote_function_deploys_runs_and_is_deleted_on_scalar(
    sqlite_url: str, tmp_path: Path
) -> None:
    with secured_fleet(sqlite_url, tmp_path) as (c, token):
        app_dir = tmp_path / "app"  # tetra-rp keeps its deployed resources under .runpod/ here
        app_dir.mkdir()
        out = run_app("tetra_app.py", "7", runpod_env(c.url, token), app_dir)
        assert out["result"]["square"] == 49, out
        assert out["result"]["greeting"] == "hello from the spec"  # template.env reached the worker
        assert "system_dependencies" in out["system_dependencies_error"], out
        [eid] = out["endpoint_ids"]
        assert out["undeployed"] == [True]

        view = c.http.get(f"/endpoints/{eid}").json()
        assert view["tenant"] == "team-tetra" and view["state"] == "deleted"
        spec = view["spec"]
        assert spec["env"]["RUNPOD_SKIP_AUTO_SYSTEM_CHECKS"] == "true"  # every worker the tests start
        assert spec["containerDiskInGb"] == 64 and spec["imageName"].startswith("runpod/tetra-rp:")
        assert spec["command"][-1].endswith("-m scalar.agent.function_worker")
        assert out["result"]["pod"].startswith("wk-")  # it ran as an agent-run RunPod worker
        requests = c.http.get(f"/endpoints/{eid}").json()["health"]["jobs"]
        assert requests["completed"] == 1 and requests["failed"] == 1


def test_graphql_is_the_callers_tenants_and_refuses_what_it_does_not_serve(
    sqlite_url: str, tmp_path: Path
) -> None:
    save = "mutation saveEndpoint($input: EndpointInput!) { saveEndpoint(input: $input) { id templateId } }"
    spec = {
        "name": "mine",
        "gpuIds": "ADA_80_PRO",
        "template": {
            "imageName": "example/infer:1",
            "containerDiskInGb": 20,
            "env": [{"key": "A", "value": "1"}],
        },
    }
    with controller(sqlite_url, tmp_path, auth_required=True) as c:
        tokens = {t: c.plane.create_token(t, "user", t).token for t in ("team-a", "team-b")}

        def gql(tenant: str | None, query: str, **variables: Any) -> Any:
            headers = {} if tenant is None else {"Authorization": f"Bearer {tokens[tenant]}"}
            body = {"query": query, "variables": variables}
            return httpx.post(f"{c.url}/graphql", json=body, headers=headers, timeout=30)

        assert gql(None, "{ myself { endpoints { id } } }").status_code == 401
        created = gql("team-a", save, input=spec).json()["data"]["saveEndpoint"]
        eid, tid = created["id"], created["templateId"]
        template = "query getTemplate($id: String!) { podTemplate(id: $id) { id env { key value } containerDiskInGb } }"
        assert gql("team-a", template, id=tid).json()["data"]["podTemplate"] == {
            "id": tid,
            "env": [{"key": "A", "value": "1"}],
            "containerDiskInGb": 20,
        }
        # team-b sees none of it: not in its list, not by id, not its template, and cannot delete it
        mine = "query getEndpoint($id: String!) { myself { endpoints { id } endpoint(id: $id) { id } } }"
        assert gql("team-b", mine, id=eid).json()["data"]["myself"] == {"endpoints": [], "endpoint": None}
        assert gql("team-b", template, id=tid).json()["data"]["podTemplate"] is None
        delete = "mutation deleteEndpoint($id: String!) { deleteEndpoint(id: $id) }"
        refused = gql("team-b", delete, id=eid).json()
        assert refused["errors"][0]["extensions"]["field"] == "id"
        updated = gql("team-b", save, input={**spec, "id": eid}).json()
        assert "no endpoint" in updated["errors"][0]["message"]
        assert gql("team-a", mine, id=eid).json()["data"]["myself"]["endpoint"] == {"id": eid}

        # runpod-flash's saveTemplate changes the endpoint's env and disk
        save_template = "mutation saveTemplate($input: SaveTemplateInput) { saveTemplate(input: $input) { id env { key value } } }"
        changed = gql(
            "team-a",
            save_template,
            input={"id": tid, "env": [{"key": "B", "value": "2"}], "containerDiskInGb": 30},
        ).json()
        assert changed["data"]["saveTemplate"]["env"] == [{"key": "B", "value": "2"}], changed
        stored = c.plane.endpoints.get(eid)
        assert stored is not None and stored.spec["env"] == {"B": "2"}
        assert stored.spec["containerDiskInGb"] == 30

        # an operation Scalar does not serve is named; bad input names its field; never a 500
        flash_apps = gql("team-a", "query { myself { flashApps { id } } }").json()
        assert "'flashApps' is not served" in flash_apps["errors"][0]["message"]
        bad = gql("team-a", save, input={**spec, "name": "other", "workersMax": -3}).json()
        assert bad["errors"][0]["extensions"]["field"] == "workersMax"
        bad = gql("team-a", save, input={**spec, "name": "other", "networkVolumeId": "vol-1"}).json()
        assert bad["errors"][0]["extensions"]["field"] == "networkVolumeId"
        unknown = gql("team-a", save, input={**spec, "name": "other", "handler": "os:system"}).json()
        assert "unknown field 'handler'" in unknown["errors"][0]["message"] and unknown["data"] is None
        syntax = httpx.post(
            f"{c.url}/graphql",
            json={"query": "{ myself {"},
            headers={"Authorization": f"Bearer {tokens['team-a']}"},
        )
        assert syntax.status_code == 422 and syntax.headers["content-type"] == "application/problem+json"
        assert syntax.json()["errors"][0]["field"] == "query" and "not GraphQL" in syntax.json()["detail"]
        assert gql("team-a", delete, id=eid).json() == {"data": {"deleteEndpoint": None}}
        assert gql("team-a", mine, id=eid).json()["data"]["myself"] == {"endpoints": [], "endpoint": None}


def test_a_runpod_flash_remote_function_deploys_runs_and_is_deleted_on_scalar(
    sqlite_url: str, tmp_path: Path
) -> None:
    with secured_fleet(sqlite_url, tmp_path) as (c, token):
        app_dir = tmp_path / "app"
        app_dir.mkdir()
        # no stored runpod-flash credentials (HOME); the live flow `flash run` uses (FLASH_IS_LIVE_PROVISIONING)
        env = {**runpod_env(c.url, token), "HOME": str(app_dir), "FLASH_IS_LIVE_PROVISIONING": "true"}
        out = run_app("flash_app.py", "6", env, app_dir)
        assert out["result"]["square"] == 36, out
        assert out["result"]["greeting"] == "hello from the spec"
        assert "system_dependencies" in out["system_dependencies_error"], out
        [eid] = out["endpoint_ids"]
        assert out["undeployed"] == [True]
        view = c.http.get(f"/endpoints/{eid}").json()
        assert view["tenant"] == "team-tetra" and view["state"] == "deleted"
        assert view["spec"]["env"]["RUNPOD_SKIP_AUTO_SYSTEM_CHECKS"] == "true"
        assert view["spec"]["imageName"].startswith("runpod/flash:")
        assert out["result"]["pod"].startswith("wk-")


def test_graphql_refuses_a_query_that_repeats_a_list_beyond_the_bound(
    sqlite_url: str, tmp_path: Path
) -> None:
    from scalar.api.routes_graphql import MAX_FIELDS

    with controller(sqlite_url, tmp_path) as c:
        aliases = " ".join(f"a{i}: endpoints {{ id }}" for i in range(MAX_FIELDS))
        wide = c.http.post("/graphql", json={"query": f"{{ myself {{ {aliases} }} }}"})
        assert wide.status_code == 422 and "more than" in wide.json()["detail"]
        # a fragment counts with its fields wherever it is spread (200 spreads of 2 fields each, plus the spreads)
        spreads = " ".join("...F" for _ in range(200))
        spread = f"fragment F on User {{ endpoints {{ id }} }} {{ myself {{ {spreads} }} }}"
        assert c.http.post("/graphql", json={"query": spread}).status_code == 422
        few = " ".join(f"a{i}: endpoints {{ id }}" for i in range(5))
        assert c.http.post("/graphql", json={"query": f"{{ myself {{ {few} }} }}"}).json() == {
            "data": {"myself": {f"a{i}": [] for i in range(5)}}
        }
