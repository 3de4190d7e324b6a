"""What the controller hears: every input to ``Controller.step`` is one of these frozen events.

Each carries a ``stimulus_id`` (as in Dask's worker state machine): every transition it causes is recorded
with it, so ``story(key)`` says which input moved what. The runtime persists events in order
(``scalar.engine.codec``); replaying them through a fresh controller rebuilds the exact state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from scalar.domain.market import NodeEvent, Order
from scalar.domain.offers import SFCOMPUTE, Offer
from scalar.domain.orderbook import BookOrder


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
class Tick:
    """Time passes: timeouts, expiry, idle release, FLEX batching and scheduling run on every step."""

    stimulus_id: str


Event = JobSubmitted | JobCancelRequested | MarketObserved | OrderUpdated | NodeReported | JobStarted | Tick
EVENT_TYPES: tuple[type, ...] = (
    JobSubmitted,
    JobCancelRequested,
    MarketObserved,
    OrderUpdated,
    NodeReported,
    JobStarted,
    Tick,
)
