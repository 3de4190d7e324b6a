"""The agent protocol's messages (docs/agent.md): registration, heartbeats, assignments, logs.

The agent always calls the controller (nodes behind NAT work). Every message is idempotent: a heartbeat
carries the full state of each assignment, a log chunk its byte offset, a registration the one-time join
token (or, from a restarted agent, its node id and token).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from scalar.wire.jobs import MAX_PORTS

PROTOCOL = 1
"""Bumped on any incompatible change; the controller refuses an agent with another protocol."""

MAX_LOG_CHUNK_BYTES = 1_000_000
# Finite bounds on what an agent reports: far above any real host.
MAX_HOST_CPUS = 100_000
MAX_HOST_GB = 1_000_000_000.0
MAX_GPU_MEMORY_GB = 10_000.0
MAX_ASSIGNMENTS = 10_000
MAX_PID = 2**31
MAX_COUNTER = 2**62
MAX_SHORT = 200
MAX_BYO_PRICE_PER_GPU_HOUR = Decimal(1000)  # USD per GPU-hour a user-owned host may be priced at

TcpPort = Annotated[int, Field(ge=1, le=65535)]

AssignmentStateName = Literal["starting", "running", "exited", "failed_to_start"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GpuFact(_Model):
    index: int = Field(ge=0, le=1023)
    uuid: str = Field(min_length=1, max_length=200)
    model: str = Field(min_length=1, max_length=100)
    memory_gb: float = Field(ge=0, le=MAX_GPU_MEMORY_GB, allow_inf_nan=False)


class HostFacts(_Model):
    hostname: str = Field(min_length=1, max_length=255)
    gpus: list[GpuFact] = Field(default_factory=list, max_length=64)
    cpu_count: int = Field(ge=0, le=MAX_HOST_CPUS)
    ram_gb: float = Field(ge=0, le=MAX_HOST_GB, allow_inf_nan=False)
    disk_gb: float = Field(ge=0, le=MAX_HOST_GB, allow_inf_nan=False)
    driver_version: str | None = Field(default=None, max_length=MAX_SHORT)
    cuda_version: str | None = Field(default=None, max_length=MAX_SHORT)
    instance_id: str | None = Field(default=None, max_length=MAX_SHORT)
    contract_expires_at: AwareDatetime | None = None
    fake_gpus: bool = False


class RegisterRequest(_Model):
    join_token: str | None = Field(default=None, max_length=200)
    node_id: str | None = Field(default=None, max_length=200, description="a restarted agent's node")
    node_token: str | None = Field(default=None, max_length=200)
    version: str = Field(min_length=1, max_length=64)
    protocol: int = Field(ge=0, le=1_000_000)
    facts: HostFacts


class RegisterReply(_Model):
    node_id: str
    node_token: str
    heartbeat_s: float
    suspect_after_s: float
    lost_after_s: float
    controller_version: str
    protocol: int


class Usage(_Model):
    rss_bytes: int = Field(default=0, ge=0, le=MAX_COUNTER)
    cpu_s: float = Field(default=0.0, ge=0, le=1e12, allow_inf_nan=False)


class AssignmentReport(_Model):
    assignment_id: str = Field(min_length=1, max_length=255)
    state: AssignmentStateName
    pid: int | None = Field(default=None, ge=0, le=MAX_PID)
    exit_code: int | None = Field(default=None, ge=-MAX_PID, le=MAX_PID)
    signal: int | None = Field(default=None, ge=0, le=1024)
    oom: bool = False
    error: str | None = Field(default=None, max_length=2000)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    usage: Usage = Field(default_factory=Usage)
    log_bytes: int = Field(default=0, ge=0, le=MAX_COUNTER)
    # The TCP ports the agent allocated for it (its ``port_count``); sent only when there are some, so an
    # older controller still takes the heartbeats of jobs without ports.
    ports: list[TcpPort] = Field(default_factory=list, max_length=MAX_PORTS)


class Heartbeat(_Model):
    node_id: str = Field(min_length=1, max_length=200)
    node_token: str = Field(min_length=1, max_length=200)
    seq: int = Field(ge=0, le=MAX_COUNTER)
    assignments: list[AssignmentReport] = Field(default_factory=list, max_length=MAX_ASSIGNMENTS)


class Assignment(_Model):
    """What to run: one attempt of a job on this node."""

    assignment_id: str
    job_id: str
    attempt: int
    tenant: str | None = None  # whose job: per-tenant agents run it under the tenant's uid
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    gpu_uuids: list[str] = Field(default_factory=list)
    gpu_indices: list[int] = Field(default_factory=list)
    vram_budget_gb: float | None = None
    vram_fraction: float | None = None
    cpu_cores: float = 0.0
    memory_limit_bytes: int | None = None
    ports: list[int] = Field(default_factory=list)  # unused (always empty): the agent picks the numbers
    port_count: int = Field(default=0, ge=0, le=MAX_PORTS, description="TCP ports the agent allocates")
    deadline: datetime | None = None
    stop_grace_s: float = 10.0


class HeartbeatReply(_Model):
    seq: int
    heartbeat_s: float
    assignments: list[Assignment] = Field(default_factory=list)
    cancel: list[str] = Field(default_factory=list)
    drain: bool = False


class LogChunk(_Model):
    node_id: str = Field(min_length=1, max_length=200)
    node_token: str = Field(min_length=1, max_length=200)
    assignment_id: str = Field(min_length=1, max_length=255)
    offset: int = Field(ge=0, le=MAX_COUNTER)
    data_b64: str = Field(max_length=MAX_LOG_CHUNK_BYTES * 2)


class LogChunkReply(_Model):
    next_offset: int


class JoinTokenRequest(_Model):
    provider: str = Field(default="local", min_length=1, max_length=64)
    tier: str = Field(default="FAST", pattern="^(FAST|FLEX|fast|flex)$")
    ttl_s: float = Field(default=3600.0, gt=0, le=30 * 86400)
    node_id: str | None = Field(default=None, max_length=200)
    price_per_gpu_hour: Decimal = Field(
        default=Decimal(0),
        ge=0,
        le=MAX_BYO_PRICE_PER_GPU_HOUR,
        allow_inf_nan=False,
        description="USD per GPU-hour the user-owned host's block is recorded at (costs, the packer's "
        "price preference); only without node_id",
    )

    @model_validator(mode="after")
    def _price_only_for_own_hosts(self) -> JoinTokenRequest:
        if self.node_id is not None and self.price_per_gpu_hour != 0:
            raise ValueError(
                "price_per_gpu_hour is for a user-owned host (no node_id): a bought node has its "
                "block's price; drop one of them"
            )
        return self


class JoinTokenOut(_Model):
    token: str
    provider: str
    tier: str
    node_id: str | None
    expires_at: datetime
    price_per_gpu_hour: Decimal = Decimal(0)


class NodeRemoveRequest(_Model):
    force: bool = Field(
        default=False,
        description="requeue the node's running jobs now (as when it is lost) instead of letting them finish",
    )


class NodeRemoveOut(_Model):
    node_id: str
    block_id: str
    force: bool
    state: Literal["removing", "removed"]
    jobs: list[str]
    message: str


class AgentOut(_Model):
    """A registered node agent: its host, version, lease and the facts it reported at registration."""

    node_id: str
    provider: str
    hostname: str
    version: str
    lease_state: str = Field(description="its lease (e.g. active, suspect, lost; removed once refused)")
    last_seen_at: str
    last_seq: int
    facts: dict[str, Any]


class AgentsOut(_Model):
    agents: list[AgentOut]


class JobLogsOut(_Model):
    job_id: str
    attempt: int | None
    offset: int
    next_offset: int
    data: str
    finished: bool
