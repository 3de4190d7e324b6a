"""The Kubernetes API for Scalar's agent pods, through the official ``kubernetes`` client.

- ``agent_pod``: the pod that runs one bought node's agent (command, env, GPU requests, labels);
- ``PodState`` / ``pod_state``: what Scalar reads of a pod (phase, the reason it waits or ended, exit code,
  restarts) and ``PodState.problem``, a sentence when the agent does not run as it should;
- ``PodsApi``: create (409 AlreadyExists: the existing pod), get, list by label, watch, delete (404: already
  gone), log, in one namespace; every API error becomes a ``KubernetesError`` that says what to fix.

The reconciler that decides which pods should exist is ``scalar.runtime.k8s_backend``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalar.providers.base import ProviderError
from scalar.runtime.agent_backend import AgentNode
from scalar.runtime.settings import KubernetesSettings

log = logging.getLogger(__name__)

KUBERNETES = "kubernetes"
POD_PREFIX = "scalar-agent-"
CONTAINER = "agent"
STATE_MOUNT = "/scalar"  # an emptyDir: the agent's state survives a container restart, not the pod
LABELS = {"app.kubernetes.io/managed-by": "scalar", "app.kubernetes.io/component": "agent"}
SELECTOR = ",".join(f"{k}={v}" for k, v in LABELS.items())
NODE_LABEL = "scalar.dev/node"
BLOCK_LABEL = "scalar.dev/block"
NODE_ANNOTATION = "scalar.dev/node-id"  # the exact id (a label value is limited to 63 characters)
REQUEST_TIMEOUT_S = 15.0
WATCH_TIMEOUT_S = 30


class KubernetesError(ProviderError):
    """A Kubernetes API call failed: ``status`` (HTTP, 0 for no answer), ``reason`` (the Status reason) and
    a message that says what to do."""

    def __init__(self, message: str, status: int = 0, reason: str = "", retryable: bool = False) -> None:
        super().__init__(KUBERNETES, message, retryable=retryable)
        self.status = status
        self.reason = reason


class KubernetesConfigError(Exception):
    """The ``[kubernetes]`` block names a kubeconfig or token that cannot be used."""


def pod_name(node_id: str) -> str:
    """``scalar-agent-<node>`` as a DNS-1123 name; a node id that needs changing gets a hash suffix."""
    slug = re.sub(r"[^a-z0-9-]+", "-", node_id.lower()).strip("-")
    if slug == node_id and len(POD_PREFIX) + len(slug) <= 63:
        return POD_PREFIX + slug
    digest = hashlib.sha256(node_id.encode()).hexdigest()[:8]
    return f"{POD_PREFIX}{slug[: 63 - len(POD_PREFIX) - 9].strip('-')}-{digest}"


def _label_value(text: str) -> str:
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63]
    return value.strip("-_.") or "x"


# ---- pods as data ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodState:
    """What Scalar reads of one agent pod. ``reason``/``message``: why it waits or why it ended."""

    name: str
    node_id: str
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    reason: str | None = None
    message: str | None = None
    exit_code: int | None = None
    restarts: int = 0
    deleting: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def problem(self) -> str | None:
        """A sentence when the agent in this pod is not running as it should, else ``None``."""
        trouble = self.reason in PROBLEM_REASONS or self.phase in ("Failed", "Succeeded", "Unknown")
        if not trouble and not (self.restarts and self.exit_code not in (None, 0)):
            return None
        what = f"agent pod {self.name} ({self.phase}"
        what += f", {self.reason}" if self.reason else ""
        what += f", exit code {self.exit_code}" if self.exit_code is not None else ""
        what += f", {self.restarts} restarts" if self.restarts else ""
        what += ")"
        return f"{what}: {self.message}" if self.message else what


PROBLEM_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "OOMKilled",
        "Error",
        "Unschedulable",
        "Evicted",
        "DeadlineExceeded",
    }
)


def pod_state(pod: Mapping[str, Any]) -> PodState:
    """Read a pod (the API's JSON: ``metadata``, ``status.phase``, ``containerStatuses``, conditions)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    labels = dict(meta.get("labels") or {})
    annotations = meta.get("annotations") or {}
    node_id = str(annotations.get(NODE_ANNOTATION) or labels.get(NODE_LABEL) or "")
    reason = status.get("reason")
    message = status.get("message")
    exit_code = None
    restarts = 0
    for cs in status.get("containerStatuses") or []:
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        last = (cs.get("lastState") or {}).get("terminated") or {}
        if "waiting" in state and (state["waiting"] or {}).get("reason"):
            reason = state["waiting"].get("reason")
            message = state["waiting"].get("message") or message
            if last:
                exit_code = last.get("exitCode")
                if last.get("reason") == "OOMKilled":
                    message = f"{message + '; ' if message else ''}last run was OOMKilled"
        elif state.get("terminated"):
            done = state["terminated"]
            reason = done.get("reason") or reason
            message = done.get("message") or message
            exit_code = done.get("exitCode")
        elif last:
            exit_code = last.get("exitCode")
            if last.get("reason") in PROBLEM_REASONS and not reason:
                message = f"last run ended {last.get('reason')} (exit code {exit_code})"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and not reason:
            reason = cond.get("reason")
            message = cond.get("message") or message
    return PodState(
        name=str(meta.get("name") or ""),
        node_id=node_id,
        phase=str(status.get("phase") or "Pending"),
        reason=reason,
        message=message,
        exit_code=None if exit_code is None else int(exit_code),
        restarts=restarts,
        deleting=bool(meta.get("deletionTimestamp")),
        labels=labels,
    )


def agent_pod(node: AgentNode, join_token: str, cfg: KubernetesSettings, namespace: str) -> dict[str, Any]:
    """The pod that runs ``node``'s agent: its command, env (join token, fake GPUs), GPU requests, labels."""
    command = [*cfg.agent_command, "--controller", cfg.controller_url, "--state-dir", "state"]
    command += ["--instance-id", node.node_id]
    if node.end_time:
        command += ["--contract-expires-at", node.end_time]
    env = [{"name": "SCALAR_JOIN_TOKEN", "value": join_token}]
    if cfg.fake_gpus:
        env.append({"name": "SCALAR_FAKE_GPUS", "value": cfg.fake_gpus})
    resources: dict[str, Any] = {}
    if cfg.gpu_resource and node.gpu_count > 0:
        gpus = {cfg.gpu_resource: str(node.gpu_count)}
        resources = {"requests": dict(gpus), "limits": dict(gpus)}
    labels = {**LABELS, NODE_LABEL: _label_value(node.node_id), BLOCK_LABEL: _label_value(node.block_id)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(node.node_id),
            "namespace": namespace,
            "labels": labels,
            "annotations": {NODE_ANNOTATION: node.node_id, "scalar.dev/block-id": node.block_id},
        },
        "spec": {
            "restartPolicy": "OnFailure",  # a crashed agent restarts with its state (the emptyDir) kept
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {
                    "name": CONTAINER,
                    "image": cfg.image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": command,
                    "workingDir": STATE_MOUNT,
                    "env": env,
                    "resources": resources,
                    "volumeMounts": [{"name": "state", "mountPath": STATE_MOUNT}],
                }
            ],
            "volumes": [{"name": "state", "emptyDir": {}}],
        },
    }


# ---- the API ---------------------------------------------------------------------------------------------


def _status_of(err: Any) -> tuple[int, str, str]:
    """(code, reason, message) of an ``ApiException``: its body is the API's ``Status`` object."""
    status = int(getattr(err, "status", 0) or 0)
    reason = str(getattr(err, "reason", "") or "")
    message = ""
    body = getattr(err, "body", None)
    if body:
        try:
            data = json.loads(body)
        except (TypeError, ValueError):
            data = None
        if isinstance(data, dict):
            reason = str(data.get("reason") or reason)
            message = str(data.get("message") or "")
    return status, reason, message


def api_error(err: Any, doing: str, namespace: str, host: str) -> KubernetesError:
    """Map an ``ApiException`` of ``doing`` (``create pod scalar-agent-x``) to a message that says the fix."""
    status, reason, message = _status_of(err)
    said = f" ({message})" if message else ""
    if status == 401:
        text = (
            f"{doing}: the Kubernetes API at {host} refused the credentials (401 {reason or 'Unauthorized'})"
            f"{said}; the token is wrong or expired: update [kubernetes].kubeconfig (or the token_env variable)"
        )
        return KubernetesError(text, status, reason)
    if status == 403:
        text = (
            f"{doing}: not allowed in namespace {namespace} (403 {reason or 'Forbidden'}){said}; give these "
            f"credentials a Role with pods: create, get, list, watch, delete and pods/log: get there, or set "
            f"[kubernetes].namespace to the namespace you were given"
        )
        return KubernetesError(text, status, reason)
    if status == 404:
        text = f"{doing}: not found (404 {reason or 'NotFound'}){said}; does namespace {namespace} exist?"
        return KubernetesError(text, status, reason)
    if status == 409:
        return KubernetesError(f"{doing}: conflict (409 {reason or 'AlreadyExists'}){said}", status, reason)
    if status == 422:
        text = (
            f"{doing}: the API refused the pod as invalid (422 {reason or 'Invalid'}){said}; check "
            f"[kubernetes].image, agent_command and gpu_resource"
        )
        return KubernetesError(text, status, reason)
    if status == 429:
        text = (
            f"{doing}: the Kubernetes API is throttling requests (429 TooManyRequests){said}; retrying later"
        )
        return KubernetesError(text, status, reason, retryable=True)
    if status >= 500:
        text = f"{doing}: the Kubernetes API failed ({status} {reason}){said}; retrying later"
        return KubernetesError(text, status, reason, retryable=True)
    return KubernetesError(f"{doing}: HTTP {status} {reason}{said}", status, reason, retryable=status == 0)


class PodsApi:
    """The namespaced pod calls Scalar makes, through the official ``kubernetes`` client."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        from kubernetes import client

        self.api_client = api_client
        self.namespace = namespace
        self.core = client.CoreV1Api(api_client)
        self.host = str(api_client.configuration.host)

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | Path | Mapping[str, Any],
        namespace: str | None = None,
        context: str | None = None,
    ) -> PodsApi:
        """From a kubeconfig file or the same as a dict (``clusters``, ``users``, ``contexts``); the namespace
        defaults to the context's, else ``default``."""
        from kubernetes import client, config

        configuration = client.Configuration()
        try:
            if isinstance(kubeconfig, Mapping):
                data = dict(kubeconfig)
                config.load_kube_config_from_dict(data, context=context, client_configuration=configuration)
            else:
                path = Path(kubeconfig).expanduser()
                import yaml

                data = yaml.safe_load(path.read_text()) or {}
                config.load_kube_config(str(path), context=context, client_configuration=configuration)
        except (OSError, ValueError, KeyError, TypeError, config.ConfigException) as err:
            raise KubernetesConfigError(f"[kubernetes].kubeconfig: cannot use it: {err}") from None
        return cls(
            client.ApiClient(configuration), namespace or _context_namespace(data, context) or "default"
        )

    @classmethod
    def from_token(cls, server: str, token: str, namespace: str | None = None) -> PodsApi:
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = server.rstrip("/")
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return cls(client.ApiClient(configuration), namespace or "default")

    @classmethod
    def from_settings(cls, cfg: KubernetesSettings, env: Mapping[str, str] | None = None) -> PodsApi:
        if cfg.kubeconfig:
            return cls.from_kubeconfig(cfg.kubeconfig, cfg.namespace, cfg.context)
        environ = os.environ if env is None else env
        token = (environ.get(cfg.token_env) or "").strip()
        if not token:
            raise KubernetesConfigError(
                f"[kubernetes].server is set but the environment variable {cfg.token_env} (token_env) holding "
                "the bearer token is empty; export it or use kubeconfig = PATH"
            )
        return cls.from_token(str(cfg.server), token, cfg.namespace)

    def close(self) -> None:
        try:
            self.api_client.close()
        except Exception:  # a pool already closed: nothing to do
            log.debug("closing the Kubernetes client failed", exc_info=True)

    def _call(self, doing: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, _request_timeout=REQUEST_TIMEOUT_S, **kwargs)
        except ApiException as err:
            raise api_error(err, doing, self.namespace, self.host) from None
        except HTTPError as err:
            raise KubernetesError(
                f"{doing}: cannot reach the Kubernetes API at {self.host}: {err}; check [kubernetes].server "
                f"or the kubeconfig's cluster address, and the network",
                retryable=True,
            ) from None

    def _plain(self, obj: Any) -> dict[str, Any]:
        return dict(self.api_client.sanitize_for_serialization(obj))

    def create(self, manifest: Mapping[str, Any]) -> tuple[PodState, bool]:
        """Create the pod; one that already exists (409 AlreadyExists) is read instead: ``(state, created)``."""
        name = str(manifest["metadata"]["name"])
        try:
            pod = self._call(f"create pod {name}", self.core.create_namespaced_pod, self.namespace, manifest)
        except KubernetesError as err:
            if err.status != 409:
                raise
            existing = self.get(name)
            if existing is None:  # deleted between the two calls: let the next pass create it again
                raise KubernetesError(
                    f"pod {name} exists and is being deleted", 409, retryable=True
                ) from None
            return existing, False
        return pod_state(self._plain(pod)), True

    def get(self, name: str) -> PodState | None:
        try:
            pod = self._call(f"get pod {name}", self.core.read_namespaced_pod, name, self.namespace)
        except KubernetesError as err:
            if err.status == 404:
                return None
            raise
        return pod_state(self._plain(pod))

    def list(self) -> list[PodState]:
        """Scalar's agent pods in the namespace (by label)."""
        pods = self._call(
            f"list pods in {self.namespace}",
            self.core.list_namespaced_pod,
            self.namespace,
            label_selector=SELECTOR,
        )
        return [pod_state(self._plain(p)) for p in pods.items]

    def delete(self, name: str, grace_s: int | None = None) -> bool:
        """Delete the pod; ``False`` when it was already gone (404)."""
        kwargs = {} if grace_s is None else {"grace_period_seconds": grace_s}
        try:
            self._call(f"delete pod {name}", self.core.delete_namespaced_pod, name, self.namespace, **kwargs)
        except KubernetesError as err:
            if err.status == 404:
                return False
            raise
        return True

    def logs(self, name: str, tail_lines: int | None = None) -> str:
        """The agent container's output (read raw: the client would parse a log that looks like JSON)."""
        kwargs: dict[str, Any] = {"container": CONTAINER, "_preload_content": False}
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        response = self._call(
            f"read the log of pod {name}", self.core.read_namespaced_pod_log, name, self.namespace, **kwargs
        )
        return bytes(response.data).decode(errors="replace")

    def watch(
        self, timeout_s: int = WATCH_TIMEOUT_S, resource_version: str | None = None
    ) -> Iterator[tuple[str, PodState, str | None]]:
        """Scalar's pods as they change: ``(ADDED|MODIFIED|DELETED, state, resource version)`` until
        ``timeout_s`` ends the stream."""
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        stream = watch.Watch()
        kwargs: dict[str, Any] = {"label_selector": SELECTOR, "timeout_seconds": timeout_s}
        if resource_version:
            kwargs["resource_version"] = resource_version
        try:
            for event in stream.stream(
                self.core.list_namespaced_pod,
                self.namespace,
                _request_timeout=timeout_s + REQUEST_TIMEOUT_S,
                **kwargs,
            ):
                pod = self._plain(event["object"])
                version = (pod.get("metadata") or {}).get("resourceVersion")
                yield str(event["type"]), pod_state(pod), version
        except ApiException as err:
            raise api_error(err, f"watch pods in {self.namespace}", self.namespace, self.host) from None
        except HTTPError as err:
            raise KubernetesError(f"watch pods: cannot reach {self.host}: {err}", retryable=True) from None
        finally:
            stream.stop()


def _context_namespace(data: Mapping[str, Any], context: str | None) -> str | None:
    name = context or data.get("current-context")
    for item in data.get("contexts") or []:
        if item.get("name") == name:
            return (item.get("context") or {}).get("namespace")
    return None
