"""The one Protocol every market or cloud implements, the built-in market included.

Calls are synchronous (the runtime runs them off the event loop). Every purchase carries the buyer's
idempotency key: asking twice with the same key returns the same order, never a second one, so a
controller that crashes between "decided to buy" and "bought" can simply ask again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Protocol, runtime_checkable

from scalar.domain.market import CapacityRequest, NodeEvent, Order, SaleFill
from scalar.domain.offers import Offer
from scalar.domain.orderbook import BookOrder


class ProviderError(Exception):
    """A provider could not answer. ``retryable`` says whether asking again later may help."""

    def __init__(self, provider: str, message: str, retryable: bool = True) -> None:
        self.provider = provider
        self.retryable = retryable
        super().__init__(f"{provider}: {message}")


@dataclass(frozen=True, slots=True)
class Book:
    """One instance type's public orderbook; prices in USD per GPU-hour, quantities in GPUs."""

    instance_type: str
    asks: tuple[BookOrder, ...]
    bids: tuple[BookOrder, ...]
    observed_at: datetime


@runtime_checkable
class Provider(Protocol):
    name: str

    def list_offers(self, now: datetime) -> Sequence[Offer]:
        """Everything purchasable now, normalized."""
        ...

    def orderbook(self, instance_type: str, now: datetime) -> Book | None:
        """The public book for an orderbook market; ``None`` for fixed-price sellers."""
        ...

    def buy(self, request: CapacityRequest, idempotency_key: str, now: datetime) -> Order:
        """Place (or find again, by key) a purchase."""
        ...

    def get_order(self, idempotency_key: str, now: datetime) -> Order | None:
        """The order placed with this key, or ``None`` if the seller never saw it."""
        ...

    def release(self, block_id: str, now: datetime) -> None:
        """End a contract early (terminate, or sell the rest back where the market allows)."""
        ...

    def events_since(self, cursor: int, now: datetime) -> tuple[Sequence[NodeEvent], int]:
        """Node lifecycle moves, preemptions and finished jobs after ``cursor``; returns the new cursor."""
        ...


@runtime_checkable
class WorkRunner(Protocol):
    """What runs a job on a node itself: the node agent's backend (``runtime/agent_backend.py``) and the
    built-in market's sellers (on a timer). Real sellers are not runners: their nodes run work through
    Scalar's node agent, so the runtime routes the work of an agent node to the agent backend."""

    def start_work(self, node_id: str, job_id: str, expected_duration_s: int, now: datetime) -> None: ...

    def stop_work(self, node_id: str, job_id: str, now: datetime) -> None: ...


@runtime_checkable
class NodeReleaser(Protocol):
    """A seller billing running time whose nodes end one by one (Prime Intellect's pods, the built-in
    market's hourly sellers): some nodes of a block go while the others run on."""

    def release_nodes(self, block_id: str, node_ids: Sequence[str], now: datetime) -> None:
        """Stop ``node_ids`` of ``block_id`` (their jobs are killed) and stop paying for them; nodes already
        gone are fine. Raises ``ProviderError`` for a node not of the block or a block paid whole."""
        ...


@runtime_checkable
class Reseller(Protocol):
    """A seller of contracts whose buyers may sell unused time back (SFCompute, and the built-in market's
    face of it): a sell order on part or all of a block's remaining time, keyed like a purchase."""

    def sell(
        self,
        block_id: str,
        node_ids: Sequence[str],
        cut: datetime,
        price_per_gpu_hour: Decimal,
        idempotency_key: str,
        now: datetime,
    ) -> SaleFill:
        """Offer ``node_ids``' time from ``cut`` to their block's end; returns what filled (whole nodes)."""
        ...

    def get_sale(self, idempotency_key: str, now: datetime) -> SaleFill | None: ...
