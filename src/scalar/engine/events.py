"""What the controller hears: every input to ``Controller.step`` is one of these frozen events.

Each carries a ``stimulus_id`` (as in Dask's worker state machine): every transition it causes is recorded
with it, so ``story(key)`` says which input moved what. The runtime persists events in order
(``scalar.engine.codec``); replaying them through a fresh controller rebuilds the exact state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from scalar.domain.market import NodeEvent, Order, SaleFill
from scalar.domain.offers import SFCOMPUTE, Offer
from scalar.domain.orderbook import BookOrder
from scalar.engine.budget import BudgetLimit


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job as submitted: seed 001's fields, plus a name, the GPU models it accepts and GPU sharing.

    Values are taken as given (a negative GPU count, an unknown tier): ``validate_job_spec`` says what is
    wrong and the controller rejects such a job with those reasons instead of failing. ``job_id`` is chosen
    by whoever accepts the submission (the API); ``submitted_at`` defaults to the step's ``now``.
    For a gang (more GPUs than one node has), ``cpu_cores`` and ``ram_gb`` are per node of the gang.
    """

    job_id: str
    tier: str
    gpu_count: int
    vram_per_gpu_gb: float = 0.0
    cpu_cores: float = 0.0
    ram_gb: float = 0.0
    expected_duration_sec: float = 3600.0
    priority: int = 0
    name: str | None = None
    gpu_models: tuple[str, ...] | None = None
    share_gpu: bool = False
    submitted_at: datetime | None = None
    endpoint_id: str | None = None  # the serverless endpoint this job is a worker of
    tenant: str = "default"  # who submitted it (docs/security.md): jobs are visible to their tenant only
    # What to run: argv, environment and working directory; a job without a command is a pure
    # reservation. A job with a command runs only on agent-backed nodes (scalar.engine.agents).
    command: tuple[str, ...] | None = None
    env: tuple[tuple[str, str], ...] = ()
    workdir: str | None = None
    # CUDA versions the job accepts ("12.4"; seed 004's allowedCudaVersions); None: any (docs/api.md).
    cuda_versions: tuple[str, ...] | None = None
    # TCP ports the node's agent allocates for the command ($PORT, $SCALAR_PORTS; docs/agent.md); 0: none.
    ports: int = 0
    # How often the job checkpoints its work, in seconds of run time (None: never, a restart redoes it all).
    # Procurement weighs spot interruptions against it (domain/contracts.py).
    checkpoint_interval_s: float | None = None
    # May be stopped and restarted elsewhere to save money (consolidation; FLEX only; docs/api.md).
    restartable: bool = False


@dataclass(frozen=True, slots=True)
class MarketBook:
    """One instance type's public book at one provider: asks (and bids) in USD per GPU-hour."""

    asks: tuple[BookOrder, ...]
    bids: tuple[BookOrder, ...] = ()
    provider: str = SFCOMPUTE


@dataclass(frozen=True, slots=True)
class JobSubmitted:
    stimulus_id: str
    spec: JobSpec


@dataclass(frozen=True, slots=True)
class JobCancelRequested:
    stimulus_id: str
    job_id: str


@dataclass(frozen=True, slots=True)
class MarketObserved:
    """Live offers and books. The offers replace those of the ``providers`` they cover (by default the
    providers named in ``offers``); ``books`` (instance type -> book) replace the books of those keys."""

    stimulus_id: str
    offers: tuple[Offer, ...]
    at: datetime
    books: Mapping[str, MarketBook] = field(default_factory=dict)
    providers: tuple[str, ...] = ()

    @property
    def covered_providers(self) -> tuple[str, ...]:
        if self.providers:
            return self.providers
        seen: dict[str, None] = {}
        for offer in self.offers:
            seen.setdefault(offer.provider, None)
        for book in self.books.values():
            seen.setdefault(book.provider, None)
        return tuple(seen)


@dataclass(frozen=True, slots=True)
class OrderUpdated:
    """The seller's answer to the ``BuyCapacity`` whose ``action_id`` was the idempotency key."""

    stimulus_id: str
    action_id: str
    order: Order


@dataclass(frozen=True, slots=True)
class NodeReported:
    """A node moved (booting, initializing, ready, failed, terminated), or a job on it finished
    (``job_id`` + ``job_succeeded``) or was preempted (``job_id`` without ``job_succeeded``)."""

    stimulus_id: str
    event: NodeEvent


@dataclass(frozen=True, slots=True)
class JobStarted:
    """The node confirms the job runs."""

    stimulus_id: str
    job_id: str
    node_id: str


@dataclass(frozen=True, slots=True)
class BudgetsChanged:
    """The spend limits now in force (all of them: they replace the config's and earlier ones)."""

    stimulus_id: str
    limits: tuple[BudgetLimit, ...] = ()


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passes: timeouts, expiry, idle release, FLEX batching and scheduling run on every step."""

    stimulus_id: str


@dataclass(frozen=True, slots=True)
class HostRegistered:
    """A user-owned host's agent registered: a fixed-capacity block of one READY, agent-backed node
    (at ``price_per_gpu_hour``, 0 by default and in events stored before the field existed; never released
    for idleness; it ends at ``end_time`` when the host's contract has one)."""

    stimulus_id: str
    node_id: str
    block_id: str
    provider: str
    instance_type: str
    gpu_model: str | None
    gpu_count: int
    vram_per_gpu_gb: float
    cpu_cores: float
    ram_gb: float
    tier: str = "FAST"
    end_time: datetime | None = None
    cuda_version: str | None = None  # what the host's driver supports ("12.8"); None: unknown
    driver_version: str | None = None
    price_per_gpu_hour: Decimal = Decimal(0)


@dataclass(frozen=True, slots=True)
class HostRemoveRequested:
    """An admin removes a user-owned host (``scalar node remove``): nothing new is placed on it; with
    ``force`` its jobs are requeued as when it is lost (attempt + 1, fenced), otherwise they finish; once it
    runs nothing its block ends (no further cost)."""

    stimulus_id: str
    node_id: str
    force: bool = False
    actor: str = ""


@dataclass(frozen=True, slots=True)
class AgentRegistered:
    """The agent of a node Scalar bought registered: the node is agent-backed and READY."""

    stimulus_id: str
    node_id: str


@dataclass(frozen=True, slots=True)
class AssignmentReported:
    """An agent's report about one attempt of a job: ``outcome`` is ``running``, ``succeeded`` or
    ``failed``. A report for another attempt than the job's current one is fenced (ignored)."""

    stimulus_id: str
    node_id: str
    job_id: str
    attempt: int
    outcome: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SaleUpdated:
    """What the seller filled of the ``SellCapacity`` ``action_id`` (``fill``), or why it could not place it
    (``error``: nothing was sold)."""

    stimulus_id: str
    action_id: str
    fill: SaleFill | None
    error: str | None = None


Event = (
    JobSubmitted
    | JobCancelRequested
    | MarketObserved
    | OrderUpdated
    | NodeReported
    | JobStarted
    | Tick
    | HostRegistered
    | HostRemoveRequested
    | AgentRegistered
    | AssignmentReported
    | BudgetsChanged
    | SaleUpdated
)
EVENT_TYPES: tuple[type, ...] = (
    JobSubmitted,
    JobCancelRequested,
    MarketObserved,
    OrderUpdated,
    NodeReported,
    JobStarted,
    Tick,
    HostRegistered,
    HostRemoveRequested,
    AgentRegistered,
    AssignmentReported,
    BudgetsChanged,
    SaleUpdated,
)
