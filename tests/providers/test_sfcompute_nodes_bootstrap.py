"""SFCompute bought through the nodes API (``[providers.sfcompute] buy_via = "nodes"``): the controller buys with
``POST /v1/nodes`` whose cloud-init user data is the bootstrap script with a join token bound to the node; the
script, run here as cloud-init would run it on the VM, starts a real agent that registers as exactly that
node, which becomes READY and runs a job. SFCompute is faked on loopback (``FakeSFComputeNodes``)."""

from __future__ import annotations

import logging
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from scalar.api.app import create_app
from scalar.domain.market import CapacityRequest, OrderState
from scalar.domain.tier import Tier
from scalar.engine import ControllerConfig
from scalar.providers.bootstrap import AgentBootstrap
from scalar.providers.config import ProviderSettings
from scalar.providers.sfcompute import SFComputeProvider
from scalar.providers.sfcompute.nodes import NodesMode
from scalar.runtime import ControlPlane, SettingsError, load_settings
from scalar.runtime.agents import sha256
from scalar.runtime.prices import real_providers
from scalar.store import agents as agent_repo
from tests.agent.harness import AGENT_SETTINGS, Clock, free_port, serve_on, wait_until
from tests.agent.test_ssh_node_add import stop_agent
from tests.providers.fakeserver import FakeServer, Reply
from tests.runtime.live_fakes import FAST_RETRY, FakeSFComputeNodes, sample, serve_samples

PRINT_GPUS = (
    "import os, time; print('devices', os.environ['CUDA_VISIBLE_DEVICES'], flush=True); time.sleep(1)"
)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        serve_samples(fake)
        # a book deep enough to buy from: 20 nodes at $16.00/node-hour ($2.00/GPU-hour)
        quote = sample("sfcompute", "sfcompute_preview_v2_orderbook_quote_response.json")
        quote["best_ask"] = {"dollars_per_node_hour": "16.000000", "node_count": 20}
        depth = sample("sfcompute", "sfcompute_preview_v2_orderbook_depth_response.json")
        depth["asks"] = [{"dollars_per_node_hour": "16.000000", "node_count": 20}]
        fake.route("GET", "/preview/v2/orderbook/quote", Reply.json(quote))
        fake.route("GET", "/preview/v2/orderbook/depth", Reply.json(depth))
        yield fake


@contextmanager
def plane_buying_nodes(
    server: FakeServer, db_url: str, tmp_path: Path, clock: Clock, toml: str
) -> Iterator[tuple[ControlPlane, httpx.Client, str]]:
    """A control plane whose only seller is the live SFCompute client (on ``server``), configured by ``toml``
    (``{url}`` is the controller's own URL), served on loopback."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = tmp_path / "scalar.toml"
    config.write_text(toml.replace("{url}", url))
    group = {"name": "sf", "providers": ["sfcompute"], "instance_types": ["8xH100"], "max_slices": 2}
    overrides = {
        **AGENT_SETTINGS,
        "data_dir": tmp_path / "data",
        "database_url": db_url,
        "price_interval_s": 0.5,
        "controller": ControllerConfig.from_dict(
            {"scale_groups": [group], "idle_release_s": 3600, "reservation_s": 0}
        ),
    }
    settings = load_settings(config, overrides, {})
    env = {
        "SCALAR_SFCOMPUTE_BASE_URL": server.url,
        "SCALAR_SFCOMPUTE_API_KEY": "sf-test",
        "SCALAR_SFCOMPUTE_PRICES_INTERVAL_S": "0.5",
    }
    plane = ControlPlane(settings, clock=clock, live_providers=real_providers(env, retry=FAST_RETRY))
    plane.start()
    try:
        with serve_on(create_app(plane), port) as served, httpx.Client(base_url=served, timeout=10) as http:
            yield plane, http, served
    finally:
        plane.stop()


NODES_TOML = f"""
[providers]
enabled = ["sfcompute"]

[providers.sfcompute]
buy_via = "nodes"
controller_url = "{{url}}"
image_id = "image_scalar-test"
python = "{sys.executable}"
join_token_ttl_s = 600
"""


def test_a_node_bought_through_the_nodes_api_boots_its_agent_from_user_data(
    server: FakeServer, sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    fake = FakeSFComputeNodes(server, clock)
    home = tmp_path / "vm"
    home.mkdir()
    with plane_buying_nodes(server, sqlite_url, tmp_path, clock, NODES_TOML) as (plane, http, url):
        assert plane.settings.controller.agent_providers == ("sfcompute",)  # READY only with an agent
        body = {"tier": "FAST", "gpu_count": 2, "expected_duration_sec": 600}
        response = http.post("/jobs", json={**body, "command": [sys.executable, "-c", PRINT_GPUS]})
        assert response.status_code == 201, response.text
        job_id = response.json()["id"]

        def job() -> dict[str, Any]:
            return dict(http.get(f"/jobs/{job_id}").json())

        [create] = wait_until(lambda: list(fake.creates), 40, "POST /v1/nodes")
        sent = create.json()
        [node_id] = sent["names"]
        assert create.headers["authorization"] == "Bearer sf-test"
        assert not [r for r in server.requests if r.path == "/v0/orders"]  # nothing through v0 orders
        # SFCompute's units: integer cents per node-hour ($2.00/GPU-hour x 8 GPUs), Unix seconds, hour end
        assert sent["desired_count"] == 1 and sent["max_price_per_node_hour"] == 1600
        assert sent["end_at"] % 3600 == 0 and sent["end_at"] - sent["start_at"] >= 3600
        assert (sent["node_type"], sent["image_id"], sent["any_zone"]) == (
            "autoreserved",
            "image_scalar-test",
            True,
        )
        script = fake.user_data(node_id)
        parsed = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
        assert parsed.returncode == 0, parsed.stderr
        [token_line] = [line for line in script.splitlines() if line.startswith("export SCALAR_JOIN_TOKEN=")]
        token = shlex.split(token_line.split("=", 1)[1])[0]
        assert plane.store is not None
        with plane.store.read() as tx:
            stored = agent_repo.get_join_token(tx.conn, sha256(token))
        assert stored is not None and stored.node_id == node_id and stored.provider == "sfcompute"
        assert stored.used_at is None and stored.expires_at <= clock() + timedelta(seconds=600)
        assert f"--controller {url}" in script and f"--instance-id {node_id}" in script

        # The engine knows the node (held before READY); the contract starts at the next minute.
        wait_until(
            lambda: any(n["node_id"] == node_id for n in http.get("/nodes").json()["nodes"]), 20, "node"
        )
        clock.advance(61)

        def node_state() -> str | None:
            nodes = http.get("/nodes").json()["nodes"]
            return next((str(n["state"]) for n in nodes if n["node_id"] == node_id), None)

        # SFCompute's side says the contract started; without its agent the node is held, not READY
        assert wait_until(lambda: node_state() == "initializing", 20, "the contract to start")
        directory = home / ".scalar-agent"
        try:  # cloud-init runs the user data on the VM: here, with fake GPUs and this Python
            env = {"HOME": str(home), "SCALAR_FAKE_GPUS": "8xH100-80GB", "PATH": "/usr/bin:/bin"}
            started = subprocess.run(
                ["bash", "-c", script], capture_output=True, text=True, timeout=120, env=env
            )
            assert started.returncode == 0, started.stderr
            [registered] = wait_until(lambda: http.get("/agents").json()["agents"], 30, "the agent")
            assert registered["node_id"] == node_id and registered["provider"] == "sfcompute"
            running = wait_until(lambda: job() if job()["state"] != "PENDING" else None, 60, "the job")
            [placement] = running["placements"]
            assert placement["node_id"] == node_id
            done = wait_until(lambda: job() if job()["state"] in ("SUCCEEDED", "FAILED") else None, 60, "job")
            assert done["state"] == "SUCCEEDED", done.get("reason")
            [node] = [n for n in http.get("/nodes").json()["nodes"] if n["node_id"] == node_id]
            assert node["state"] == "ready"
            logs = wait_until(lambda: http.get(f"/jobs/{job_id}/logs").json()["data"] or None, 20, "logs")
            uuids = {g["index"]: g["uuid"] for g in registered["facts"]["gpus"]}
            assert logs.split() == ["devices", ",".join(uuids[i] for i in placement["gpu_indices"])]
            with plane.store.read() as tx:
                spent = agent_repo.get_join_token(tx.conn, sha256(token))
            assert spent is not None and spent.used_by == node_id
        finally:
            stop_agent(directory)
    # the token went to SFCompute in the user data only: not stored (its hash is) nor logged
    database = Path(sqlite_url.removeprefix("sqlite:///"))
    stored_bytes = b"".join(p.read_bytes() for p in database.parent.glob(database.name + "*"))
    assert token.encode() not in stored_bytes and sha256(token).encode() in stored_bytes
    assert token not in caplog.text


def nodes_client(server: FakeServer, mode: NodesMode | None) -> SFComputeProvider:
    settings = ProviderSettings("sfcompute", server.url, "sk-test", enabled=True)
    return SFComputeProvider(settings, retry=FAST_RETRY, sleep=lambda s: None, nodes=mode)


def test_the_default_mode_sends_no_user_data_and_nodes_mode_is_idempotent(server: FakeServer) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    fake = FakeSFComputeNodes(server, lambda: now)
    request = CapacityRequest(
        provider="sfcompute",
        instance_type="8xH100",
        node_count=2,
        duration_s=7200,
        limit_price_per_gpu_hour=Decimal("2.01"),
        tier=Tier.FAST,
        gpu_model="H100",
    )
    server.route("POST", "/v0/orders", Reply.json({"object": "order", "status": "pending", "id": "o1"}, 201))
    default = nodes_client(server, None)
    assert default.buy(request, "act-1", now).state is OrderState.PENDING
    [order] = [r for r in server.requests if r.path == "/v0/orders"]
    assert "cloud_init_user_data" not in order.json() and not fake.creates
    assert load_settings(None, {}, {}).providers.sfcompute is None  # the default: v0 orders

    tokens: list[str] = []

    def token_for(node: str) -> str:
        tokens.append(f"sjt_{node}")
        return tokens[-1]

    mode = NodesMode(token_for, AgentBootstrap("http://c:1", ""))
    client = nodes_client(server, mode)
    bought = client.buy(request, "act-2", now)
    assert bought.state is OrderState.FILLED and bought.block is not None
    assert [r.json()["names"] for r in fake.creates] == [[n] for n in bought.block.node_ids]
    assert tokens == [f"sjt_{n}" for n in bought.block.node_ids]  # one token per node, bound to it
    assert {r.json()["max_price_per_node_hour"] for r in fake.creates} == {1608}  # 2.01 x 8 x 100, cents
    assert bought.block.price_per_gpu_hour == Decimal("2.01")
    # a retry with the same key (a restarted client) creates no node twice: SFCompute dedupes by key
    again = nodes_client(server, mode).buy(request, "act-2", now)
    assert again.block is not None and again.block.node_ids == bought.block.node_ids
    assert len(fake.creates) == 2
    assert client.get_order("act-2", now) == bought


@pytest.mark.parametrize(
    ("toml", "key", "says"),
    [
        ('buy_via = "nodes"', "[providers.sfcompute].controller_url", "is required"),
        ('buy_via = "nodes"\ncontroller_url = "ftp://x"', "[providers.sfcompute].controller_url", "http(s)"),
        ('buy_via = "vms"', "[providers.sfcompute].buy_via", "orders, nodes"),
        ('node_type = "spot"', "[providers.sfcompute].node_type", "autoreserved, reserved"),
        ('image = "x"', "[providers.sfcompute].image", "use one of buy_via"),
        ("join_token_ttl_s = 0", "[providers.sfcompute].join_token_ttl_s", "> 0"),
    ],
)
def test_a_bad_nodes_setting_names_the_key(tmp_path: Path, toml: str, key: str, says: str) -> None:
    path = tmp_path / "scalar.toml"
    path.write_text(f"[providers.sfcompute]\n{toml}\n")
    with pytest.raises(SettingsError) as caught:
        load_settings(path, {"data_dir": tmp_path}, {})
    assert caught.value.key == key and says in str(caught.value)


def test_the_fake_refuses_what_sfcompute_refuses(server: FakeServer) -> None:
    now = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
    FakeSFComputeNodes(server, lambda: now)
    hour = int(now.replace(minute=0, second=0).timestamp()) + 3600
    good = {
        "desired_count": 1,
        "any_zone": True,
        "max_price_per_node_hour": 1600,
        "start_at": int(now.timestamp()),
        "end_at": hour + 3600,
        "node_type": "autoreserved",
        "names": ["n-a"],
        "cloud_init_user_data": "IyEvYmluL2Jhc2gK",
    }
    bad: list[dict[str, Any]] = [
        {"max_price_per_node_hour": 16.0},  # dollars, not integer cents
        {"end_at": hour + 1800},  # not on the hour
        {"start_at": hour - 1800},  # neither now nor a future hour
        {"cloud_init_user_data": "not base64!"},
        {"names": ["n-a", "n-b"]},  # more names than nodes
        {"node_type": "spot"},
    ]
    with httpx.Client(base_url=server.url) as http:
        for change in bad:
            answer = http.post("/v1/nodes", json={**good, **change})
            assert answer.status_code == 400, change
            assert answer.json()["error"]["type"] == "invalid_request_error"
        created = http.post("/v1/nodes", json=good)
        assert created.status_code == 201 and created.json()["data"][0]["name"] == "n-a"
