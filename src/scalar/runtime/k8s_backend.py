"""The Kubernetes launcher: the node agent of each bought node as one pod (docs/agent.md, "Kubernetes backend").

SFCompute's ``h100i`` capacity is a Kubernetes namespace, not machines Scalar can log into. For every live node
bought from a provider of ``[kubernetes].providers`` (``agent_backend.bought_agent_nodes``), this module keeps
one pod ``scalar-agent-<node>`` in the namespace that runs the very same ``python -m scalar.agent`` with a
join token bound to that node, requesting the node's GPUs (``nvidia.com/gpu``). The agent registers like any
other, so the engine's packer places work on the node as on every other agent node: packing stays in one
place, and the pod is only how the agent gets there.

- ``PodsApi`` (``scalar.runtime.k8s_pods``): the namespaced pod calls through the official ``kubernetes``
  client (create, get, list by label, watch, delete, log), each API error a ``KubernetesError`` that says
  what to fix.
- ``KubernetesAgents``: the reconciler. A live node with no registered agent and no pod gets one (a pod that
  already exists, 409 AlreadyExists, is simply kept); a pod whose node is gone (released, ended, failed) is
  deleted (404 on delete: already gone, fine). A controller restarted (or a new leader) adopts the pods by
  their labels. A watch keeps every pod's phase and surfaces problems (``ImagePullBackOff``, ``OOMKilled``,
  a failed agent) in the log and in ``problems()``.

Only the leader reconciles; the pods carry the token as an environment variable (single use, short-lived).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scalar.providers.base import ProviderError
from scalar.runtime.agent_backend import AgentNode, bought_agent_nodes
from scalar.runtime.k8s_pods import (
    WATCH_TIMEOUT_S,
    KubernetesError,
    PodsApi,
    PodState,
    agent_pod,
    pod_name,
)
from scalar.runtime.settings import KubernetesSettings, Settings
from scalar.store import Store

log = logging.getLogger(__name__)


# ---- the reconciler --------------------------------------------------------------------------------------


@dataclass
class Reconciled:
    """One pass: pods created, kept (they existed), deleted, and errors by node."""

    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


class KubernetesAgents:
    """One agent pod per bought node of the Kubernetes-backed providers (see the module's docstring).

    ``wanted()``: the live bought nodes (``bought_agent_nodes``); ``join_token(node)``: a fresh single-use
    token bound to the node (``AgentService.create_join_token`` with its ``node_id``).
    """

    def __init__(
        self,
        pods: PodsApi,
        cfg: KubernetesSettings,
        wanted: Callable[[], list[AgentNode]],
        join_token: Callable[[AgentNode], str],
    ) -> None:
        self.pods = pods
        self.cfg = cfg
        self._wanted = wanted
        self._join_token = join_token
        self._lock = threading.Lock()
        self._states: dict[str, PodState] = {}  # by pod name, from lists and the watch
        self._warned: dict[str, str] = {}
        # a token made for a pod the API refused is used again for the next try (not one token per pass)
        self._unused_tokens: dict[str, tuple[str, float]] = {}
        self.last_error: str | None = None

    @classmethod
    def for_control_plane(
        cls,
        settings: Settings,
        store: Callable[[], Store],
        join_token: Callable[[AgentNode], str],
        env: Mapping[str, str] | None = None,
    ) -> KubernetesAgents:
        cfg = settings.kubernetes
        assert cfg is not None
        return cls(
            PodsApi.from_settings(cfg, env),
            cfg,
            lambda: bought_agent_nodes(store(), cfg.providers),
            join_token,
        )

    # ---- one node ------------------------------------------------------------------------------------

    def ensure(self, node: AgentNode) -> PodState:
        """The node's agent pod, created (with a new join token) unless it exists; idempotent."""
        name = pod_name(node.node_id)
        existing = self.pods.get(name)
        if existing is not None and not existing.deleting:
            self._seen(existing)
            return existing
        manifest = agent_pod(node, self._token_for(node), self.cfg, self.pods.namespace)
        state, created = self.pods.create(manifest)
        self._unused_tokens.pop(node.node_id, None)
        if created:
            log.info("created agent pod %s for node %s in %s", name, node.node_id, self.pods.namespace)
        self._seen(state)
        return state

    def _token_for(self, node: AgentNode) -> str:
        kept = self._unused_tokens.get(node.node_id)
        if kept is not None and time.monotonic() - kept[1] < self.cfg.join_token_ttl_s / 2:
            return kept[0]
        token = self._join_token(node)
        self._unused_tokens[node.node_id] = (token, time.monotonic())
        return token

    def remove(self, node_id: str) -> bool:
        """Delete the node's agent pod (its agent and everything it runs stop); ``False``: already gone."""
        name = pod_name(node_id)
        gone = self.pods.delete(name)
        with self._lock:
            self._states.pop(name, None)
        if gone:
            log.info("deleted agent pod %s of node %s", name, node_id)
        return gone

    def logs(self, node_id: str, tail_lines: int | None = None) -> str:
        return self.pods.logs(pod_name(node_id), tail_lines)

    # ---- all nodes -----------------------------------------------------------------------------------

    def adopt(self) -> list[PodState]:
        """Read Scalar's pods by label (after a restart, or as a new leader)."""
        pods = self.pods.list()
        with self._lock:
            self._states = {p.name: p for p in pods}
        return pods

    def reconcile(self) -> Reconciled:
        """Create the missing pods of nodes whose agent has not registered; delete pods of nodes gone."""
        out = Reconciled()
        wanted = {n.node_id: n for n in self._wanted()}
        pods = {p.node_id: p for p in self.adopt()}
        for node_id, node in sorted(wanted.items()):
            pod = pods.get(node_id)
            if pod is not None and not pod.deleting:
                out.kept.append(node_id)
                continue
            if node.registered:  # its agent runs (or ran) elsewhere or lost its pod: the lease decides
                continue
            try:
                self.ensure(node)
                out.created.append(node_id)
            except (KubernetesError, ProviderError) as err:
                out.errors[node_id] = str(err)
        for node_id, pod in sorted(pods.items()):
            if node_id in wanted or pod.deleting:
                continue
            try:
                self.remove(node_id) if node_id else self.pods.delete(pod.name)
                out.deleted.append(node_id or pod.name)
            except KubernetesError as err:
                out.errors[node_id or pod.name] = str(err)
        for node_id, error in out.errors.items():
            log.warning("agent pod of %s: %s", node_id, error)
        self.last_error = next(iter(out.errors.values()), None)
        return out

    def states(self) -> dict[str, PodState]:
        """The last known state of every agent pod, by node id."""
        with self._lock:
            return {p.node_id or p.name: p for p in self._states.values()}

    def problems(self) -> dict[str, str]:
        """Pods whose agent does not run as it should, by node id: the reason in a sentence."""
        return {node: p.problem for node, p in self.states().items() if p.problem is not None}

    def _seen(self, state: PodState, deleted: bool = False) -> None:
        with self._lock:
            if deleted:
                self._states.pop(state.name, None)
            else:
                self._states[state.name] = state
        problem = None if deleted else state.problem
        if problem and self._warned.get(state.name) != problem:
            log.warning("%s (node %s)", problem, state.node_id)
        if problem:
            self._warned[state.name] = problem
        else:
            self._warned.pop(state.name, None)

    # ---- the loops -----------------------------------------------------------------------------------

    def watch_once(self, timeout_s: int = WATCH_TIMEOUT_S, resource_version: str | None = None) -> str | None:
        """Follow the pods until the stream ends; returns the last resource version seen."""
        for kind, state, version in self.pods.watch(timeout_s, resource_version):
            self._seen(state, deleted=kind == "DELETED")
            resource_version = version or resource_version
        return resource_version

    def run(self, stop: threading.Event, leading: Callable[[], bool]) -> None:
        """Reconcile every ``reconcile_s`` while ``leading()``; a side thread watches the pods."""
        watcher = threading.Thread(
            target=self._watch_loop, args=(stop,), name="scalar-k8s-watch", daemon=True
        )
        watcher.start()
        while not stop.is_set():
            if leading():
                try:
                    self.reconcile()
                except Exception as err:  # the API or the store failed: try again next pass
                    self.last_error = str(err)
                    log.warning("kubernetes reconcile failed: %s", err)
            stop.wait(self.cfg.reconcile_s)

    def _watch_loop(self, stop: threading.Event) -> None:
        version: str | None = None
        while not stop.is_set():
            try:
                version = self.watch_once(
                    min(WATCH_TIMEOUT_S, max(1, int(self.cfg.reconcile_s * 4))), version
                )
            except Exception as err:
                version = None
                log.info("kubernetes watch ended: %s", err)
                stop.wait(self.cfg.reconcile_s)

    def close(self) -> None:
        self.pods.close()


def with_kubernetes_agents(settings: Settings) -> Settings:
    """Nodes of the Kubernetes-backed providers run work only through their agent pods: those providers
    join ``[controller].agent_providers`` (READY once the agent registered; command jobs may go there)."""
    from dataclasses import replace

    cfg = settings.kubernetes
    if cfg is None:
        return settings
    config = settings.controller
    names = tuple(dict.fromkeys((*config.agent_providers, *cfg.providers)))
    if names == config.agent_providers:
        return settings
    return replace(settings, controller=replace(config, agent_providers=names))
