"""Executing one outbox action against its provider, and the events its outcome becomes.

Called outside any transaction, with the action id as the idempotency key: a purchase asked for twice
(after a crash between the call and its completion) returns the same order. The outcome is one of:

- done: the call succeeded; ``events`` are its results (``OrderUpdated`` for a purchase, one ``JobStarted``
  per node for a start; none for stop and release, whose effects come back as node events);
- failed for good (a non-retryable ``ProviderError``): ``events`` tell the controller in its own terms
  (a purchase becomes a REJECTED order, so its group backs off; a start that cannot happen preempts the
  job back to PENDING);
- retry: a retryable error (or an unexpected exception); the action goes back to the outbox with a backoff.
  A purchase the seller answered ``PENDING`` (an SFCompute limit order resting on the book) is also asked
  again later with the same key: the seller finds the same order, and its fill (or cancellation) is then
  the purchase's result. The built-in market never answers ``PENDING``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scalar.domain.market import NodeEvent, Order, OrderState
from scalar.engine import (
    Action,
    BuyCapacity,
    JobStarted,
    NodeReported,
    OrderUpdated,
    ReleaseBlock,
    ReleaseNodes,
    SaleUpdated,
    SellCapacity,
    StartWork,
    StopWork,
    action_from_dict,
)
from scalar.engine.codec import action_to_dict
from scalar.engine.events import Event
from scalar.providers.base import NodeReleaser, Provider, ProviderError, Reseller, WorkRunner

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    events: list[Event] = field(default_factory=list)
    failed: bool = False
    retry: bool = False
    error: str | None = None
    result: dict[str, Any] = field(default_factory=dict)


def outbox_payload(action: Action, provider: str | None, blocks: Mapping[str, str]) -> dict[str, Any]:
    """What the outbox stores for an action: the action itself, the provider to call and, for work, the
    block of each node (a start that fails reports the job preempted on that node)."""
    return {"action": action_to_dict(action), "provider": provider, "blocks": dict(blocks)}


def _rejected(action: BuyCapacity, message: str) -> Order:
    return Order(
        order_id=f"unplaced-{action.action_id}",
        idempotency_key=action.action_id,
        state=OrderState.REJECTED,
        request=action.request,
        reason=message,
    )


def _runner(provider: Provider) -> WorkRunner:
    """The provider as what runs work; a seller that runs none refuses for good."""
    if isinstance(provider, WorkRunner):
        return provider
    raise ProviderError(
        provider.name,
        "runs no Scalar jobs itself: work on its nodes starts and stops through Scalar's node agent",
        retryable=False,
    )


def execute(payload: Mapping[str, Any], providers: Mapping[str, Provider], now: datetime) -> Outcome:
    action = action_from_dict(payload["action"])
    name = payload.get("provider")
    provider = providers.get(name) if isinstance(name, str) else None
    blocks: Mapping[str, str] = payload.get("blocks") or {}
    started: list[Event] = []
    try:
        if provider is None:
            raise ProviderError(str(name), "no client for this provider is configured", retryable=False)
        if isinstance(action, BuyCapacity):
            order = provider.buy(action.request, action.action_id, now)
            if order.state is OrderState.PENDING:
                return Outcome(
                    retry=True,
                    error=f"order {order.order_id} at {name} rests on the book (pending); asking again, same key",
                )
            block = order.block.block_id if order.block is not None else None
            return Outcome(
                [OrderUpdated(f"result:{action.action_id}", action.action_id, order)],
                result={"order_id": order.order_id, "state": order.state.value, "block_id": block},
            )
        if isinstance(action, StartWork):
            for placement in action.placements:
                _runner(provider).start_work(
                    placement.node_id, action.job_id, action.expected_duration_s, now
                )
                started.append(
                    JobStarted(
                        f"result:{action.action_id}:{placement.node_id}", action.job_id, placement.node_id
                    )
                )
            return Outcome(started, result={"started_on": list(action.node_ids)})
        if isinstance(action, StopWork):
            _runner(provider).stop_work(action.node_id, action.job_id, now)
            return Outcome(result={"stopped_on": action.node_id})
        if isinstance(action, ReleaseBlock):
            provider.release(action.block_id, now)
            return Outcome(result={"released": action.block_id})
        if isinstance(action, ReleaseNodes):
            if not isinstance(provider, NodeReleaser):
                raise ProviderError(provider.name, "does not stop single nodes of a block", retryable=False)
            provider.release_nodes(action.block_id, action.node_ids, now)
            return Outcome(result={"released": action.block_id, "nodes": list(action.node_ids)})
        if isinstance(action, SellCapacity):
            if not isinstance(provider, Reseller):
                raise ProviderError(provider.name, "takes no sell orders on its contracts", retryable=False)
            fill = provider.sell(
                action.block_id, action.node_ids, action.cut, action.price_per_gpu_hour, action.action_id, now
            )
            return Outcome(
                [SaleUpdated(f"result:{action.action_id}", action.action_id, fill)],
                result={"block_id": action.block_id, "nodes_sold": list(fill.node_ids_sold)},
            )
        raise AssertionError(f"unknown action {type(action).__name__}")  # pragma: no cover
    except ProviderError as err:
        message = str(err)
        if err.retryable:
            return Outcome(retry=True, error=message)
        log.warning("%s %s failed for good: %s", type(action).__name__, action.action_id, message)
        return Outcome(_failure_events(action, message, blocks, started, now), failed=True, error=message)
    except Exception as err:  # a bug or an unwrapped network error: try again later, loudly
        log.exception("%s %s raised; will retry", type(action).__name__, action.action_id)
        return Outcome(retry=True, error=f"{type(err).__name__}: {err}")


def _failure_events(
    action: Action, message: str, blocks: Mapping[str, str], started: list[Event], now: datetime
) -> list[Event]:
    if isinstance(action, BuyCapacity):
        return [OrderUpdated(f"result:{action.action_id}", action.action_id, _rejected(action, message))]
    if isinstance(action, SellCapacity):
        return [SaleUpdated(f"result:{action.action_id}", action.action_id, None, message)]
    if isinstance(action, StartWork):
        done = {e.node_id for e in started if isinstance(e, JobStarted)}
        failed = next((p.node_id for p in action.placements if p.node_id not in done), action.node_id)
        report = NodeEvent(
            node_id=failed,
            block_id=blocks.get(failed, ""),
            at=now,
            job_id=action.job_id,
            job_succeeded=None,
            reason=f"could not start the job: {message}",
        )
        return [*started, NodeReported(f"result:{action.action_id}:failed", report)]
    return []
