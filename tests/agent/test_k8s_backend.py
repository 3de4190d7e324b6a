"""The Kubernetes backend (``scalar.runtime.k8s_backend``, ``k8s_pods``) against a fake API server on loopback.

The official ``kubernetes`` client talks to ``tests.agent.fake_k8s`` (real HTTP, the API's wire format), whose
kubelet runs each pod's command as a local process: a node bought from the built-in market's ``sfcompute``
gets an agent pod, the real ``python -m scalar.agent`` in it registers with a real controller, runs a job's
command and ships its logs; when the idle block is released the pod is deleted and its processes stop.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from scalar.api.app import create_app
from scalar.engine.config import ControllerConfig
from scalar.runtime import ControlPlane, SettingsError, load_settings
from scalar.runtime.agent_backend import AgentNode
from scalar.runtime.k8s_backend import KubernetesAgents
from scalar.runtime.k8s_pods import KubernetesError, PodsApi, agent_pod, pod_name, pod_state
from scalar.runtime.settings import KubernetesSettings, kubernetes_settings
from tests.agent.fake_k8s import FakeKubernetes, fake_kubernetes
from tests.agent.harness import AGENT_SETTINGS, Clock, free_port, serve_on, wait_until

NS = "scalar"
PRINT_GPUS = (
    "import os, time; print('devices', os.environ['CUDA_VISIBLE_DEVICES'], flush=True); time.sleep(1)"
)


def k8s_settings(**fields: Any) -> KubernetesSettings:
    values: dict[str, Any] = {
        "namespace": NS,
        "controller_url": "http://127.0.0.1:9",
        "image": "registry.example/scalar:test",
        "agent_command": (sys.executable, "-m", "scalar.agent"),
        "fake_gpus": "8xH100-80GB",
        "reconcile_s": 0.3,
        **fields,
    }
    return KubernetesSettings(**values)


@contextmanager
def plane_with_kubernetes(
    sqlite_url: str, tmp_path: Path, fake: FakeKubernetes
) -> Iterator[tuple[ControlPlane, httpx.Client]]:
    """A control plane with the built-in market (``sfcompute`` only) whose nodes get agent pods."""
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(json.dumps(fake.kubeconfig()))  # JSON is YAML
    port = free_port()
    config = ControllerConfig(idle_release_s=1.0, reservation_s=0.0)
    settings = load_settings(
        None,
        {
            **AGENT_SETTINGS,
            "data_dir": tmp_path / "data",
            "database_url": sqlite_url,
            "time_scale": 600.0,
            "market_seed": 7,
            "enabled": ("sfcompute",),
            "controller": config,
            "kubernetes": k8s_settings(kubeconfig=str(kubeconfig), controller_url=f"http://127.0.0.1:{port}"),
        },
        {},
    )
    plane = ControlPlane(settings, clock=Clock(), live_providers=[])
    plane.start()
    try:
        with serve_on(create_app(plane), port) as url, httpx.Client(base_url=url, timeout=10) as http:
            yield plane, http
    finally:
        plane.stop()


def test_a_bought_node_runs_its_agent_as_a_pod_and_the_pod_goes_with_the_block(
    sqlite_url: str, tmp_path: Path
) -> None:
    with (
        fake_kubernetes(tmp_path / "kubelet", namespaces=(NS,)) as fake,
        plane_with_kubernetes(sqlite_url, tmp_path, fake) as (plane, http),
    ):
        assert plane.settings.controller.agent_providers == ("sfcompute",)  # READY only with an agent
        body = {"tier": "FAST", "gpu_count": 2, "expected_duration_sec": 60}
        response = http.post("/jobs", json={**body, "command": ["python", "-c", PRINT_GPUS]})
        assert response.status_code == 201, response.text
        job_id = response.json()["id"]

        def job() -> dict[str, Any]:
            return dict(http.get(f"/jobs/{job_id}").json())

        # the purchase fills, the node boots, the reconciler creates its agent pod
        pods = wait_until(lambda: [p for (ns, _), p in fake.pods.items() if ns == NS], 40, "an agent pod")
        [pod] = pods
        node_id = pod.obj["metadata"]["annotations"]["scalar.dev/node-id"]
        assert pod.obj["metadata"]["name"] == pod_name(node_id)
        [container] = pod.obj["spec"]["containers"]
        assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        cfg = plane.settings.kubernetes
        assert cfg is not None
        assert container["command"][1:5] == ["-m", "scalar.agent", "--controller", cfg.controller_url]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["SCALAR_FAKE_GPUS"] == "8xH100-80GB" and env["SCALAR_JOIN_TOKEN"].startswith("sjt_")
        # the agent in the pod registers for exactly that node, which becomes READY, and runs the job
        running = wait_until(lambda: job() if job()["state"] == "RUNNING" else None, 40, "the job to run")
        [placement] = running["placements"]
        assert placement["node_id"] == node_id
        done = wait_until(lambda: job() if job()["state"] in ("SUCCEEDED", "FAILED") else None, 40, "the job")
        assert done["state"] == "SUCCEEDED", done.get("reason")
        agents = http.get("/agents").json()["agents"]
        assert [a["node_id"] for a in agents] == [node_id]
        uuids = {g["index"]: g["uuid"] for g in agents[0]["facts"]["gpus"]}
        logs = wait_until(
            lambda: http.get(f"/jobs/{job_id}/logs").json()["data"] or None, 20, "the job's logs"
        )
        chosen = [uuids[i] for i in placement["gpu_indices"]]
        assert logs.split() == ["devices", ",".join(chosen)]
        backend = plane.kubernetes
        assert backend is not None
        assert "registered" in backend.logs(node_id)  # the agent's own output, read through the API
        assert wait_until(lambda: backend.states().get(node_id), 10, "the watch").phase == "Running"
        assert fake.processes(NS, pod.obj["metadata"]["name"])  # the agent (and nothing else) runs
        # idle, the block is released: the pod is deleted and everything in it stops
        wait_until(lambda: not fake.pods, 40, "the pod to be deleted")
        assert not fake.processes(NS, pod.obj["metadata"]["name"])
        deletes = [r for r in fake.requests if r[0] == "DELETE"]
        assert len(deletes) == 1 and deletes[0][2] == 200


class Tokens:
    def __init__(self) -> None:
        self.issued: list[str] = []

    def __call__(self, node: AgentNode) -> str:
        self.issued.append(node.node_id)
        return f"sjt_test_{len(self.issued)}"


def node(node_id: str = "n-1", **fields: Any) -> AgentNode:
    values: dict[str, Any] = {
        "node_id": node_id,
        "block_id": "b-1",
        "provider": "sfcompute",
        "tier": "FAST",
        "gpu_count": 8,
        "end_time": None,
        "registered": False,
        **fields,
    }
    return AgentNode(**values)


SLEEPER = (
    sys.executable,
    "-c",
    "import time, sys; print('agent up', sys.argv[1:3], flush=True); time.sleep(60)",
)


def test_reconcile_is_idempotent_adopts_after_a_restart_and_deletes_pods_of_gone_nodes(
    tmp_path: Path,
) -> None:
    with fake_kubernetes(tmp_path / "kubelet", namespaces=(NS,)) as fake:
        wanted = [node("n-1"), node("ordr_7-n0", block_id="ordr_7")]
        tokens = Tokens()
        cfg = k8s_settings(agent_command=SLEEPER)
        api = PodsApi.from_kubeconfig(fake.kubeconfig())  # an in-memory kubeconfig
        backend = KubernetesAgents(api, cfg, lambda: list(wanted), tokens)
        first = backend.reconcile()
        assert sorted(first.created) == ["n-1", "ordr_7-n0"] and not first.errors
        second = backend.reconcile()
        assert sorted(second.kept) == ["n-1", "ordr_7-n0"] and not second.created
        assert len(tokens.issued) == 2  # no new token for a pod that exists
        name = pod_name("n-1")
        wait_until(lambda: "agent up" in api.logs(name) and api.logs(name), 10, "the pod's output")
        assert api.logs(name, tail_lines=1).startswith("agent up ['--controller'")
        # a restarted controller adopts the pods by label; 409 AlreadyExists on a create is not an error
        restarted = KubernetesAgents(
            PodsApi.from_kubeconfig(fake.kubeconfig()), cfg, lambda: list(wanted), tokens
        )
        assert sorted(p.node_id for p in restarted.adopt()) == ["n-1", "ordr_7-n0"]
        state, created = restarted.pods.create(agent_pod(wanted[0], "sjt_again", cfg, NS))
        assert not created and state.name == name
        # a registered node whose pod is gone is not given a new one (its agent's identity went with it)
        api.delete(pod_name("ordr_7-n0"), grace_s=0)
        wait_until(lambda: len(fake.pods) == 1, 10, "the pod to go")
        wanted[1] = replace(wanted[1], registered=True)
        assert not restarted.reconcile().created
        # the node is gone: its pod is deleted, its processes stop; deleting again (404) is fine
        pids = fake.processes(NS, name)
        assert pids
        wanted.clear()
        assert restarted.reconcile().deleted == ["n-1"]
        wait_until(lambda: not fake.pods, 10, "the pod to be deleted")
        assert not fake.processes(NS, name)
        assert restarted.remove("n-1") is False
        assert api.get(name) is None


def test_api_errors_say_what_to_fix(tmp_path: Path) -> None:
    with fake_kubernetes(tmp_path / "kubelet", namespaces=(NS,), forbidden_namespaces=("locked",)) as fake:
        cfg = k8s_settings(agent_command=SLEEPER)
        manifest = agent_pod(node(), "sjt_x", cfg, NS)
        bad_token = PodsApi.from_kubeconfig(fake.kubeconfig(token="wrong"))
        with pytest.raises(KubernetesError) as err:
            bad_token.create(manifest)
        assert err.value.status == 401 and not err.value.retryable
        assert "refused the credentials (401 Unauthorized)" in str(err.value) and "kubeconfig" in str(
            err.value
        )
        locked = PodsApi.from_kubeconfig(fake.kubeconfig(namespace="locked"))
        with pytest.raises(
            KubernetesError, match=r"not allowed in namespace locked \(403 Forbidden\).*Role"
        ) as err:
            locked.list()
        missing = PodsApi.from_kubeconfig(fake.kubeconfig(namespace="nowhere"))
        with pytest.raises(KubernetesError, match=r'404 NotFound.*namespaces "nowhere" not found'):
            missing.list()
        api = PodsApi.from_token(fake.url, fake.token, NS)
        invalid = {**manifest, "metadata": {**manifest["metadata"], "name": "Not_A_Name"}}
        with pytest.raises(KubernetesError, match=r"422 Invalid.*metadata.name.*check \[kubernetes\].image"):
            api.create(invalid)
        fake.fail_next = [429]
        with pytest.raises(KubernetesError, match="429 TooManyRequests") as err:
            api.list()
        assert err.value.retryable
        fake.fail_next = [500]
        with pytest.raises(KubernetesError, match="500") as err:
            api.get("x")
        assert err.value.retryable
        assert api.delete("never-existed") is False  # 404 on delete: already gone
        gone = PodsApi.from_token("http://127.0.0.1:9", fake.token, NS)
        with pytest.raises(KubernetesError, match="cannot reach the Kubernetes API") as err:
            gone.list()
        assert err.value.retryable
        # the reconciler reports a refused create per node and keeps going with the others
        no_image = replace(cfg, image="")
        tokens = Tokens()
        backend = KubernetesAgents(api, no_image, lambda: [node("n-1"), node("n-2")], tokens)
        result = backend.reconcile()
        assert sorted(result.errors) == ["n-1", "n-2"] and not result.created
        assert "spec.containers[0].image: Required value" in result.errors["n-1"]
        assert backend.last_error is not None
        backend.reconcile()
        assert tokens.issued == ["n-1", "n-2"]  # the refused pods' tokens are used again, not remade
        with pytest.raises(KubernetesError, match="401"):  # a pass that cannot even list fails whole
            KubernetesAgents(bad_token, cfg, lambda: [node()], Tokens()).reconcile()


def test_pod_problems_are_surfaced_image_pull_crash_loop_and_oom(tmp_path: Path) -> None:
    with fake_kubernetes(
        tmp_path / "kubelet", namespaces=(NS,), unpullable=("registry.example/missing:1",)
    ) as fake:
        api = PodsApi.from_kubeconfig(fake.kubeconfig())
        crashing = (sys.executable, "-c", "import sys; print('refused', flush=True); sys.exit(3)")
        wanted = [node("n-pull"), node("n-crash")]
        configs = {
            "n-pull": k8s_settings(image="registry.example/missing:1", agent_command=SLEEPER),
            "n-crash": k8s_settings(agent_command=crashing),
        }
        backend = KubernetesAgents(api, configs["n-pull"], lambda: wanted, Tokens())
        stop = threading.Event()
        watcher = threading.Thread(target=backend._watch_loop, args=(stop,), daemon=True)
        watcher.start()
        try:
            for n in wanted:
                api.create(agent_pod(n, "sjt_x", configs[n.node_id], NS))
            problems = wait_until(
                lambda: (
                    backend.problems()
                    if "ImagePullBackOff" in backend.problems().get("n-pull", "")
                    and "CrashLoopBackOff" in backend.problems().get("n-crash", "")
                    else None
                ),
                20,
                "both problems",
            )
            assert "registry.example/missing:1" in problems["n-pull"]
            assert "exit code 3" in problems["n-crash"] and "restarts" in problems["n-crash"]
            name = pod_name("n-crash")
            wait_until(lambda: api.logs(name).strip() == "refused", 10, "the crashed agent's output")
        finally:
            stop.set()
    oom = pod_state(
        {
            "metadata": {"name": "scalar-agent-n", "annotations": {"scalar.dev/node-id": "n"}},
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "restartCount": 1,
                        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}},
                        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
                    }
                ],
            },
        }
    )
    assert oom.problem is not None and "OOMKilled" in oom.problem and "exit code 137" in oom.problem
    unschedulable = pod_state(
        {
            "metadata": {"name": "p"},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                    }
                ],
            },
        }
    )
    assert unschedulable.problem is not None and "Insufficient nvidia.com/gpu" in unschedulable.problem


def test_the_kubernetes_block_is_checked(tmp_path: Path) -> None:
    good = kubernetes_settings(
        {
            "kubeconfig": "~/.kube/sfcompute.yaml",
            "namespace": "team-a",
            "controller_url": "https://scalar.example:8000",
            "image": "registry.example/scalar:0.1.0",
            "fake_gpus": "8xH100-80GB",
        }
    )
    assert good.providers == ("sfcompute",) and good.gpu_resource == "nvidia.com/gpu"
    config = tmp_path / "scalar.toml"
    cases = {
        'server = "https://k"\nkubeconfig = "k"\ncontroller_url = "http://c"\nimage = "i"': "exactly one of",
        'kubeconfig = "k"\nimage = "i"': "[kubernetes].controller_url: is required",
        'kubeconfig = "k"\ncontroller_url = "c:8000"\nimage = "i"': "must be an http(s) URL",
        'kubeconfig = "k"\ncontroller_url = "http://c"\nimage = "i"\nfake_gpus = "lots"': "fake_gpus",
        'kubeconfig = "k"\ncontroller_url = "http://c"\nimage = "i"\nnamespaces = "x"': "unknown setting",
        'kubeconfig = "k"\ncontroller_url = "http://c"\nimage = "i"\nproviders = ["nope"]': "unknown provider",
    }
    for body, expected in cases.items():
        config.write_text("[kubernetes]\n" + body + "\n")
        with pytest.raises(SettingsError) as err:
            load_settings(config, None, {})
        assert expected in str(err.value), (body, str(err.value))
    config.write_text('[kubernetes]\nserver = "https://k"\ncontroller_url = "http://c"\nimage = "i"\n')
    settings = load_settings(config, {"data_dir": tmp_path}, {})
    assert settings.kubernetes is not None and settings.kubernetes.server == "https://k"
    # the token is read from the environment when the control plane opens: empty, it says so
    plane = ControlPlane(replace(settings, database_url=f"sqlite:///{tmp_path}/s.db"), live_providers=[])
    with pytest.raises(SettingsError, match="SCALAR_KUBERNETES_TOKEN"):
        plane.open()
