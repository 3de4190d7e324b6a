"""The executor's "provider" for work on agent-backed nodes (docs/agent.md).

A start becomes an assignment row (``agent_assignments``) the node's agent picks up at its next heartbeat;
a stop marks it to be stopped; the release of a user-owned host's block tells its agent to drain. No call
leaves the controller: the agent always dials in.

How an agent gets onto a bought node is the job of a launcher; ``bought_agent_nodes`` says which bought
nodes should be running one (and whether it registered yet). The Kubernetes launcher
(``scalar.runtime.k8s_backend``) runs one agent pod per such node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scalar.domain.market import CapacityRequest, NodeEvent, Order
from scalar.domain.offers import Offer
from scalar.providers.base import Book, ProviderError
from scalar.store import Store
from scalar.store import agents as repo

LIVE_NODE_STATES = ("booting", "initializing", "ready", "suspect", "lost")  # a bought node's agent may run
AGENT_PROVIDER = "agent"  # the executor's name for work on agent-backed nodes
DEADLINE_GRACE_S = 60.0  # an assignment's deadline is its host's contract expiry minus this


class AgentBackend:
    """The executor's provider for work on agent-backed nodes: assignments in the database, no calls out."""

    name = AGENT_PROVIDER

    def __init__(self, store: Callable[[], Store]) -> None:
        self._store = store

    def list_offers(self, now: datetime) -> Sequence[Offer]:
        return ()

    def orderbook(self, instance_type: str, now: datetime) -> Book | None:
        return None

    def buy(self, request: CapacityRequest, idempotency_key: str, now: datetime) -> Order:
        raise ProviderError(AGENT_PROVIDER, "agents sell no capacity", retryable=False)

    def get_order(self, idempotency_key: str, now: datetime) -> Order | None:
        return None

    def release(self, block_id: str, now: datetime) -> None:
        """A user-owned host's block ended: its agent drains (starts nothing new)."""
        with self._store().write() as tx:
            for agent in repo.list_agents(tx.conn):
                if agent.facts.get("block_id") == block_id:
                    repo.update_agent(tx.conn, agent.node_id, drain=True)

    def events_since(self, cursor: int, now: datetime) -> tuple[Sequence[NodeEvent], int]:
        return (), cursor

    def start_work(self, node_id: str, job_id: str, expected_duration_s: int, now: datetime) -> None:
        with self._store().write() as tx:
            job = tx.get_projection("jobs", job_id)
            agent = repo.get_agent(tx.conn, node_id)
            if job is None or agent is None:
                what = "job" if job is None else "agent"
                raise ProviderError(AGENT_PROVIDER, f"no {what} for {job_id} on {node_id}", retryable=False)
            spec = assignment_spec(job.data, agent, node_id)
            repo.add_assignment(tx.conn, spec["assignment_id"], node_id, job_id, spec["attempt"], spec, now)

    def stop_work(self, node_id: str, job_id: str, now: datetime) -> None:
        with self._store().write() as tx:
            repo.cancel_job_assignments(tx.conn, job_id, node_id, now)


def assignment_spec(job: Mapping[str, Any], agent: repo.AgentRow, node_id: str) -> dict[str, Any]:
    """The assignment for the job's current attempt on ``node_id``: argv, env, GPUs, limits, deadline."""
    command = job.get("command")
    if not command:
        raise ProviderError(
            AGENT_PROVIDER, f"job {job.get('id')} has no command; agents run commands only", retryable=False
        )
    attempt = int(job.get("preemptions") or 0) + 1
    indices: list[int] = []
    for placement in job.get("placements") or []:
        if placement.get("node_id") == node_id:
            indices = [int(i) for i in placement.get("gpu_indices") or []]
    gpus = {int(g["index"]): g for g in agent.facts.get("gpus") or []}
    missing = [i for i in indices if i not in gpus]
    if missing:
        raise ProviderError(AGENT_PROVIDER, f"node {node_id} has no GPU {missing}", retryable=False)
    vram = float(job.get("vram_per_gpu_gb") or 0.0)
    share = bool(job.get("share_gpu"))
    memory = min((float(gpus[i]["memory_gb"]) for i in indices), default=0.0)
    ram_gb = float(job.get("ram_gb") or 0.0)
    expires = agent.facts.get("contract_expires_at")
    deadline = None
    if expires:
        deadline = (datetime.fromisoformat(str(expires)) - timedelta(seconds=DEADLINE_GRACE_S)).isoformat()
    spec: dict[str, Any] = {
        "assignment_id": f"{job['id']}:{attempt}",
        "job_id": job["id"],
        "attempt": attempt,
        "tenant": str(job.get("tenant") or "default"),
        "argv": list(command),
        "env": dict(job.get("env") or {}),
        "workdir": job.get("workdir"),
        "gpu_uuids": [str(gpus[i]["uuid"]) for i in indices],
        "gpu_indices": indices,
        "vram_budget_gb": vram or (memory if indices else None),
        "vram_fraction": (vram / memory) if share and memory > 0 and vram > 0 else None,
        "cpu_cores": float(job.get("cpu_cores") or 0.0),
        "memory_limit_bytes": int(ram_gb * 1024**3) if ram_gb > 0 else None,
        "ports": [],
        "deadline": deadline,
        "stop_grace_s": 10.0,
    }
    if job.get("ports"):  # the agent allocates them (docs/agent.md, Execution, "Ports")
        spec["port_count"] = int(job["ports"])
    return spec


@dataclass(frozen=True, slots=True)
class AgentNode:
    """A bought node that should run an agent: its block's shape, its contract end and whether its agent
    registered already (``registered``)."""

    node_id: str
    block_id: str
    provider: str
    tier: str
    gpu_count: int
    end_time: str | None
    registered: bool


def bought_agent_nodes(store: Store, providers: Iterable[str]) -> list[AgentNode]:
    """The live nodes (booting to lost) of open blocks bought from ``providers``, from the projections the
    leader writes: the engine knows each of them, so an agent started for one is not ignored."""
    wanted = set(providers)
    out: list[AgentNode] = []
    with store.read() as tx:
        blocks: dict[str, Any] = {}
        for state in LIVE_NODE_STATES:
            for row in tx.list_projection("nodes", state, limit=1_000_000):
                data = row.data
                if data.get("provider") not in wanted:
                    continue
                block_id = str(data.get("block_id") or row.parent_id)
                if block_id not in blocks:
                    blocks[block_id] = tx.get_projection("blocks", block_id)
                block = blocks[block_id]
                if block is None or block.data.get("status") != "open":
                    continue
                end = data.get("end_time")
                out.append(
                    AgentNode(
                        node_id=row.id,
                        block_id=block_id,
                        provider=str(data.get("provider")),
                        tier=str(data.get("tier") or "FAST").upper(),
                        gpu_count=int(data.get("gpu_count") or 0),
                        end_time=None if end is None else str(end),
                        registered=repo.get_agent(tx.conn, row.id) is not None,
                    )
                )
    return sorted(out, key=lambda n: n.node_id)
